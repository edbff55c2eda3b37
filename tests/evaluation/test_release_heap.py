"""Evaluation processes give freed heap back after each unit, so a worker does not carry one unit's transient
memory into the next."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mara_agents.evaluation import harness

ROOT = Path(__file__).resolve().parents[2]
FREED_HEAP = """
from mara_agents.evaluation import harness
def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 // 2**20
blocks = [bytes(8192) for _ in range(12_000)]  # about 94 MiB of C-heap chunks, each below the mmap threshold
last = blocks[-1]  # holds the heap's top, so glibc cannot shrink it by itself
del blocks
before = rss()
harness.release_free_heap()
print(before - rss())
"""


@pytest.mark.skipif(harness._malloc_trim() is None or not Path("/proc/self/statm").is_file(),
                    reason="needs glibc's malloc_trim and Linux's /proc")
def test_freed_heap_goes_back_to_the_system():
    out = subprocess.run([sys.executable, "-c", FREED_HEAP], cwd=ROOT, capture_output=True, text=True, check=True)
    assert int(out.stdout) >= 60  # MiB returned of the ~94 freed


def test_every_unit_ends_by_releasing_the_heap_even_when_it_fails(monkeypatch):
    calls = []

    def failing_bounds(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(harness, "release_free_heap", lambda: calls.append(True))
    monkeypatch.setattr(harness, "bound_unit", failing_bounds)
    unit = harness.Unit(harness.BOUNDS, None, (), ())
    with pytest.raises(RuntimeError, match="boom"):
        harness.run_unit(unit, "bank", 7)
    assert calls == [True]
