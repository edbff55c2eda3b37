"""``examples/numpy_jobs.py``, the second job file: ``jobs check`` runs a step of each of its jobs, and each job,
run alone, meets its target within its budget (its target was picked so)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mara_agents.live.jobs.files import load_jobs
from mara_agents.predictors.bench import crossing_batch
from mara_env.live.jobs import run_offline
from mara_env.live.tasks import tracked

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "examples" / "numpy_jobs.py"
JOBS = load_jobs(FILE)


def test_jobs_check_runs_a_step_of_every_job_of_five_kinds():
    done = subprocess.run([sys.executable, "-m", "mara_agents.live.jobs", "check", str(FILE)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"{len(JOBS)} jobs ran one step each here"
    assert len({job.name.rsplit("-", 1)[0] for job in JOBS}) == 5
    assert all(30 <= job.budget <= 120 for job in JOBS)


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.name)
def test_each_job_alone_meets_its_target_within_its_budget(job):
    series = tracked(run_offline(job, job.budget), job.metric, job.ema_decay)
    crossing = crossing_batch(series, job.target)
    assert crossing is not None and crossing > 4
