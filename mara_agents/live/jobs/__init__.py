"""Bring your own jobs: MARA schedules the user's own training jobs, live on Ray.

A :class:`Job` is the user's code — ``setup(seed) -> state`` and ``step(state) -> (state, loss)`` — with a
target loss ε (and the metric it applies to), an arrival step and a budget B in steps, its recipe features
(batch size, learning rate) and its resources.  :func:`schedule` runs a list of jobs on M nodes under any
registered allocator; ``python -m mara_agents.live.jobs run FILE`` does the same for a Python or TOML job file,
``check FILE`` runs one step of each job before any Ray, ``forecast FILE`` prints where each job crosses its
target alone and scores the forecasts, and ``twin FOLDER ...`` replays recorded runs under many arrival
sequences to compare the allocators.  See ``docs/jobs.md``.
"""

from mara_agents.live.jobs.outcome import JobOutcome
from mara_agents.live.jobs.schedule import ScheduleResult, schedule
from mara_env.live.jobs import Job
from mara_env.live.tasks import METRICS

__all__ = ["METRICS", "Job", "JobOutcome", "ScheduleResult", "schedule"]
