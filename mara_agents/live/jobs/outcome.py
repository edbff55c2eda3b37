"""What became of each job: read from a live environment after (or during) a schedule, and shown as a table.

The same table is the live progress display (refreshed after every step) and the final report, so what a
user watches is what the run ends with.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from mara_env.live import LiveMARAEnv
from mara_env.live.tasks import tracked


@dataclass(frozen=True)
class JobOutcome:
    """One job's fate: ``outcome`` is ``succeeded``, ``expired``, ``failed`` (its code raised, timed out,
    reported a non-finite loss or outgrew the object store, or an abandoning allocator stopped it: ``reason``
    says which), ``running``, ``queued`` or ``not arrived`` (the last three only for a run cut short)."""

    name: str
    arrival: int
    budget: int
    target: float
    metric: str
    outcome: str
    steps: int
    finished_at: int | None
    value: float | None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form (every field)."""
        return asdict(self)


def job_outcomes(env: LiveMARAEnv) -> list[JobOutcome]:
    """Every job's outcome so far, in the episode's order (by arrival)."""
    failed = env.failed_tasks
    rows = []
    for k, (task, status, losses, left) in enumerate(zip(env.live_episode.tasks, env.task_outcomes(), env.losses,
                                                         env.finished_at())):
        value = float(tracked(losses, task.metric, task.ema_decay)[-1]) if losses else None
        reason = abandon_reason(left) if status == "abandoned" else failed.get(k, "")
        rows.append(JobOutcome(task.family, task.arrival, task.budget, task.eps, task.metric,
                               "failed" if k in failed or status == "abandoned" else status, len(losses), left,
                               value, reason))
    return rows


def abandon_reason(left_at: int) -> str:
    """The reason shown for a job the allocator abandoned; it left at the end of step ``left_at`` − 1."""
    return f"abandoned at step {left_at - 1}: the allocator judged it could not reach its target in time"


def outcome_table(rows: list[JobOutcome], t: int | None = None) -> str:
    """The jobs table: per job its state, steps run against its budget, the tracked loss against ε."""
    counts = {name: sum(row.outcome == name for row in rows) for name in ("succeeded", "expired", "failed")}
    running = sum(row.outcome in ("running", "queued") for row in rows)
    abandoned = sum(row.reason.startswith("abandoned at step") for row in rows)
    head = "" if t is None else f"step {t}: "
    lines = [f"{head}{counts['succeeded']} succeeded, {counts['expired']} expired, {counts['failed']} failed"
             + (f" ({abandoned} abandoned)" if abandoned else "") + f", {running} running or queued, {len(rows)} jobs",
             f"{'job':<22}{'arrival':>8}{'steps/B':>11}{'loss':>10}{'target':>10}  {'metric':<16}{'state':<12}"]
    for row in rows:
        value = "-" if row.value is None else f"{row.value:.4g}"
        state = row.outcome if row.finished_at is None else f"{row.outcome} @{row.finished_at}"
        lines.append(f"{row.name:<22}{row.arrival:>8}{f'{row.steps}/{row.budget}':>11}{value:>10}{row.target:>10.4g}"
                     f"  {row.metric:<16}{state}" + (f": {row.reason}" if row.reason else ""))
    return "\n".join(lines)


class ProgressTable:
    """The jobs table on ``stream``, refreshed in place on a terminal (at most every ``interval_s`` seconds),
    otherwise printed again every ``plain_interval_s`` seconds."""

    def __init__(self, stream: TextIO = sys.stderr, interval_s: float = 0.2, plain_interval_s: float = 10.0):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval_s = interval_s if self.tty else plain_interval_s
        self.shown_lines = 0
        self.last = -float("inf")

    def __call__(self, env: LiveMARAEnv) -> None:
        """Show the table of ``env``'s jobs now, unless it was shown less than the interval ago."""
        now = time.monotonic()
        if now - self.last < self.interval_s:
            return
        self.last = now
        text = outcome_table(job_outcomes(env), env.t)
        if self.tty and self.shown_lines:
            self.stream.write(f"\x1b[{self.shown_lines}F\x1b[J")  # back to the table's first line, clear below
        self.stream.write(text + "\n")
        self.stream.flush()
        self.shown_lines = text.count("\n") + 1
