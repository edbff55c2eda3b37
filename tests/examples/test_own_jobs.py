"""``examples/own_jobs.py --quick`` and ``examples/tune_scheduler.py --quick`` run as a user runs them: they exit
0, print their table, and leave no Ray process behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the examples need the [ray] extra")

sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
from test_interrupt import descendants, wait_gone  # noqa: E402

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def run_watching(argv: list[str], cwd: Path) -> tuple[int, str, str, set[int]]:
    """Run ``python ARGV`` in ``cwd`` with this checkout importable; returns its exit status, stdout, stderr and
    every process that ran below it (to check that none is left)."""
    process = subprocess.Popen([sys.executable, *argv], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children: set[int] = set()
    while process.poll() is None:
        children |= descendants(process.pid)
        try:
            process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    out, err = process.communicate()
    return process.returncode, out, err, children


@pytest.mark.skipif(not FASHION_MNIST.is_dir(), reason="needs apt-get install dataset-fashion-mnist")
@pytest.mark.parametrize("example, rows", [("own_jobs.py", 8), ("tune_scheduler.py", 4)])
def test_the_quick_example_exits_0_with_its_table_and_no_ray_process_left(example, rows):
    returncode, out, err, children = run_watching([f"examples/{example}", "--quick"], ROOT)
    assert returncode == 0, err[-2000:]
    lines = out.strip().splitlines()
    for policy in ("fifo", "edf", "slack-fm"):
        assert sum(line.startswith(policy) for line in lines) == 1
    assert Path(lines[-1]).is_dir()
    assert any(line.startswith(f"{rows} ") and "on 2 nodes" in line for line in lines)
    assert not wait_gone(children, 30.0), "Ray processes left behind"
