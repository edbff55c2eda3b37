"""``evaluate.py --ray``: the harness's units as Ray tasks give the local path's rows and keep its cache.

Each Ray test starts a local Ray with 2 CPUs: the evaluation itself (and stops it again), the test (and the
evaluation must leave it running), or ``evaluate.py --ray`` in a subprocess.  Without Ray installed only the
missing-Ray test runs.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)
from test_interrupt import ROOT, descendants, wait_gone

from mara_agents.evaluation.cli import main, parse_args
from mara_agents.evaluation.harness import Settings, evaluate as run_evaluation
from mara_agents.evaluation.ray_executor import LOCAL, RayEvaluationError

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the Ray tests need the [ray] extra")

USER_POLICIES = '''
import os

from mara_agents.allocators.naive import EDFPolicy


class Mine(EDFPolicy):
    """A user policy found in the current directory (EDF under another name)."""


class Crash(EDFPolicy):
    """Kills its worker process at the first step."""

    def act(self, observation):
        os._exit(1)
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A policy module that only the driver's import path finds (not the current directory, which a local Ray's
    workers search anyway), named after the test: a module stays imported, so each test needs its own."""
    name = f"ray_user_{request.node.name.removeprefix('test_')}"
    (tmp_path / f"{name}.py").write_text(USER_POLICIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def settings(bank: Path, workloads: Path, cache: Path, ray: str | None) -> Settings:
    return Settings(bank, workloads, roots=1, episodes=2, jobs=2, cache=cache, progress=False, ray=ray)


@needs_ray
def test_ray_and_local_runs_give_identical_rows_and_share_the_cache(bank_dir, workloads_dir, tmp_path, user_module):
    import ray

    methods = ["fifo", "edf", f"{user_module}:Mine", "eval_toy_policy:BatchedEDF"]
    requests = [(method, "id", 0.04) for method in methods]
    local = run_evaluation(requests, settings(bank_dir, workloads_dir, tmp_path / "local.sqlite", None))
    on_ray = run_evaluation(requests, settings(bank_dir, workloads_dir, tmp_path / "ray.sqlite", LOCAL))
    assert on_ray.computed == local.computed == 2 * (len(methods) + 1)  # the methods and the bounds
    assert on_ray.rows == local.rows
    assert not ray.is_initialized()  # the local Ray that the evaluation started is shut down
    resumed = run_evaluation(requests, settings(bank_dir, workloads_dir, tmp_path / "ray.sqlite", LOCAL))
    assert resumed.computed == 0 and resumed.rows == local.rows


@needs_ray
def test_a_unit_whose_worker_keeps_dying_stops_the_run_naming_the_unit(bank_dir, workloads_dir, tmp_path,
                                                                       user_module):
    import ray

    method = f"{user_module}:Crash"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(RayEvaluationError) as caught:
            run_evaluation([(method, "id", 0.04)], settings(bank_dir, workloads_dir, tmp_path / "c.sqlite", LOCAL))
        assert ray.is_initialized()  # a Ray that the evaluation did not start is left running
    finally:
        ray.shutdown()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"unit {method} on id p=0.04, root 0 (2 episodes) failed 3 times")


@needs_ray
def test_sigterm_cancels_the_tasks_and_stops_the_local_ray(bank_dir, workloads_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)])}
    command = [sys.executable, "evaluate.py", "table3", "--methods", "eval_toy_policy:SlowEDF", "--bank",
               str(bank_dir), "--workloads", str(workloads_dir), "--out", str(tmp_path / "out"), "--roots", "2",
               "--episodes", "1", "--jobs", "2", "--ray", "--no-progress"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline, playing = time.monotonic() + 120, set()
    while time.monotonic() < deadline and process.poll() is None and not playing:
        playing = {pid for pid in descendants(process.pid) if "play_remote" in _command_line(pid)}
        time.sleep(0.2)
    if not playing:
        process.kill()
        pytest.fail(f"no Ray task ever started: {process.communicate()}")
    children = descendants(process.pid)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr
    assert not wait_gone(children, 30.0), "Ray processes left behind after SIGTERM"


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_ray_flag_without_ray_installed_is_one_clear_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(SystemExit) as caught:
        main(["table2", "--methods", "fifo", "--ray", "--out", str(tmp_path)])
    assert caught.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith("--ray needs Ray, an optional extra: pip install -e '.[ray]'")


@needs_ray
def test_an_experiment_after_a_bare_ray_flag_is_read_as_the_experiment(tmp_path):
    args = parse_args(["--ray", "table2", "--out", str(tmp_path)])
    assert args.ray == LOCAL and args.experiments == ["table2"]
    assert parse_args(["table2", "--ray", "ray://head:10001", "--out", str(tmp_path)]).ray == "ray://head:10001"
