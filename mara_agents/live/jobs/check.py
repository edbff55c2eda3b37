"""``python -m mara_agents.live.jobs check FILE``: run one step of each job here, in this process, before any Ray.

A job whose ``setup``, ``data`` or ``step`` raises, whose ``step`` does not return ``(state, loss)``, or whose
first loss is not a finite number would fail live only after Ray has started and the workers have loaded their
data.  Run here first, each such job is one line naming the job file, the job and the line of the user's code
that raised (or the ``step`` function's own line, where the value it returned is wrong).  ``run`` checks first
unless given ``--no-check``.  A step runs without a time limit here: ``step_timeout_s`` applies live.
"""

from __future__ import annotations

import math
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mara_env
from mara_env.live.jobs import Job, job_step

# where the project's own frames are: mara_agents/ and mara_env/ (a job's code is anywhere else)
_PACKAGES = tuple(f"{folder}{os.sep}" for folder in (Path(__file__).resolve().parents[2],
                                                    Path(mara_env.__file__).resolve().parent))


@dataclass(frozen=True)
class CheckedJob:
    """One job's first step run here: its wall time (``data``, ``setup`` and ``step``) and loss, or ``problem``,
    the one line that says why it cannot run."""

    name: str
    seconds: float
    loss: float = math.nan
    problem: str = ""


def check_one(job: Job, file: str | Path) -> CheckedJob:
    """Run ``job``'s data loader, ``setup`` and first ``step`` here; a failure is one line naming the file."""
    began = time.perf_counter()
    try:
        _, stats = job_step(job, None, math.inf)
    except Exception as exc:  # the user's code: whatever it raises is reported as one line
        message = f"{type(exc).__name__}: {str(exc).removeprefix(f'job {job.name!r}: ')}".splitlines()[0]
        return CheckedJob(job.name, time.perf_counter() - began,
                          problem=f"{file}: job {job.name!r}: {_user_line(exc, job)}: {message}")
    seconds = time.perf_counter() - began
    if not math.isfinite(stats["loss"]):
        return CheckedJob(job.name, seconds, problem=f"{file}: job {job.name!r}: {_defined_at(job)}: its first "
                                                     f"step reported a non-finite loss ({stats['loss']})")
    return CheckedJob(job.name, seconds, stats["loss"])


def check_all(jobs: Sequence[Job], file: str | Path) -> list[CheckedJob]:
    """:func:`check_one` for every job, in the given order."""
    return [check_one(job, file) for job in jobs]


def format_checks(checked: Sequence[CheckedJob]) -> str:
    """The checked jobs as a table: name, the first step's wall time (loading data included) and first loss."""
    width = max(len("job"), *(len(row.name) for row in checked))
    lines = [f"{'job':<{width}}  first step s  first loss"]
    lines += [f"{row.name:<{width}}  {row.seconds:12.3f}  {row.loss:10.4g}"
              for row in checked]
    return "\n".join(lines)


def _user_line(exc: BaseException, job: Job) -> str:
    """``FILE:LINE`` of the innermost frame outside this project's packages (the user's code that raised), or
    the ``step`` function's definition where the project raised about what ``step`` returned."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__)
              if not str(Path(frame.filename).resolve()).startswith(_PACKAGES)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else _defined_at(job)


def _defined_at(job: Job) -> str:
    """``FILE:LINE`` where ``job.step`` is defined (its name alone where it has no code object)."""
    code = getattr(job.step, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else f"step {job.step!r}"
