"""The live backend: MARA-v0's contract over real training jobs, with Ray as the cluster.

``LiveMARAEnv`` keeps the simulator's bookkeeping (slots, queue, deadlines, rewards, observations) and
replaces its pre-recorded curves by batches that really run: each arriving task is a training run of a
``curves`` family recipe; each step, every task a node serves runs one optimisation batch as a Ray task and
its loss streams back.  Ray is imported when an environment is built, torch only inside the Ray workers.
See ``docs/ray.md``; ``python -m mara_agents.live`` runs a registered policy on it.
"""

from mara_env.live.env import LiveMARAEnv, LiveSettings
from mara_env.live.record import replay, replay_mismatches
from mara_env.live.tasks import LiveEpisode, LiveTask, draw_live_episode

__all__ = ["LiveEpisode", "LiveMARAEnv", "LiveSettings", "LiveTask", "draw_live_episode", "replay",
           "replay_mismatches"]
