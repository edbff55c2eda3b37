"""Where an evaluation's time and memory go: CPU time per episode for each method, and each process's peak.

    python -m benchmarks.profile_evaluation                       # the full evaluation, empty scratch cache
    python -m benchmarks.profile_evaluation table2 --loads 0.04   # any evaluate.py experiments and flags

It runs ``evaluate.py`` with the given arguments (into a new scratch directory unless ``--out`` is given, so
shipped results are never overwritten) and times every unit of work inside the process that plays it, and
the probes and Table 1 inside theirs.  The peaks are each process's own maximum resident set:
``/usr/bin/time`` on the command reports only the main process, since the workers are the fork server's
children.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mara_agents.evaluation import cli, harness
from mara_common.cli import run_command

_play_unit = harness.run_unit
# The steps outside the units that may run in processes of their own, timed by :func:`timed_step`.
_STEPS = {"probing": harness.probe, "Table 1": cli.compute_table1}


def timed_run_unit(log: str, unit: harness.Unit, bank: str, num_nodes: int) -> list[dict[str, Any]]:
    """:func:`harness.run_unit`, appending (process, method, episodes, CPU s, wall s, peak MiB) to ``log``
    (bound with :func:`functools.partial`, so the path travels with each unit to whichever process plays it)."""
    wall, cpu = time.perf_counter(), time.process_time()
    rows = _play_unit(unit, bank, num_nodes)
    line = (f"{os.getpid()}\t{unit.method}\t{len(unit.keys)}\t{time.process_time() - cpu:.3f}\t"
            f"{time.perf_counter() - wall:.3f}\t{peak_mib()}\n")
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(line)
    return rows


def timed_step(log: str, step: str, *args: Any) -> Any:
    """Step ``step`` of :data:`_STEPS` (one probe, Table 1), appending (process, step, CPU s, wall s, peak MiB)
    to ``log``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = _STEPS[step](*args)
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\t{step}\t{time.process_time() - cpu:.3f}\t{time.perf_counter() - wall:.3f}\t"
                     f"{peak_mib()}\n")
    return result


def step_lines(log: Path) -> list[str]:
    """One line per (step, process) of :func:`timed_step`'s log: its CPU and wall seconds, and the process's
    peak."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else ():
        pid, step, cpu, wall, peak = line.split("\t")
        total = totals[step, pid]
        total[0], total[1], total[2] = total[0] + float(cpu), total[1] + float(wall), max(total[2], int(peak))
    return [f"{step}, process {pid}: {cpu:.1f} CPU s, {wall:.1f} s wall, peak {peak:.0f} MiB"
            for (step, pid), (cpu, wall, peak) in totals.items()]


def peak_mib() -> int:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def summary(log: Path) -> str:
    """The per-method table and the per-process peaks, from the units' log lines."""
    methods: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    peaks: dict[str, int] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        pid, method, episodes, cpu, _, peak = line.split("\t")
        methods[method][0] += int(episodes)
        methods[method][1] += float(cpu)
        peaks[pid] = max(peaks.get(pid, 0), int(peak))
    total = sum(cpu for _, cpu in methods.values())
    lines = ["| method | episodes | CPU s | share | CPU ms per episode |", "|---|---:|---:|---:|---:|"]
    for method, (episodes, cpu) in sorted(methods.items(), key=lambda item: -item[1][1]):
        lines.append(f"| {method} | {episodes:.0f} | {cpu:.1f} | {100 * cpu / total:.1f} % | "
                     f"{1000 * cpu / episodes:.0f} |")
    lines.append(f"| all units | {sum(e for e, _ in methods.values()):.0f} | {total:.1f} | | |")
    lines.append("")
    lines.append("peak memory of the processes that played units: "
                 + (", ".join(f"{peak} MiB" for peak in sorted(peaks.values(), reverse=True)) or "none played one"))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation with ``argv`` (evaluate.py's arguments), then print where its time went."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(arg == "--out" or arg.startswith("--out=") for arg in args):
        args += ["--out", tempfile.mkdtemp(prefix="mara-profile-")]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mara-profile-") as scratch:
        log, steps_log = Path(scratch) / "units.tsv", Path(scratch) / "steps.tsv"
        log.touch()
        harness.run_unit = partial(timed_run_unit, str(log))
        harness.probe = partial(timed_step, str(steps_log), "probing")
        cli.compute_table1 = partial(timed_step, str(steps_log), "Table 1")
        try:
            status = run_command(lambda: cli.main(args), cli.ERRORS, cli.INTERRUPTED)
        finally:
            harness.run_unit, harness.probe, cli.compute_table1 = _play_unit, _STEPS["probing"], _STEPS["Table 1"]
        if status not in (0, 1):  # refused or interrupted: said so in one line, nothing to profile
            return status
        table = "\n".join([f"{summary(log)}; main process {peak_mib()} MiB", *step_lines(steps_log)])
    print(f"\n{table}\nwall time {time.perf_counter() - start:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
