"""``schedule(jobs, policy, nodes)``: play the user's jobs live under a registered allocator, save, replay.

The jobs run on the live backend (:class:`mara_env.live.LiveMARAEnv` with ``jobs=``): every step the
allocator picks which jobs the M nodes serve, each served job runs one step on Ray, and its loss streams
back into the observation.  The run ends when every job has left (succeeded, expired or failed) or after
``max_steps``.  It then writes into ``out``:

* ``bank/`` — each job's reported losses as a curve bank, ``<job name>/test/<index>``;
* ``episode.json`` — the settings, the jobs, and per step the joint action, the losses, failures, timings;
* ``jobs.json`` — each job's outcome (:class:`~mara_agents.live.jobs.outcome.JobOutcome`);

and replays the decisions in the simulator over the recorded curves (:func:`mara_env.live.replay_mismatches`).
"""

from __future__ import annotations

import inspect
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mara_common.atomic import atomic_write_json
from mara_common.ray_support import require_ray
from mara_agents.live.jobs.outcome import JobOutcome, ProgressTable, job_outcomes, outcome_table
from mara_agents.live.command import latency_rows, play_episode, writable_folder
from mara_agents.play.policy import Policy
from mara_agents.allocators.registry import POLICIES, make_policy
from mara_env.config import MARAConfig
from mara_env.live import LiveMARAEnv, LiveSettings, replay_mismatches
from mara_env.live.jobs import Job, check_jobs

OUTCOMES_FILE = "jobs.json"
PROJECT_PACKAGES = ("mara_common", "curves", "mara_env", "mara_agents")


def ship_by_value(jobs: Sequence[Job]) -> None:
    """Have Ray send the code of jobs defined outside an installed package (a script, a test file, a job file)
    by value: a worker process cannot import such a module by name."""
    from ray import cloudpickle

    for job in jobs:
        for function in (job.setup, job.step, job.data):
            module = sys.modules.get(getattr(function, "__module__", None) or "")
            path = str(getattr(module, "__file__", "") or "")
            if (module is None or module.__name__ == "__main__" or module.__name__.split(".")[0] in PROJECT_PACKAGES
                    or not path or "site-packages" in path or "dist-packages" in path):
                continue
            cloudpickle.register_pickle_by_value(module)


@dataclass
class ScheduleResult:
    """A finished schedule: where it was saved, each job's outcome, the replay's verdict, per-step timings."""

    out: Path
    policy: str
    nodes: int
    jobs: list[JobOutcome]
    mismatches: list[str]
    steps: list[dict[str, float]]
    metrics: dict[str, float]

    @property
    def successes(self) -> int:
        """Jobs that reached their target before their deadline."""
        return sum(job.outcome == "succeeded" for job in self.jobs)

    def table(self) -> str:
        """The jobs table, node utilisation, the per-step latency split, and the replay's verdict."""
        lines = [f"policy {self.policy}, {self.nodes} nodes, {len(self.steps)} steps", outcome_table(self.jobs),
                 f"\nnode utilisation {100 * self.metrics['utilisation']:.1f}%",
                 f"{'per-step latency (ms)':<34}{'mean':>8}{'p50':>8}{'p95':>8}{'max':>8}"]
        for label, values in latency_rows(self.steps) if self.steps else []:
            lines.append(f"{'  ' + label:<34}{values.mean():>8.2f}{np.median(values):>8.2f}"
                         f"{np.percentile(values, 95):>8.2f}{values.max():>8.2f}")
        verdict = "identical successes and expiries" if not self.mismatches else f"{len(self.mismatches)} mismatch(es)"
        lines.append(f"replay in the simulator: {verdict}")
        lines.extend(f"  {line}" for line in self.mismatches[:10])
        return "\n".join(lines)


def trained_nodes(policy: Policy) -> int | None:
    """The M a learned policy was trained for (MAT and MaskablePPO checkpoints fix it), or ``None`` if any M
    will do."""
    model = getattr(policy, "model", None)
    hparams = getattr(model, "hparams", None) or getattr(policy, "hparams", None)
    return getattr(hparams, "num_nodes", None) or getattr(policy, "num_nodes", None)


def named_policy(name: str, fm_checkpoint: str = "") -> Policy:
    """The registered allocator ``name``, reading FM from ``fm_checkpoint`` where it reads FM at all (``""``: the
    shipped FM; a policy without a predictor ignores it)."""
    accepts = name in POLICIES and "fm_checkpoint" in inspect.signature(POLICIES[name].factory).parameters
    return make_policy(name, **({"fm_checkpoint": str(fm_checkpoint)} if fm_checkpoint and accepts else {}))


def abandons(policy: Policy) -> bool:
    """Whether ``policy`` gives up tasks and so needs the abandon action (``MARAConfig(abandon=True)``, 2K + 1
    choices per node): a policy says so with a true ``abandons`` attribute, as the abandoning allocators
    (``mara_agents.allocators.abandon``) and a MAT with the abandon head do."""
    return bool(getattr(policy, "abandons", False))


def build_policy(policy: str | Policy, nodes: int, fm_checkpoint: str = "") -> tuple[str, Policy]:
    """(label, policy) for a registered name (built with ``fm_checkpoint``, :func:`named_policy`) or a policy
    object; a policy trained for another M is refused."""
    if isinstance(policy, str):
        name, chooser = policy, named_policy(policy, fm_checkpoint)
    elif callable(getattr(policy, "act", None)):
        name, chooser = type(policy).__name__, policy
    else:
        raise TypeError(f"policy must be a registered name ({', '.join(sorted(POLICIES))}) or an object with "
                        f"act(observation), got {policy!r}")
    trained = trained_nodes(chooser)
    if trained is not None and trained != nodes:
        raise ValueError(f"policy {name!r} was trained for M = {trained} nodes and cannot drive nodes={nodes}; "
                         f"run it with nodes={trained}")
    return name, chooser


def schedule(jobs: Sequence[Job], policy: str | Policy = "slack-fm", nodes: int = 4, address: str | None = None, *,
             out: str | Path | None = None, max_active: int = 10, max_steps: int | None = None, attempts: int = 3,
             seed: int = 0, progress: bool = False, fm_checkpoint: str | Path = "") -> ScheduleResult:
    """Run ``jobs`` on ``nodes`` nodes under ``policy`` (a registered allocator's name or a policy object).

    ``address`` names a Ray cluster; ``None`` uses the Ray this process has already started, or starts a
    local one (with max(M × the largest job's CPUs, this machine's CPUs) logical CPUs) and shuts it down at
    the end.  ``max_active`` is K, the job slots the allocator sees (MAT checkpoints were trained with 10).
    ``attempts`` counts the tries of a step whose worker raised or died.  ``out`` defaults to a new scratch
    folder.  ``progress`` shows the refreshing jobs table on stderr.  ``fm_checkpoint`` is the FM a registered
    policy that reads FM uses (``""``: the shipped one), e.g. one fine-tuned on the user's recorded jobs.

    An abandoning allocator (``slack-fm+abandon``, ``edf+abandon``, ...) runs with the abandon action: a job it
    abandons is stopped, its state dropped, and it leaves as ``failed`` with the step in its reason.

    On Ctrl-C (or SIGTERM mapped to ``KeyboardInterrupt``) the running steps are cancelled, what was recorded
    is saved to ``out``, and ``KeyboardInterrupt`` is raised again.
    """
    ray = require_ray("mara_agents.live.jobs.schedule")
    jobs = check_jobs(jobs)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a positive integer, got {nodes!r}")
    label, chooser = build_policy(policy, nodes, str(fm_checkpoint))
    window = max(job.arrival for job in jobs) + 1
    config = MARAConfig(num_nodes=nodes, max_active=max_active, arrival_window=window, max_nodes=max(16, nodes),
                        abandon=abandons(chooser))
    settings = LiveSettings(max_steps=max_steps, attempts=attempts, address=address)
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="mara-jobs-"))
    writable_folder(out)
    started = not ray.is_initialized()
    env = None
    ship_by_value(jobs)
    try:
        env = LiveMARAEnv(config, settings, jobs=jobs)
        shown = ProgressTable() if progress else None
        steps: list[dict[str, float]] = []
        try:
            steps = play_episode(env, chooser, seed, progress=False, on_step=shown)
        finally:  # also on an interruption: keep what was recorded
            if env.log is not None:
                save(env, out, label, steps)
        return ScheduleResult(out, label, nodes, job_outcomes(env), replay_mismatches(out), steps, env.metrics())
    finally:
        if env is not None:
            env.close()
        if started and ray.is_initialized():
            ray.shutdown()


def save(env: LiveMARAEnv, out: Path, policy: str, steps: list[dict[str, Any]]) -> None:
    """Write the bank, the episode log and ``jobs.json`` into ``out``."""
    env.save(out, policy=policy, policy_s=[s["policy_s"] for s in steps])
    atomic_write_json(out / OUTCOMES_FILE, {"policy": policy, "jobs": [row.to_json() for row in job_outcomes(env)]})
