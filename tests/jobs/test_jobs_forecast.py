"""``python -m mara_agents.live.jobs forecast FILE --crossings-only`` prints where each job's series crosses its
target when it runs alone, and the target that puts the crossing at a chosen fraction of its budget."""

from __future__ import annotations

import pytest

from mara_agents.live.jobs.__main__ import main

JOBS = '''
from mara_agents.live.jobs import Job

LOSSES = [5.0, 4.0, 3.0, 3.5, 2.0, 1.0, 0.5, 0.5]


def setup(seed):
    return 0


def step(index):
    return index + 1, LOSSES[index]


JOBS = [Job("crosses", setup, step, target=2.5, budget=4, metric="last"),
        Job("never", setup, step, target=0.1, budget=4, metric="last"),
        Job("mean", setup, step, target=4.0, budget=4)]
'''


def crossings(tmp_path, capsys, *argv: str) -> dict[str, list[str]]:
    (tmp_path / "jobs.py").write_text(JOBS)
    assert main(["forecast", str(tmp_path / "jobs.py"), "--crossings-only", *argv]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:5] == ["job", "metric", "B", "target", "crosses"]
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_each_job_crossing_alone_and_the_target_for_half_its_budget(tmp_path, capsys):
    rows = crossings(tmp_path, capsys)
    # metric, B, target, crosses at, c / B, k, target for k, then crosses at
    assert rows["crosses"] == ["last", "4", "2.5", "5", "1.25", "2", "4", "2"]
    assert rows["never"] == ["last", "4", "0.1", "never", "-", "2", "4", "2"]
    assert rows["mean"] == ["cumulative_mean", "4", "4", "3", "0.75", "2", "4.5", "2"]


def test_a_target_already_passed_earlier_says_so(tmp_path, capsys):
    rows = crossings(tmp_path, capsys, "--fraction", "1.0")
    assert rows["crosses"][5:] == ["4", "3.5", "3"]  # the loss was 3.0 at step 3, below step 4's 3.5


@pytest.mark.parametrize("fraction", ["0", "2.5", "-1"])
def test_a_fraction_outside_the_run_is_one_line_and_exit_2(tmp_path, capsys, fraction):
    (tmp_path / "jobs.py").write_text(JOBS)
    assert main(["forecast", str(tmp_path / "jobs.py"), "--fraction", fraction]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --fraction must be in (0, 2]"), err
