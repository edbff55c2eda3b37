"""The M nodes as M Ray actors, and one step's batches dispatched onto them.

Node i is actor i, holding ``node_cpus`` CPUs (and one GPU on ``cuda``) for the whole run: a warm process that keeps
torch and the data sets loaded, but no task.  Each task's state lives in the object store between batches:
the driver holds only an object reference, passes it to whichever node runs the task next, and keeps the
reference the batch returns, so preemption and migration cost one state transfer.  A batch whose worker
raised or died (the actor is restarted by Ray) is submitted again from the task's last state — the
reference the driver still holds — up to ``attempts`` times; after that the task is reported as failed.  A
batch sent to a node whose actor is still restarting is sent again once it is back, without spending a try.  A loss
that is not finite fails the task at once.

:class:`JobRunner` runs user jobs (:mod:`mara_env.live.jobs`) the same way, except that each step is a Ray task
holding the job's own CPUs and GPUs rather than a call on a node actor, so a step past the job's timeout can
be cancelled (its worker is killed) and the job fails alone.  :func:`connect` is the one place Ray is started
or reached, failing fast on an address nobody answers.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mara_common.ray_support import connect as ray_connect
from mara_env.live.jobs import Job, check_jobs, job_step
from mara_env.live.tasks import LiveTask
from mara_env.live.worker import train_batch, warm_up

STARTUP_TIMEOUT_S = 120.0
RESTART_WAITS = 120  # a batch waits at most this many polls (of POLL_S) for its node's actor to come back
POLL_S = 0.5  # the dispatch loop wakes at least this often: step timeouts and Ctrl-C are handled promptly
# Ray starts worker processes at niceness 15, so on a machine where other processes run at the default priority a
# node gets a few per cent of a core and may not start in time (docs/research/ray_notes.md, "Priority").  A node is the compute
# of the step the env waits for, so it runs at the default priority.  (Ray's job supervisor sets the same
# variable the same way.)
NODE_RUNTIME_ENV = {"env_vars": {"RAY_worker_niceness": "0"}}
# The batches of one dispatch still out: stats reference -> (state reference, node, task key, task, try, sent at).
_Pending = dict[Any, tuple[Any, int, int, LiveTask, int, float]]


def connect(address: str | None = None, num_cpus: int | None = None) -> None:
    """Ray for the live backend: the cluster at ``address``, or (None) a new local Ray with ``num_cpus``
    logical CPUs; ``ConnectionError`` naming the address within ``CONNECT_TIMEOUT_S`` where nobody answers
    (:func:`mara_common.ray_support.connect`)."""
    ray_connect("local" if address is None else address, num_cpus, "live scheduling (MARA-live-v0)")


@dataclass
class StepBatches:
    """The outcome of one step's dispatch: per task its loss, the tasks that failed for good, the timings
    (the dispatch wall time, the slowest batch's and the summed compute, the summed time inside workers)."""

    losses: dict[int, float] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    retries: int = 0
    wall_s: float = 0.0
    compute_max_s: float = 0.0
    compute_sum_s: float = 0.0
    worker_sum_s: float = 0.0


class NodeActor:
    """One node: runs whatever batch it is handed (``batch_function``, the real one by default)."""

    def __init__(self, batch_function: Callable[..., Any] | None = None):
        self.batch_function = batch_function or train_batch

    def warm_up(self, families: list[str], preset: str, data_root: str | None) -> dict[str, dict[str, Any]]:
        """Import torch and load the families' data now rather than in the first batch; returns their facts."""
        return warm_up(families, preset, data_root)

    def run(self, *args: Any) -> tuple[Any, dict[str, float]]:
        """One batch: :func:`~mara_env.live.worker.train_batch`'s arguments and results."""
        return self.batch_function(*args)


class BatchRunner:
    """Runs live tasks' batches on M node actors.

    Nodes that have not started within ``startup_timeout_s`` (each imports torch and loads its families' data
    first) raise ``RuntimeError``, saying whether the cluster is too small for them or only busy.
    """

    def __init__(self, num_nodes: int, families: Sequence[str], device: str = "cpu", preset: str = "cpu",
                 data_root: str | None = None, attempts: int = 3, batch_function: Callable[..., Any] | None = None,
                 node_cpus: float = 1.0, startup_timeout_s: float = STARTUP_TIMEOUT_S):
        import ray

        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.device, self.preset, self.data_root, self.attempts = device, preset, data_root, attempts
        self.states: dict[int, Any] = {}
        gpus = 1.0 if device.startswith("cuda") else 0.0
        actor = ray.remote(num_cpus=node_cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=0,
                           runtime_env=NODE_RUNTIME_ENV)(NodeActor)
        self.nodes = [actor.remote(batch_function) for _ in range(num_nodes)]
        warming = [node.warm_up.remote(list(families), preset, data_root) for node in self.nodes]
        ready, _ = ray.wait(warming, num_returns=num_nodes, timeout=startup_timeout_s)
        if len(ready) < num_nodes:
            total, available = ray.cluster_resources(), ray.available_resources()
            self.close()
            node = f"{num_nodes} node(s) of {node_cpus:g} CPU{' and 1 GPU' if gpus else ''}"
            if total.get("CPU", 0.0) < num_nodes * node_cpus or total.get("GPU", 0.0) < num_nodes * gpus:
                raise RuntimeError(f"the Ray cluster cannot hold {node}: it has {total.get('CPU', 0.0):g} CPU and "
                                   f"{total.get('GPU', 0.0):g} GPU in all")
            raise RuntimeError(f"{num_nodes - len(ready)} of {node} did not start within {startup_timeout_s:g} s "
                               f"(each imports torch and loads its data first); other work may hold the "
                               f"cluster's resources (available: {available})")
        try:
            self.facts: dict[str, dict[str, Any]] = ray.get(warming[0])
        except ray.exceptions.RayTaskError as exc:
            self.close()
            raise ValueError(_first_line(exc)) from None

    def _submit(self, node: int, key: int, task: LiveTask) -> tuple[Any, Any]:
        return self.nodes[node].run.options(num_returns=2).remote(
            task.family, self.preset, self.data_root, self.device, task.seed, task.data_seed, task.batch_size,
            task.lr, self.states.get(key))

    def _timeout(self, task: LiveTask) -> float | None:
        """The longest a batch of ``task`` may take (family batches have no limit)."""
        return None

    def _cancel(self, ref: Any) -> None:
        """Stop a submitted batch (a node actor's call cannot be killed alone; :meth:`close` kills the node)."""
        import ray

        ray.cancel(ref)

    def run(self, jobs: Sequence[tuple[int, int, LiveTask]]) -> StepBatches:
        """Run one batch for every ``(node, task key, task)``; returns when each has a loss or failed for good.

        A failed batch is resubmitted to the same node (Ray restarts a dead actor) with the state reference
        the driver kept, so the retry starts from the task's last good state.  A loss that is not finite, an
        error the worker reports, or a batch past the task's timeout fails the task at once.  If the driver
        is interrupted (Ctrl-C, or SIGTERM mapped to it), every batch still running is cancelled.
        """
        import ray

        out = StepBatches()
        began = time.perf_counter()
        pending: _Pending = {}
        waits: Counter[int] = Counter()
        try:
            for node, key, task in jobs:
                self._send(pending, node, key, task, 1)
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
                for ref in done:
                    self._settle(ref, pending, waits, out)
                self._stop_overdue(pending, out)
        except BaseException:
            # Only batches still running are cancelled: cancelling one whose reply is on its way can abort
            # Ray's core worker ("Tried to complete task that was not pending").
            if pending:
                _, running = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                for ref in running:
                    self._cancel(ref)
            raise
        out.wall_s = time.perf_counter() - began
        return out

    def _send(self, pending: _Pending, node: int, key: int, task: LiveTask, attempt: int) -> None:
        """Submit one batch and remember what it is for, which try it is and when it left."""
        state_ref, stats_ref = self._submit(node, key, task)
        pending[stats_ref] = (state_ref, node, key, task, attempt, time.perf_counter())

    def _settle(self, ref: Any, pending: _Pending, waits: Counter[int], out: StepBatches) -> None:
        """Take the finished batch ``ref``: keep its loss and state, send it again, or fail its task."""
        import ray

        state_ref, node, key, task, attempt, _ = pending.pop(ref)
        try:
            stats = ray.get(ref)
        except ray.exceptions.RayError as exc:
            _consume(state_ref)
            restarting = isinstance(exc, ray.exceptions.ActorUnavailableError) and attempt > 1
            if restarting and waits[key] < RESTART_WAITS:
                # A retry reached the node's actor while it restarts after the crash that made the
                # retry: wait for it, without spending another try.
                waits[key] += 1
                time.sleep(POLL_S)
                self._send(pending, node, key, task, attempt)
            elif attempt < self.attempts:
                out.retries += 1
                self._send(pending, node, key, task, attempt + 1)
            else:
                out.failed[key] = _first_line(exc)
            return
        if "error" in stats or not math.isfinite(stats["loss"]):
            out.failed[key] = stats.get("error") or f"reported a non-finite loss ({stats['loss']})"
            return
        self.states[key] = state_ref
        out.losses[key] = stats["loss"]
        out.compute_max_s = max(out.compute_max_s, stats["compute_s"])
        out.compute_sum_s += stats["compute_s"]
        out.worker_sum_s += stats["worker_s"]

    def _stop_overdue(self, pending: _Pending, out: StepBatches) -> None:
        """Cancel and fail every pending batch that has run longer than its task's timeout."""
        now = time.perf_counter()
        for ref, (_, _, key, task, _, submitted) in list(pending.items()):
            limit = self._timeout(task)
            if limit is not None and now - submitted > limit:
                self._cancel(ref)
                del pending[ref]
                out.failed[key] = f"a step took longer than its timeout of {limit:g} s"

    def forget(self, key: int) -> None:
        """Drop a finished task's state (the object store frees it once no reference is left)."""
        self.states.pop(key, None)

    def close(self) -> None:
        """Release the nodes."""
        import ray

        self.states.clear()
        if ray.is_initialized():
            for node in self.nodes:
                ray.kill(node)
        self.nodes = []


def _consume(ref: Any) -> None:
    """Read a failed batch's state reference, whose error is the one already reported (Ray would otherwise
    log it again as an unhandled error when the reference is dropped)."""
    import ray

    try:
        ray.get(ref, timeout=0)
    except (ray.exceptions.RayError, TimeoutError):
        pass


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}".strip()


class JobRunner(BatchRunner):
    """Runs user jobs' steps (:func:`~mara_env.live.jobs.job_step`), each as a Ray task with the job's own
    resources; the node a step serves is the scheduler's unit of allocation, not a Ray actor.

    A job that asks for more CPUs or GPUs than the whole cluster has is refused with ``ValueError`` naming it.
    A state larger than ``max_state_bytes`` (default: the object store's capacity) fails its job.
    """

    def __init__(self, jobs: Sequence[Job], attempts: int = 3, max_state_bytes: float | None = None):
        import ray

        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.attempts, self.states, self.nodes, self.facts = attempts, {}, [], {}
        total = ray.cluster_resources()
        for job in check_jobs(jobs):
            if job.cpus > total.get("CPU", 0.0) or job.gpus > total.get("GPU", 0.0):
                raise ValueError(f"job {job.name!r} needs {job.cpus:g} CPU and {job.gpus:g} GPU per step; the Ray "
                                 f"cluster has {total.get('CPU', 0.0):g} CPU and {total.get('GPU', 0.0):g} GPU")
        self.max_state_bytes = float(max_state_bytes or total.get("object_store_memory", math.inf))
        self.jobs = {job.name: (ray.put(job), job) for job in jobs}
        self.step_function = ray.remote(job_step)

    def _submit(self, node: int, key: int, task: LiveTask) -> tuple[Any, Any]:
        ref, job = self.jobs[task.family]
        return self.step_function.options(num_cpus=job.cpus, num_gpus=job.gpus, num_returns=2, max_retries=0,
                                          runtime_env=NODE_RUNTIME_ENV).remote(ref, self.states.get(key),
                                                                               self.max_state_bytes)

    def _timeout(self, task: LiveTask) -> float | None:
        return self.jobs[task.family][1].step_timeout_s

    def _cancel(self, ref: Any) -> None:
        """Kill the step's worker process (a user's step may never return on its own)."""
        import ray

        ray.cancel(ref, force=True)
