"""``python -m mara_agents.live.jobs run FILE`` and ``python -m mara_agents.live``: a job file runs end to end;
bad files and fields are one line and exit 2; an unreachable Ray address is one line and exit 1 within 30 s; SIGTERM
stops the jobs, saves what was recorded, exits 130 and leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the job command needs the [ray] extra")

sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
from test_interrupt import descendants, wait_gone  # noqa: E402
from test_ray_eval import _command_line  # noqa: E402

from mara_agents.live.jobs.__main__ import main  # noqa: E402

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
CODE = '''
import time
import numpy as np


def setup(seed):
    return {"w": np.zeros(2), "rng": np.random.default_rng(seed)}


def step(state, pause=0.0):
    time.sleep(pause)
    state["w"] += 0.25
    return state, float(np.exp(-state["w"][0]) + 0.01 * state["rng"].random())


def slow_step(state):
    return step(state, 0.3)
'''
JOBS = CODE + '''
from mara_agents.live.jobs import Job

JOBS = [Job("quick-a", setup, step, target=0.6, budget=20), Job("quick-b", setup, step, target=0.6, budget=20, arrival=1)]
'''
TOML = '''
[defaults]
setup = "code.py:setup"
step = "code.py:slow_step"
budget = 500
target = 0.001

[[job]]
name = "slow-a"

[[job]]
name = "slow-b"
arrival = 2
'''


def run_command(module: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_a_python_job_file_runs_and_names_its_output_on_the_last_line(tmp_path, capsys):
    (tmp_path / "jobs.py").write_text(JOBS)
    assert main(["run", str(tmp_path / "jobs.py"), "--policy", "edf", "--nodes", "2", "--no-progress",
                 "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(tmp_path / "out") and "replay in the simulator: identical" in "\n".join(printed)
    outcomes = json.loads((tmp_path / "out" / "jobs.json").read_text())["jobs"]
    assert [(row["name"], row["outcome"]) for row in outcomes] == [("quick-a", "succeeded"), ("quick-b", "succeeded")]


@pytest.mark.parametrize("name, text, message", [
    ("missing.py", None, "no such job file"),
    ("jobs.txt", "", "a job file is a .py file defining JOBS or a .toml file"),
    ("nojobs.py", "x = 1\n", "defines no JOBS"),
    ("broken.py", "def (:\n", "SyntaxError"),
    ("notjobs.py", "JOBS = [1]\n", "JOBS: jobs must hold Job objects"),
    ("bad.toml", "[[job]\n", "not valid TOML"),
    ("empty.toml", "[defaults]\nbudget = 3\n", "at least one [[job]] table"),
    ("key.toml", '[[job]]\nname = "a"\nsetup = "code.py:setup"\nstep = "code.py:step"\ntarget = 1\nbudget = 5\n'
                 'colour = "red"\n', "job 1 ('a'): unknown key(s) ['colour']"),
    ("value.toml", '[[job]]\nname = "a"\nsetup = "code.py:setup"\nstep = "code.py:step"\ntarget = 1\nbudget = -5\n',
     "job 1 ('a'): job 'a': budget must be at least 1, got -5"),
    ("ref.toml", '[[job]]\nname = "a"\nsetup = "code.py:nope"\nstep = "code.py:step"\ntarget = 1\nbudget = 5\n',
     "job 1 ('a'): setup: code.py has no 'nope'"),
    ("missing.toml", '[[job]]\nname = "a"\nsetup = "code.py:setup"\n', "job 1 ('a'): missing step, target, budget"),
    ("nosuch.toml", '[[job]]\nname = "a"\nsetup = "nosuch.py:setup"\nstep = "code.py:step"\ntarget = 1\nbudget = 5\n',
     "job 1 ('a'): setup: {tmp}/nosuch.py not found (a PATH.py is relative to the TOML file)"),
    ("brokencode.toml", '[[job]]\nname = "a"\nsetup = "broken_code.py:setup"\nstep = "code.py:step"\ntarget = 1\n'
                        'budget = 5\n', "job 1 ('a'): setup: {tmp}/broken_code.py:1: ZeroDivisionError"),
    ("twice.toml", '[defaults]\nsetup = "code.py:setup"\nstep = "code.py:step"\ntarget = 1\nbudget = 5\n'
                   '[[job]]\nname = "a"\n[[job]]\nname = "a"\n', "job names must be unique, repeated: a"),
])
def test_a_bad_job_file_is_one_line_and_exit_2(tmp_path, capsys, name, text, message):
    (tmp_path / "code.py").write_text(CODE)
    (tmp_path / "broken_code.py").write_text("1 / 0\n")
    if text is not None:
        (tmp_path / name).write_text(text)
    assert main(["run", str(tmp_path / name), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    message = message.replace("{tmp}", str(tmp_path))
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path / name}") and message in err[0], err


@pytest.mark.parametrize("argv, message", [
    (["--policy", "nope"], "unknown policy 'nope'"), (["--nodes", "0"], "nodes must be a positive integer"),
    (["--policy", "mara", "--nodes", "4"], "policy 'mara' was trained for M = 7 nodes and cannot drive nodes=4"),
    (["--out", "/proc/mara-jobs"], "--out: cannot write into /proc/mara-jobs"),
    (["--fm-checkpoint", "/nope/fm.pt"], "--fm-checkpoint: no such file /nope/fm.pt")])
def test_a_bad_setting_is_one_line_and_exit_2_before_ray_starts(tmp_path, capsys, argv, message):
    import ray

    (tmp_path / "jobs.py").write_text(JOBS)
    assert main(["run", str(tmp_path / "jobs.py"), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not ray.is_initialized()


@pytest.mark.parametrize("command", [["mara_agents.live.jobs", "run", "JOBS"], ["mara_agents.live"]])
def test_an_unreachable_ray_address_fails_within_30_s_naming_it(tmp_path, command):
    (tmp_path / "jobs.py").write_text(JOBS)
    argv = [str(tmp_path / "jobs.py") if word == "JOBS" else word for word in command[1:]]
    began = time.monotonic()
    done = run_command(command[0], *argv, "--address", "127.0.0.1:1", "--no-progress", "--out", str(tmp_path / "o"),
                       timeout=60)
    assert time.monotonic() - began < 30
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(err) == 1, done.stderr
    assert err[0].startswith("error: --address: cannot reach the Ray cluster at 127.0.0.1:1")


def sigterm_after(command: list[str], started: str, tmp_path: Path) -> tuple[subprocess.Popen, str, set[int]]:
    """Start ``python -m command``, wait until a descendant's command line (Ray's title of a worker: the task it
    runs) contains ``started``, let it run a little longer, send SIGTERM."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline, running = time.monotonic() + 180, set()
    while time.monotonic() < deadline and process.poll() is None and not running:
        running = {pid for pid in descendants(process.pid) if started in _command_line(pid)}
        time.sleep(0.05)
    if not running:
        process.kill()
        pytest.fail(f"nothing ever ran: {process.communicate()}")
    time.sleep(2.0)  # a few steps
    children = descendants(process.pid)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=90)
    return process, stderr, children


def test_sigterm_stops_the_jobs_saves_what_was_recorded_and_leaves_no_process(tmp_path):
    (tmp_path / "code.py").write_text(CODE)
    (tmp_path / "jobs.toml").write_text(TOML)
    process, stderr, children = sigterm_after(["mara_agents.live.jobs", "run", str(tmp_path / "jobs.toml"),
                                               "--nodes", "2", "--out", str(tmp_path / "out")], "job_step", tmp_path)
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted")]
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert lines == [f"interrupted: stopped the jobs; what was recorded is saved in {tmp_path / 'out'}"]
    outcomes = json.loads((tmp_path / "out" / "jobs.json").read_text())["jobs"]
    assert outcomes[0]["name"] == "slow-a" and outcomes[0]["steps"] > 0 and outcomes[0]["outcome"] == "running"
    assert not wait_gone(children, 30.0), "Ray processes left behind after SIGTERM"


def test_sigterm_of_the_live_command_exits_130_and_leaves_no_process(tmp_path):
    from curves.data.fashion_mnist import DEFAULT_DIR

    if not DEFAULT_DIR.is_dir():
        pytest.skip("needs apt-get install dataset-fashion-mnist")
    command = ["mara_agents.live", "--nodes", "1", "--node-cpus", "0.5", "--steps", "400", "--arrival-prob", "1",
               "--no-progress", "--out", str(tmp_path / "out")]
    process, stderr, children = sigterm_after(command, "NodeActor.run", tmp_path)
    assert process.returncode == 130 and "Traceback" not in stderr and "SIGTERM" not in stderr, stderr
    assert [line for line in stderr.splitlines() if line.startswith("interrupted")] == [
        f"interrupted: stopped the batches; what was recorded is saved in {tmp_path / 'out'}"]
    assert not wait_gone(children, 30.0), "Ray processes left behind after SIGTERM"

