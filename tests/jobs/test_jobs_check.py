"""``python -m mara_agents.live.jobs check FILE`` runs one step of each job in this process, before any Ray: a job
that cannot run is one line naming the file, the job and the line of its code; ``run`` checks first unless told
``--no-check``; a mistyped ``Job`` keyword names the job, the file and the line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mara_agents.live.jobs.__main__ import main
from mara_agents.live.jobs.files import load_jobs
from mara_env.live.jobs import run_offline

ROOT = Path(__file__).resolve().parents[2]
HEAD = '''import math
from mara_agents.live.jobs import Job


def setup(seed, data=None):
    return {"s": seed}


def step(state, data=None):
    state["s"] += 1
    return state, 1.0 / state["s"]


'''
# (file body after HEAD, the job that is broken, the line of the file each message must name, its message)
BROKEN = [
    ("def only_loss(state):\n    return 0.5\n", "only_loss", 14, "TypeError: step must return (state, loss), got float"),
    ("def raising(state):\n    state['s'] += 1\n    return state, 1 / 0\n", "raising", 16,
     "ZeroDivisionError: division by zero"),
    ("def broken_setup(seed):\n    raise RuntimeError('no GPU here')\n", "broken_setup", 15,
     "RuntimeError: no GPU here"),
    ("def text_loss(state):\n    return state, '0.5'\n", "text_loss", 14,
     "step must return (state, loss) with loss a number, got str '0.5'"),
    ("def nan_loss(state):\n    return state, math.nan\n", "nan_loss", 14,
     "its first step reported a non-finite loss (nan)"),
    ("def loader():\n    return open('/nonexistent/mara-data.bin').read()\n", "loader", 15,
     "FileNotFoundError: [Errno 2] No such file or directory"),
]


def job_file(tmp_path: Path, body: str, broken: str) -> Path:
    """A job file of two good jobs and one whose ``setup``, ``step`` or ``data`` is ``broken``."""
    field = {"broken_setup": "setup", "loader": "data"}.get(broken, "step")
    fields = {"setup": "setup", "step": "step", field: broken}
    path = tmp_path / f"{broken}.py"
    path.write_text(HEAD + body + f'''

JOBS = [Job("good-a", setup, step, target=0.3, budget=10),
        Job("bad", {fields["setup"]}, {fields["step"]}, target=0.3, budget=10, data={fields.get("data")}),
        Job("good-b", setup, step, target=0.3, budget=10, arrival=2, seed=3)]
''')
    return path


@pytest.mark.parametrize("body, broken, line, message", BROKEN, ids=[row[1] for row in BROKEN])
def test_a_job_that_cannot_run_one_step_is_one_line_naming_file_job_and_line(tmp_path, capsys, body, broken, line,
                                                                               message):
    path = job_file(tmp_path, body, broken)
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"error: {path}: job 'bad': {path}:{line}: ") and message in err[0], err
    assert captured.out == ""


def test_run_checks_first_and_no_check_skips_it(tmp_path, capsys):
    path = job_file(tmp_path, BROKEN[1][0], "raising")
    assert main(["run", str(path), "--no-progress", "--policy", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "job 'bad'" in err[0] and "ZeroDivisionError" in err[0], err
    assert main(["run", str(path), "--no-progress", "--policy", "nope", "--no-check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown policy 'nope'" in err[0], err


def test_good_jobs_print_their_first_loss_as_run_offline_gives_it(tmp_path, capsys):
    path = job_file(tmp_path, "", "step")
    assert main(["check", str(path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    first = {line.split()[0]: float(line.split()[-1]) for line in lines[1:-1]}
    assert first == {job.name: float(run_offline(job, 1)[0]) for job in load_jobs(path)}
    assert first["good-b"] != first["good-a"]
    assert lines[-1] == "3 jobs ran one step each here"


@pytest.mark.parametrize("relative", [False, True], ids=["absolute path", "relative path"])
def test_a_mistyped_job_keyword_names_the_job_the_file_and_the_line(tmp_path, capsys, monkeypatch, relative):
    path = tmp_path / "typo.py"
    path.write_text(HEAD + 'JOBS = [Job("fit-1", setup, step, target=0.3, budget=10),\n'
                           '        Job("fit-2", setup, step, target=0.3,\n            budgte=10)]\n')
    if relative:
        monkeypatch.chdir(tmp_path)
        path = path.relative_to(tmp_path)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {path}:15: TypeError: job 'fit-2': unknown keyword "
                                               f"'budgte' (did you mean 'budget'?)"), err


def test_the_old_command_path_runs_the_check(tmp_path):
    path = job_file(tmp_path, BROKEN[0][0], "only_loss")
    done = subprocess.run([sys.executable, "-m", "mara_agents.jobs", "check", str(path)], cwd=ROOT, text=True,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 2 and f"job 'bad': {path}:14: TypeError" in done.stderr, done.stderr
