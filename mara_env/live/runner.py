"""The M nodes as M Ray actors, and one step's batches dispatched onto them.

Node i is actor i, holding ``node_cpus`` CPUs (and one GPU on ``cuda``) for the whole run: a warm process that keeps
torch and the data sets loaded, but no task.  Each task's state lives in the object store between batches:
the driver holds only an object reference, passes it to whichever node runs the task next, and keeps the
reference the batch returns, so preemption and migration cost one state transfer.  A batch whose worker
raised or died (the actor is restarted by Ray) is submitted again from the task's last state — the
reference the driver still holds — up to ``attempts`` times; after that the task is reported as failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from curves.ray_support import require_ray
from mara_env.live.tasks import LiveTask
from mara_env.live.worker import train_batch, warm_up

STARTUP_TIMEOUT_S = 120.0
# Ray starts worker processes at niceness 15, so on a machine where other processes run at the default priority a
# node gets a few per cent of a core: two 0.5-CPU nodes beside two busy loops on 2 cores took over 120 s to import
# torch and load their data, against 14 s at niceness 0.  A node is the compute of the step the env waits for, so
# it runs at the default priority.  (Ray's job supervisor sets the same variable the same way.)
NODE_RUNTIME_ENV = {"env_vars": {"RAY_worker_niceness": "0"}}


def connect(address: str | None = None, num_cpus: int | None = None) -> None:
    """``ray.init`` once: the cluster at ``address``, or a new local Ray with ``num_cpus`` logical CPUs (never a
    cluster that ``RAY_ADDRESS`` or a running ``ray start`` happens to name: local means local)."""
    ray = require_ray("live scheduling (MARA-live-v0)")

    if ray.is_initialized():
        return
    if address is not None:
        ray.init(address=address, include_dashboard=False)
    else:
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)


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

    def run(self, jobs: Sequence[tuple[int, int, LiveTask]]) -> StepBatches:
        """Run one batch for every ``(node, task key, task)``; returns when each has a loss or failed for good.

        A failed batch is resubmitted to the same node (Ray restarts a dead actor) with the state reference
        the driver kept, so the retry starts from the task's last good state.
        """
        import ray

        out = StepBatches()
        began = time.perf_counter()
        pending: dict[Any, tuple[Any, int, int, LiveTask, int]] = {}
        for node, key, task in jobs:
            state_ref, stats_ref = self._submit(node, key, task)
            pending[stats_ref] = (state_ref, node, key, task, 1)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            state_ref, node, key, task, attempt = pending.pop(done[0])
            try:
                stats = ray.get(done[0])
            except ray.exceptions.RayError as exc:
                if attempt < self.attempts:
                    out.retries += 1
                    state_ref, stats_ref = self._submit(node, key, task)
                    pending[stats_ref] = (state_ref, node, key, task, attempt + 1)
                else:
                    out.failed[key] = _first_line(exc)
                continue
            self.states[key] = state_ref
            out.losses[key] = stats["loss"]
            out.compute_max_s = max(out.compute_max_s, stats["compute_s"])
            out.compute_sum_s += stats["compute_s"]
            out.worker_sum_s += stats["worker_s"]
        out.wall_s = time.perf_counter() - began
        return out

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


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}".strip()
