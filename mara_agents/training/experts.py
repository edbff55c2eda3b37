"""Privileged experts for imitation: allocators that read what the simulator knows and a policy never sees.

Training only.  :class:`PrivilegedObservation` adds one key to the dict observation, ``true_remaining``: for
each occupied slot, the batches its task still needs before its cumulative-average loss reaches ε, read
through the env's privileged accessor ``privileged_true_remaining`` from the curve the simulator replays (the
curve ahead of a task is never part of the observation).  A task
whose curve never reaches ε within the recorded curve reads as needing more than the curve's remaining
length, so it sorts after every task that can finish.  Empty slots read 0.  :func:`vector_true_remaining`
reads the same for every sub-env of a vector env, for the privileged critic (:mod:`mara_agents.training.critic`).

:class:`PrivilegedSlackExpert` is the FM-slack ranking (:mod:`mara_agents.allocators.slack`) over these true
demands instead of a forecast (on nodes with speeds or a switching cost, that rule's extension: which tasks,
then where): warm-up tasks first (earliest deadline first — a deployed policy must observe a
task before it can know anything about it, so an expert that skipped them could not be imitated), then the
tasks that can still finish by their deadline, least slack first, then the hopeless ones, which are served
only by nodes nothing else needs (serving costs nothing, and greedy MAT decoding is work-conserving anyway).
With the env's abandon action (``abandon=True``) the expert is :class:`PrivilegedAbandoningExpert`: the same ranking, and
a task past warm-up whose true remaining demand exceeds its steps left is abandoned, the most hopeless first,
only to make room (:class:`~mara_agents.allocators.abandon.AbandoningPolicy`), rather than dropping every
active task that can no longer finish.
The MAT student imitates it from the observation and the FM estimates alone
(:mod:`mara_agents.training.imitation`); the deployed policy never sees ``true_remaining``.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mara_agents.rules.hopeless import demand_ratio_score, ready_and_left
from mara_agents.rules.nodes import SwitchCost
from mara_agents.allocators.abandon import AbandoningPolicy
from mara_agents.allocators.slack import SlackPolicy
from mara_env.config import MARAConfig
from mara_env.gym_env import MARAEnv
from mara_env.vector_env import MARAVectorEnv

TRUE_REMAINING = "true_remaining"


def vector_true_remaining(envs: gym.vector.VectorEnv) -> np.ndarray:
    """(N, K) float32 true remaining batches of every sub-env of a MARA vector env: the native one
    (:class:`~mara_env.vector_env.MARAVectorEnv`) or a ``SyncVectorEnv`` of single MARA envs, read through
    their privileged accessor (``privileged_true_remaining``)."""
    base = envs.unwrapped
    if isinstance(base, MARAVectorEnv):
        return base.privileged_true_remaining()
    if isinstance(base, gym.vector.SyncVectorEnv) and all(isinstance(env.unwrapped, MARAEnv) for env in base.envs):
        return np.stack([env.unwrapped.privileged_true_remaining() for env in base.envs])
    raise TypeError(f"true remaining batches need a MARA vector env (native or sync), got {type(base).__name__}")


class PrivilegedObservation(gym.ObservationWrapper):
    """Adds ``true_remaining`` (K,) to the dict observation of a MARA Gymnasium env (training only)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        if not isinstance(env.observation_space, spaces.Dict):
            raise ValueError("PrivilegedObservation needs the dict observation (observation='dict')")
        if not isinstance(env.unwrapped, MARAEnv):
            raise TypeError(f"PrivilegedObservation needs a MARA-v0 env, got {type(env.unwrapped).__name__}")
        num_slots, history_width = env.observation_space["history"].shape
        self.observation_space = spaces.Dict({
            **env.observation_space.spaces,
            TRUE_REMAINING: spaces.Box(0.0, float(history_width + 1), (num_slots,), np.float32)})

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**observation, TRUE_REMAINING: self.env.unwrapped.privileged_true_remaining()}


class PrivilegedSlackExpert(SlackPolicy):
    """The slack ranking over the true remaining batches in ``observation["true_remaining"]``.

    With node features it is FM-slack's rule on nodes (:func:`~mara_agents.rules.slack.node_slack_action`)
    over the same true demands, in batches as the rule reads them: the fastest node to the tightest task that
    fits, and a running task stays on its node unless moving finishes it sooner after paying c.  Given the
    env's ``switch_cost`` it knows c from the first step, as a privileged expert may (a deployed allocator
    reads it from the observation and treats it as unknown until a slot shows it); ``reset`` keeps it.
    """

    def __init__(self, switch_cost: int | None = None) -> None:
        self.demand = None  # no predictor: the demand is read from the privileged observation
        self._switch = SwitchCost(switch_cost)  # reset() keeps a cost the expert was given

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M); each observation must carry ``true_remaining`` (:class:`PrivilegedObservation`)."""
        if any(TRUE_REMAINING not in observation for observation in observations):
            raise ValueError(f"the privileged expert needs observations with {TRUE_REMAINING!r} "
                             "(wrap the env in PrivilegedObservation)")
        return np.stack([self.decide(observation, observation[TRUE_REMAINING]) for observation in observations])


class PrivilegedAbandoningExpert(AbandoningPolicy):
    """The privileged slack ranking with abandoning (module docstring): a task past warm-up is hopeless when its
    true remaining batches exceed its steps left, and abandoned only to make room.  Its joint actions list the
    abandons first (:func:`abandons_first`)."""

    def __init__(self) -> None:
        expert = PrivilegedSlackExpert()

        def score(observations: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
            return [demand_ratio_score(*ready_and_left(obs), obs[TRUE_REMAINING].astype(np.float64), 1.0)
                    for obs in observations]

        super().__init__(expert.act_batch, score, expert.reset, make_room=True, base=expert, threshold=1.0)

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M), abandons first; each observation must carry ``true_remaining``."""
        return abandons_first(super().act_batch(observations), observations[0]["tasks"].shape[0])


def abandons_first(actions: np.ndarray, num_slots: int) -> np.ndarray:
    """Joint actions (N, M) with each row's abandons on its first nodes (in their order), then its serves, then
    its idle nodes.  The paper's nodes are alike, so the row means the same; it is the order in which a student
    that starts as FM-slack + abandon decodes (``MATModel.abandon_prior`` ranks an abandon above every serve), so
    imitation does not spend its steps learning the expert's node order."""
    kind = np.where(actions > num_slots, 0, np.where(actions > 0, 1, 2))
    return np.take_along_axis(actions, np.argsort(kind, axis=1, kind="stable"), axis=1)


def privileged_expert(config: MARAConfig) -> PrivilegedSlackExpert | PrivilegedAbandoningExpert:
    """The expert MAT-IL imitates in an env of ``config``: :class:`PrivilegedAbandoningExpert` with the abandon
    action, else :class:`PrivilegedSlackExpert` (told the env's switching cost)."""
    if config.abandon:
        return PrivilegedAbandoningExpert()
    return PrivilegedSlackExpert(config.switch_cost)
