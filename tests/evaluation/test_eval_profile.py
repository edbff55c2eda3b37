"""``python -m benchmarks.profile_evaluation``: the evaluation runs as usual and every played episode is counted
once, under its method, with the time and peak memory of the process that played it; the processes that
probe the methods and compute Table 1 are reported on lines of their own; each method's time is split into
its parts, and each experiment's is projected to the default episode counts."""

from __future__ import annotations

import csv
import os
import re
import time
from pathlib import Path

from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

from benchmarks.profile_evaluation import main
from benchmarks.time_split import PARTS, PartClock


def test_profile_counts_every_episode_under_its_method(bank_dir: Path, workloads_dir: Path, tmp_path: Path,
                                                      capsys):
    out = tmp_path / "out"
    status = main(["table1", "table2", "--quick", "--bank", str(bank_dir), "--workloads", str(workloads_dir),
                   "--out", str(out), "--methods", "fifo", "edf", "--jobs", "2", "--no-progress"])
    printed = capsys.readouterr().out
    assert status == 0
    with open(out / "episodes.csv") as handle:
        played = [row for row in csv.DictReader(handle) if row["method"] in ("fifo", "edf")]
    counted = {match[0]: int(match[1]) for match in re.findall(r"^\| (fifo|edf|bounds) \| (\d+) \|", printed, re.M)}
    per_method = len(played) // 2
    assert per_method > 0 and counted == {"fifo": per_method, "edf": per_method, "bounds": per_method}
    peaks = re.search(r"peak memory of the processes that played units: (.*); main process (\d+) MiB", printed)
    assert peaks and 1 <= len(peaks[1].split(", ")) <= 2  # one peak per worker process that played a unit
    assert all(int(peak.removesuffix(" MiB")) > 0 for peak in peaks[1].split(", ")) and int(peaks[2]) > 0
    for step in ("probing", "Table 1"):  # each in a process of its own with two jobs
        line = re.search(rf"^{step}, process (\d+): [\d.]+ CPU s, [\d.]+ s wall, peak (\d+) MiB$", printed, re.M)
        assert line and int(line[1]) != os.getpid() and int(line[2]) > 0
    assert (out / "table1.md").is_file()
    split = {row[0]: row[1:] for row in re.findall(r"^\| (fifo|edf|bounds) \| ([\d.]+) \| " + r"(\d+) % \| " * len(PARTS)
                                                 + r"(-?\d+) % \|$", printed, re.M)}
    assert set(split) == {"fifo", "edf", "bounds"}
    shares = {method: dict(zip([*PARTS, "rest"], map(int, row[1:]))) for method, row in split.items()}
    assert shares["fifo"]["environment"] > 0 and shares["fifo"]["FM"] == 0
    assert shares["bounds"]["Oracle"] + shares["bounds"]["Clairvoyant"] > 0 and shares["bounds"]["environment"] == 0
    projected = re.search(r"^\| all \| all \| ([\d.]+) \| (\d+) \|$", printed, re.M)
    factor = re.search(r"projected CPU s \(x ([\d.]+)\)", printed)
    assert factor and float(factor[1]) == 30  # the defaults' 5 roots x 12 episodes over --quick's 2 x 1
    assert projected and abs(int(projected[2]) - float(projected[1]) * 30) <= 30


def spin(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_a_timed_call_inside_another_counts_for_the_inner_part_only():
    clock = PartClock()
    inner = clock.timed("inner", lambda: spin(0.05))
    outer = clock.timed("outer", lambda: (spin(0.05), inner()))
    outer()
    assert 0.05 <= clock.totals["inner"] < 0.09
    assert 0.05 <= clock.totals["outer"] < 0.09
