"""The Ray Tune section of ``docs/jobs.md`` is a complete program: run as written there, it trains its four trials
under ``MARAScheduler`` on 2 nodes, each ending at its target or its deadline, and leaves no Ray process behind."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the Tune program needs the [ray] extra")

sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
from test_interrupt import wait_gone  # noqa: E402
from test_own_jobs import run_watching  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRIAL = re.compile(r"trial (\d): (succeeded|expired) after (\d+) iterations \(target ([\d.]+), deadline (\d+)\)")


def tune_program() -> str:
    """The one Python block of the Tune section of docs/jobs.md."""
    text = (ROOT / "docs" / "jobs.md").read_text()
    section = text[text.index("\n## Ray Tune\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the Tune section holds one program"
    return blocks[0]


def test_the_documented_tune_program_runs_every_trial_to_its_target_or_deadline(tmp_path):
    (tmp_path / "tune_program.py").write_text(tune_program())
    returncode, out, err, children = run_watching(["tune_program.py"], tmp_path)
    assert returncode == 0, err[-2000:]
    trials = [match for match in map(TRIAL.fullmatch, out.strip().splitlines()) if match]
    assert sorted(int(match[1]) for match in trials) == [0, 1, 2, 3], out
    assert all(1 <= int(match[3]) <= int(match[5]) for match in trials), out
    assert any(match[2] == "succeeded" for match in trials), out
    assert not wait_gone(children, 30.0), "Ray processes left behind"
