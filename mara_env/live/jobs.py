"""User jobs on the live backend: a training job is the user's own code, not a ``curves`` family recipe.

A :class:`Job` is two functions and the facts a scheduler needs:

* ``setup(seed) -> state`` builds the job's initial state (model, optimiser, data position, RNG);
* ``step(state) -> (state, loss)`` runs one unit of work — one optimisation batch, or whatever the user
  counts as a step — and returns the next state and the loss it reports;
* with ``data`` (a function of no arguments), the job's data is loaded once per worker process and passed
  as the last argument: ``setup(seed, data)`` and ``step(state, data)``.  Jobs whose ``data`` is the same
  function (same module and name) share the loaded data within a process.

Between steps the state lives in Ray's object store, exactly as a family task's does, so preemption and
migration cost one state transfer.  Each step runs as one Ray task holding the job's own ``cpus`` and
``gpus``.  :func:`job_step` is what runs inside the worker; :func:`job_episode` turns jobs into the live
episode the environment plays, each job a task whose family is its name, so the recorded bank files its
curve as ``<name>/test/<index>``.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from curves.bank import FamilySpec
from mara_env.live.tasks import METRICS, LiveEpisode, LiveTask

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SOURCE = "user"  # the ``source`` and ``dataset`` a job's curve and family carry in the recorded bank
_DATA: dict[tuple[str, str], Any] = {}  # per worker process: loaded data, keyed by the loader's module and name


@dataclass(frozen=True)
class Job:
    """One user training job and what the scheduler needs to know about it.

    ``target`` is ε; ``metric`` says which series ε applies to (``cumulative_mean``, the benchmark's running
    average of all reported losses; ``ema`` with decay ``ema_decay``; ``last``, see
    :func:`mara_env.live.tasks.tracked`).  The job succeeds at the first step where that series is ≤ ε,
    and expires if that has not happened ``budget`` steps after its ``arrival`` (both in scheduler steps).
    ``batch_size`` and ``lr`` are the recipe features the predictors read (they describe the job; the
    scheduler never changes them).  ``step_timeout_s`` bounds one step's wall time from its submission.
    """

    name: str
    setup: Callable[..., Any]
    step: Callable[..., tuple[Any, float]]
    target: float
    budget: int
    arrival: int = 0
    metric: str = "cumulative_mean"
    ema_decay: float = 0.9
    batch_size: int = 1
    lr: float = 1e-3
    seed: int = 0
    cpus: float = 1.0
    gpus: float = 0.0
    data: Callable[[], Any] | None = None
    step_timeout_s: float | None = None

    def __new__(cls, *args: Any, **fields: Any) -> Job:
        """Refuse an unknown keyword before the dataclass's ``__init__`` does, so that the message names the job
        and the nearest field (a typo such as ``budgte`` reads "did you mean 'budget'?")."""
        unknown = sorted(set(fields) - set(cls.__dataclass_fields__))
        if unknown:
            name = fields.get("name", args[0] if args else None)
            hints = [f"{key!r}" + "".join(f" (did you mean {near!r}?)" for near in
                                          difflib.get_close_matches(key, cls.__dataclass_fields__, 1))
                     for key in unknown]
            raise TypeError(f"job {name!r}: unknown keyword {', '.join(hints)}; a Job has "
                            f"{', '.join(cls.__dataclass_fields__)}")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        where = f"job {self.name!r}"
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise ValueError(f"job name must be 1-64 letters, digits, '_', '.' or '-' (starting with a letter or "
                             f"digit; it names the job's curves and files), got {self.name!r}")
        for field in ("setup", "step"):
            if not callable(getattr(self, field)):
                raise TypeError(f"{where}: {field} must be callable, got {getattr(self, field)!r}")
        if self.data is not None and not callable(self.data):
            raise TypeError(f"{where}: data must be callable or None, got {self.data!r}")
        for field in ("budget", "arrival", "batch_size", "seed"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{where}: {field} must be an integer, got {value!r}")
            object.__setattr__(self, field, int(value))
        for field in ("target", "ema_decay", "lr", "cpus", "gpus"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
                raise TypeError(f"{where}: {field} must be a number, got {value!r}")
            object.__setattr__(self, field, float(value))
        checks = [("target", self.target > 0 and math.isfinite(self.target), "a positive finite number"),
                  ("budget", self.budget >= 1, "at least 1"), ("arrival", self.arrival >= 0, "at least 0"),
                  ("batch_size", self.batch_size >= 1, "at least 1"),
                  ("lr", self.lr > 0 and math.isfinite(self.lr), "a positive finite number"),
                  ("ema_decay", 0.0 <= self.ema_decay < 1.0, "in [0, 1)"),
                  ("cpus", self.cpus >= 0 and math.isfinite(self.cpus), "a non-negative number"),
                  ("gpus", self.gpus >= 0 and math.isfinite(self.gpus), "a non-negative number"),
                  ("metric", self.metric in METRICS, f"one of {', '.join(METRICS)}")]
        for field, ok, rule in checks:
            if not ok:
                raise ValueError(f"{where}: {field} must be {rule}, got {getattr(self, field)!r}")
        if self.step_timeout_s is not None and not (_is_number(self.step_timeout_s) and self.step_timeout_s > 0
                                                    and math.isfinite(self.step_timeout_s)):
            raise ValueError(f"{where}: step_timeout_s must be a positive number or None, got {self.step_timeout_s!r}")


def _is_number(value: object) -> bool:
    """Whether ``value`` is a real number (a bool or a string of digits is not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _reported_loss(job: Job, loss: Any) -> float:
    """A step's loss as a float: a real number, or a one-element NumPy array or torch tensor; anything else (a
    string such as ``"0.56"``, a bool, a list) is a ``TypeError`` naming the job."""
    if hasattr(loss, "item") and not isinstance(loss, numbers.Real):
        try:
            loss = loss.item()
        except (ValueError, RuntimeError):  # more than one element: NumPy's and torch's errors
            pass
    if not _is_number(loss):
        raise TypeError(f"job {job.name!r}: step must return (state, loss) with loss a number, got "
                        f"{type(loss).__name__} {loss!r}")
    return float(loss)


def check_jobs(jobs: Sequence[Job]) -> tuple[Job, ...]:
    """``jobs`` as a tuple, after checking that it is a non-empty sequence of :class:`Job` with unique names."""
    if isinstance(jobs, Job) or not isinstance(jobs, Sequence) or not jobs:
        raise TypeError(f"jobs must be a non-empty sequence of Job, got {jobs!r}")
    for job in jobs:
        if not isinstance(job, Job):
            raise TypeError(f"jobs must hold Job objects, got {job!r}")
    names = [job.name for job in jobs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"job names must be unique, repeated: {', '.join(twice)}")
    return tuple(jobs)


def job_episode(jobs: Sequence[Job]) -> LiveEpisode:
    """The live episode of ``jobs``: one task per job, ordered by arrival (ties keep the given order)."""
    ordered = sorted(check_jobs(jobs), key=lambda job: job.arrival)
    return LiveEpisode(tuple(LiveTask(job.arrival, job.name, job.seed, 0, job.batch_size, job.lr, job.target,
                                      job.budget, job.metric, job.ema_decay) for job in ordered), preset="user")


def job_specs(jobs: Sequence[Job]) -> dict[str, FamilySpec]:
    """One bank family per job, named after it, with the role ``ood`` (a family the predictors were not trained
    on) and no calibrated ε or B rules: a job brings its own."""
    return {job.name: FamilySpec(job.name, "ood", SOURCE, SOURCE, SOURCE,
                                 notes=f"{job.metric} target {job.target:g}, budget {job.budget}") for job in jobs}


def state_nbytes(state: Any) -> int:
    """The bytes a state's arrays, tensors and byte strings hold (nested in dicts, lists and tuples), without
    serialising it: the size it will take in the object store, up to small objects' overhead."""
    if hasattr(state, "nbytes") and isinstance(getattr(state, "nbytes"), int):
        return int(state.nbytes)
    if hasattr(state, "element_size") and hasattr(state, "numel"):  # a torch tensor, without importing torch
        return int(state.element_size() * state.numel())
    if isinstance(state, (bytes, bytearray, str)):
        return len(state)
    if isinstance(state, dict):
        return sum(state_nbytes(key) + state_nbytes(value) for key, value in state.items())
    if isinstance(state, (list, tuple, set, frozenset)):
        return sum(state_nbytes(item) for item in state)
    return 8


def writable(state: Any) -> Any:
    """``state`` with every read-only NumPy array replaced by a writable copy (nested in dicts, lists and
    tuples).  Ray hands large arrays out of the object store as read-only views; a user's step may update its
    arrays in place, as it would offline."""
    if isinstance(state, np.ndarray) and not state.flags.writeable:
        return state.copy()
    if isinstance(state, dict):
        return {key: writable(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)) and not hasattr(state, "_fields"):
        return type(state)(writable(item) for item in state)
    return state


def job_step(job: Job, state: Any, max_state_bytes: float) -> tuple[Any, dict[str, Any]]:
    """Run one step of ``job`` from ``state`` (``None``: call ``setup`` first); returns (next state, stats).

    ``stats`` holds the reported ``loss``, ``compute_s`` (the ``step`` call), ``worker_s`` (the whole call)
    and ``state_bytes``.  A next state larger than ``max_state_bytes`` (the object store's capacity) is not
    returned: ``stats["error"]`` then says why, and the job fails without a retry, as it would again.
    """
    began = time.perf_counter()
    extra: tuple[Any, ...] = ()
    if job.data is not None:
        key = (getattr(job.data, "__module__", ""), getattr(job.data, "__qualname__", repr(job.data)))
        if key not in _DATA:
            _DATA[key] = job.data()
        extra = (_DATA[key],)
    state = job.setup(job.seed, *extra) if state is None else writable(state)
    computed = time.perf_counter()
    result = job.step(state, *extra)
    compute_s = time.perf_counter() - computed
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"step must return (state, loss), got {type(result).__name__}")
    state, loss = result
    stats: dict[str, Any] = {"loss": _reported_loss(job, loss), "compute_s": compute_s,
                             "state_bytes": state_nbytes(state)}
    if stats["state_bytes"] > max_state_bytes:
        stats["error"] = (f"its state ({stats['state_bytes'] / 1e6:.1f} MB) is larger than Ray's object store "
                          f"({max_state_bytes / 1e6:.1f} MB)")
        state = None
    stats["worker_s"] = time.perf_counter() - began
    return state, stats


def run_offline(job: Job, steps: int) -> np.ndarray:
    """The losses of ``job``'s first ``steps`` steps run here, in this process, without Ray or a scheduler
    (ending early at a loss that is not finite): what a live run of the job must reproduce."""
    state, losses = None, []
    for _ in range(steps):
        state, stats = job_step(job, state, math.inf)
        if not math.isfinite(stats["loss"]):
            break
        losses.append(stats["loss"])
    return np.asarray(losses, dtype=np.float32)
