"""Stopping ``evaluate.py`` — SIGTERM, or ``kill -9`` of the main process — leaves none of its processes behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

ROOT = Path(__file__).resolve().parents[2]


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` (children, grandchildren, …), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_slow_run(bank_dir: Path, workloads_dir: Path, out: Path) -> tuple[subprocess.Popen, set[int]]:
    """A two-worker evaluation of a policy that sleeps every step; returns it once its workers are busy."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)])}
    command = [sys.executable, "evaluate.py", "table3", "--methods", "eval_toy_policy:SlowEDF", "--bank",
               str(bank_dir), "--workloads", str(workloads_dir), "--out", str(out), "--roots", "2", "--episodes",
               "1", "--jobs", "2", "--no-progress"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 90
    children: set[int] = set()
    while time.monotonic() < deadline and process.poll() is None:
        children = descendants(process.pid)
        if len(children) >= 3:  # forkserver + 2 workers (and the resource tracker)
            time.sleep(1.0)  # let the workers start playing
            return process, descendants(process.pid)
        time.sleep(0.2)
    process.kill()
    pytest.fail(f"the evaluation never started its workers: {process.communicate()}")


def wait_gone(pids: set[int], seconds: float = 15.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def test_sigterm_stops_the_evaluation_and_all_its_workers(bank_dir, workloads_dir, tmp_path):
    process, children = start_slow_run(bank_dir, workloads_dir, tmp_path / "out")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr
    assert not wait_gone(children), "processes left behind after SIGTERM"


def test_killing_the_main_process_outright_leaves_no_workers(bank_dir, workloads_dir, tmp_path):
    process, children = start_slow_run(bank_dir, workloads_dir, tmp_path / "out")
    process.kill()
    process.communicate(timeout=60)
    assert not wait_gone(children), "workers left behind after kill -9 of the main process"
