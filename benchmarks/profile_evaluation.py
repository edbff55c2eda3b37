"""Where an evaluation's time and memory go: CPU time per episode for each method, split into its parts, and
each process's peak.

    python -m benchmarks.profile_evaluation                       # the full evaluation, empty scratch cache
    python -m benchmarks.profile_evaluation table2 --loads 0.04   # any evaluate.py experiments and flags
    python -m benchmarks.profile_evaluation --roots 1             # every table, a fifth of the episodes

It runs ``evaluate.py`` with the given arguments (into a new scratch directory unless ``--out`` is given, so
shipped results are never overwritten) and times every unit of work inside the process that plays it, and
the probes and Table 1 inside theirs.  Three tables follow:

* per method: episodes, CPU seconds and milliseconds per episode;
* per method, the share of its CPU time in each part (:mod:`benchmarks.time_split`: FM, WLS, the answer
  sharing around them, torch policy forwards, the environment, the Oracle and Clairvoyant bounds, and the rest,
  which is the method's own logic and the play loop);
* per experiment (each (method, task set, load) counted for the first experiment that asks for it, as the
  evaluation plays it once) and method: the CPU seconds spent and those projected for the default episode
  counts (``--roots`` and ``--episodes`` scale every unit's episodes alike; Table 1, the probes and each
  process's imports are not scaled).

The peaks are each process's own maximum resident set: ``/usr/bin/time`` on the command reports only the
main process, since the workers are the fork server's children.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.time_split import PARTS, part_clock, spent_since
from mara_agents.evaluation import cli, harness
from mara_agents.evaluation.experiments import Selection, plan
from mara_env.fixed_workloads import EPISODES_PER_ROOT, ROOTS
from mara_common.cli import run_command

_play_unit = harness.run_unit
# The steps outside the units that may run in processes of their own, timed by :func:`timed_step`.
_STEPS = {"probing": harness.probe, "Table 1": cli.compute_table1}


def timed_run_unit(log: str, unit: harness.Unit, bank: str, num_nodes: int) -> list[dict[str, Any]]:
    """:func:`harness.run_unit`, appending (process, method, episodes, CPU s, wall s, peak MiB, the CPU seconds
    of each part, the episodes of each (task set, load)) to ``log`` (bound with :func:`functools.partial`, so the
    path travels with each unit to whichever process plays it)."""
    clock = part_clock()
    parts, wall, cpu = clock.snapshot(), time.perf_counter(), time.process_time()
    rows = _play_unit(unit, bank, num_nodes)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    cells = Counter(f"{target.task_set}\t{target.load}" for target in unit.targets)
    line = (f"{os.getpid()}\t{unit.method}\t{len(unit.keys)}\t{cpu:.3f}\t{wall:.3f}\t{peak_mib()}\t"
            f"{json.dumps(spent_since(parts, clock.snapshot()))}\t{json.dumps(cells)}\n")
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


def read_units(log: Path) -> list[dict[str, Any]]:
    """The units' log lines as dicts: pid, method, episodes, cpu, wall, peak, parts, cells."""
    units = []
    for line in log.read_text(encoding="utf-8").splitlines():
        pid, method, episodes, cpu, wall, peak, parts, cells = line.split("\t", 7)
        units.append({"pid": pid, "method": method, "episodes": int(episodes), "cpu": float(cpu),
                      "wall": float(wall), "peak": int(peak), "parts": json.loads(parts), "cells": json.loads(cells)})
    return units


def summary(units: list[dict[str, Any]]) -> str:
    """The per-method table and the per-process peaks."""
    methods: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    peaks: dict[str, int] = {}
    for unit in units:
        methods[unit["method"]][0] += unit["episodes"]
        methods[unit["method"]][1] += unit["cpu"]
        peaks[unit["pid"]] = max(peaks.get(unit["pid"], 0), unit["peak"])
    total = sum(cpu for _, cpu in methods.values()) or 1.0
    lines = ["| method | episodes | CPU s | share | CPU ms per episode |", "|---|---:|---:|---:|---:|"]
    for method, (episodes, cpu) in sorted(methods.items(), key=lambda item: -item[1][1]):
        lines.append(f"| {method} | {episodes:.0f} | {cpu:.1f} | {100 * cpu / total:.1f} % | "
                     f"{1000 * cpu / episodes:.0f} |")
    lines.append(f"| all units | {sum(e for e, _ in methods.values()):.0f} | {total:.1f} | | |")
    lines.append("")
    lines.append("peak memory of the processes that played units: "
                 + (", ".join(f"{peak} MiB" for peak in sorted(peaks.values(), reverse=True)) or "none played one"))
    return "\n".join(lines)


def split_table(units: list[dict[str, Any]]) -> str:
    """Per method, the share of its units' CPU time in each part of :data:`~benchmarks.time_split.PARTS` and in
    the rest; the last row is all units together."""
    parts = list(PARTS)
    totals: dict[str, Counter] = defaultdict(Counter)
    for unit in units:
        for key in (unit["method"], "all units"):
            totals[key]["cpu"] += unit["cpu"]
            totals[key].update(unit["parts"])
    lines = ["| method | CPU s | " + " | ".join(parts) + " | rest |", "|---|---:|" + "---:|" * (len(parts) + 1)]
    for method, spent in sorted(totals.items(), key=lambda item: (item[0] == "all units", -item[1]["cpu"])):
        cpu = spent["cpu"] or 1.0
        shares = [spent[part] / cpu for part in parts]
        lines.append(f"| {method} | {spent['cpu']:.1f} | " + " | ".join(f"{100 * share:.0f} %" for share in shares)
                     + f" | {100 * (1 - sum(shares)):.0f} % |")
    return "\n".join(lines)


def experiment_of(args: Sequence[str]) -> tuple[dict[tuple[str, str, str], str], float]:
    """Which experiment each (method, task set, load) of the run belongs to (the first that asks for it; the
    bounds as method ``bounds``), and the factor from the run's episodes per root and roots to the defaults."""
    parsed = cli.parse_args(list(args))
    selection = Selection(tuple(parsed.methods) if parsed.methods else None, tuple(parsed.policy),
                          tuple(parsed.task_sets), tuple(sorted(parsed.loads)))
    owner: dict[tuple[str, str, str], str] = {}
    for experiment in parsed.experiments:
        for method, task_set, load in plan([experiment], selection):
            owner.setdefault((method or harness.BOUNDS, task_set, str(load)), experiment)
    return owner, (ROOTS * EPISODES_PER_ROOT) / (parsed.roots * parsed.episodes)


def projection_table(units: list[dict[str, Any]], args: Sequence[str]) -> str:
    """CPU seconds per experiment and method, spent and projected to the default episode counts; a unit's
    time is split over the experiments of its episodes in proportion to their count."""
    owner, factor = experiment_of(args)
    spent: dict[tuple[str, str], float] = defaultdict(float)
    for unit in units:
        count = sum(unit["cells"].values())
        for cell, episodes in unit["cells"].items():
            task_set, load = cell.split("\t")
            experiment = owner.get((unit["method"], task_set, load), "other")
            spent[experiment, unit["method"]] += unit["cpu"] * episodes / count
    lines = [f"| experiment | method | CPU s | projected CPU s (x {factor:g}) |", "|---|---|---:|---:|"]
    for experiment in dict.fromkeys(experiment for experiment, _ in sorted(spent)):
        methods = sorted(((method, cpu) for (name, method), cpu in spent.items() if name == experiment),
                         key=lambda item: -item[1])
        lines += [f"| {experiment} | {method} | {cpu:.1f} | {cpu * factor:.0f} |" for method, cpu in methods]
        cpu = sum(cpu for _, cpu in methods)
        lines.append(f"| **{experiment}** | **all** | **{cpu:.1f}** | **{cpu * factor:.0f}** |")
    total = sum(spent.values())
    lines.append(f"| all | all | {total:.1f} | {total * factor:.0f} |")
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
        units = read_units(log)
        table = "\n".join([f"{summary(units)}; main process {peak_mib()} MiB", *step_lines(steps_log), "",
                           split_table(units), "", projection_table(units, args)])
    print(f"\n{table}\nwall time {time.perf_counter() - start:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
