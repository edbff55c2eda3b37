"""Run the evaluation's units of work as Ray tasks: ``evaluate.py --ray [ADDRESS]``.

A unit of work (:class:`~mara_agents.evaluation.harness.Unit`) is a pure function of the unit, the bank and
M, so each one becomes one Ray task with one CPU and one thread.  The driver stays the cache's only writer:
it stores each unit's episodes as the unit finishes, so an interrupted run resumes, and the rows equal the
local path's.  Ray runs locally (``ray.init`` with ``jobs`` logical CPUs) unless an address names a cluster.
A task whose worker died is retried by Ray; a unit that keeps failing, or raises, stops the evaluation with
one line naming it.  Ctrl-C or SIGTERM cancels the outstanding tasks, and a Ray that this module started is
shut down again; a cluster that it only connected to keeps running.  A cluster address is probed first
(:func:`check_reachable`): an address where nothing answers fails within
:data:`mara_common.ray_support.CONNECT_TIMEOUT_S` with one line naming it, instead of Ray retrying its
connection for minutes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mara_common import ray_support
from mara_agents.evaluation.harness import BOUNDS, Unit, run_unit
from mara_agents.evaluation.workers import one_thread

LOCAL = "local"  # the --ray value (and Ray's own address) that asks for a new local Ray, not a cluster
RETRIES = 2  # Ray resubmits a task whose worker died this many times
POLL_S = 0.5  # the driver wakes at least this often, so Ctrl-C and SIGTERM are handled promptly

Finish = Callable[[Unit, list[dict[str, Any]]], None]


class RayEvaluationError(RuntimeError):
    """The Ray path cannot go on: Ray is missing, Ray cannot be started or reached, or a unit failed for good."""


def require_ray() -> Any:
    """The ``ray`` module, or :class:`RayEvaluationError` saying how to install it."""
    try:
        return ray_support.require_ray("--ray")
    except ModuleNotFoundError as exc:
        raise RayEvaluationError(str(exc)) from exc


def check_reachable(address: str) -> None:
    """:func:`mara_common.ray_support.check_reachable` with its refusal as :class:`RayEvaluationError` naming
    ``--ray``."""
    try:
        ray_support.check_reachable(address)
    except ConnectionError as exc:
        raise RayEvaluationError(f"--ray: cannot reach the Ray cluster at {address}: {exc}") from None


def play_remote(unit: Unit, bank: str, num_nodes: int, path: Sequence[str]) -> list[dict[str, Any]]:
    """Worker side of one task: the driver's import path (user policies are imported on the worker by name),
    one thread, then the unit as the local path runs it."""
    sys.path.extend(entry for entry in path if entry not in sys.path)
    one_thread()
    return run_unit(unit, bank, num_nodes)


def run_on_ray(pending: Sequence[Unit], bank: str, num_nodes: int, address: str, num_cpus: int,
               finish: Finish) -> None:
    """Run the units as Ray tasks and hand each finished unit's rows to ``finish`` (on the driver).

    ``address`` is :data:`LOCAL` for a local Ray of ``num_cpus`` CPUs, else a cluster address (``auto``,
    ``host:port``, ``ray://host:port``).  An already connected Ray (``ray.init`` called by the caller) is used
    as it is and left running.  Nothing starts when there is nothing to run.
    """
    if not pending:
        return
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        _connect(address, num_cpus)
    try:
        _run_all(ray, pending, bank, num_nodes, finish)
    finally:
        if started:
            ray.shutdown()


def _connect(address: str, num_cpus: int) -> None:
    """Start or reach Ray (:func:`mara_common.ray_support.connect`); a failure is one line naming ``--ray``."""
    try:
        ray_support.connect(address, num_cpus, "--ray")
    except ConnectionError as exc:
        raise RayEvaluationError(f"--ray: {exc}") from None

def _run_all(ray: Any, pending: Sequence[Unit], bank: str, num_nodes: int, finish: Finish) -> None:
    """Submit every unit, collect them as they finish, and cancel what is left if anything goes wrong."""
    remote = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(play_remote)
    path, bank = list(sys.path), os.path.abspath(bank)
    refs = {remote.remote(_absolute(unit), bank, num_nodes, path): unit for unit in pending}
    try:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=POLL_S)
            for ref in ready:
                unit = refs.pop(ref)
                try:
                    rows = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    raise RayEvaluationError(_failure(ray, unit, exc)) from exc
                finish(unit, rows)
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise


def _absolute(unit: Unit) -> Unit:
    """The unit with absolute workload paths: a worker's current directory need not be the driver's."""
    targets = tuple(dataclasses.replace(t, path=os.path.abspath(t.path)) for t in unit.targets)
    return dataclasses.replace(unit, targets=targets)


def describe(unit: Unit) -> str:
    """A unit in words: method and seed (or the bounds), task sets and loads, roots, episode count."""
    who = "the bounds" if unit.method == BOUNDS else unit.method + ("" if unit.seed is None else f" seed {unit.seed}")
    cells = dict.fromkeys(t.task_set + ("" if t.load is None else f" p={t.load:g}") for t in unit.targets)
    roots = sorted({t.root for t in unit.targets})
    return (f"{who} on {', '.join(cells)}, root{'s' if len(roots) > 1 else ''} {', '.join(map(str, roots))} "
            f"({len(unit.targets)} episode{'s' if len(unit.targets) > 1 else ''})")


def _failure(ray: Any, unit: Unit, exc: BaseException) -> str:
    """One line: which unit failed, and whether it raised or its worker kept dying."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ray.exceptions.RayTaskError) and cause is not None:
        return f"unit {describe(unit)} raised {type(cause).__name__}: {_first_line(cause)}"
    return f"unit {describe(unit)} failed {RETRIES + 1} times: {type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
