"""Evaluating your own policy (``--policy``) and commands that must not overwrite shipped results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

from mara_agents.evaluation.cli import RESULTS, parse_args
from mara_agents.evaluation.harness import Settings, evaluate
from mara_agents.evaluation.methods import parse_user_policy, spec_for
from mara_agents.predictors import bench

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = '''
from mara_agents import EDFPolicy


class Mine(EDFPolicy):
    """EDF under another name, with a setting."""

    def __init__(self, patience: int = 0):
        self.patience = patience
'''


def test_a_policy_spec_names_its_column_and_passes_keyword_arguments():
    spec = parse_user_policy("mine=eval_toy_policy:CountingEDF:depth=3,greedy=True,tag=fast")
    assert (spec.label, spec.module, spec.factory) == ("mine", "eval_toy_policy", "CountingEDF")
    assert spec.build().settings == (3, True, "fast")
    assert spec_for("eval_toy_policy:CountingEDF").label == "CountingEDF"


def test_a_user_policy_is_built_once_per_process_and_each_episode_gets_a_fresh_copy(bank_dir, workloads_dir,
                                                                                      tmp_path):
    from eval_toy_policy import CountingEDF

    name = "deep=eval_toy_policy:CountingEDF:depth=2"
    settings = Settings(bank_dir, workloads_dir, roots=2, episodes=2, cache=tmp_path / "c.sqlite", progress=False)
    before = CountingEDF.built
    results = evaluate([(name, "id", 0.04), ("edf", "id", 0.04), (name, "stress", None)], settings)
    assert CountingEDF.built - before == 1
    played = [r for r in results.rows if r["method"] == name]
    same = [r for r in results.rows if r["method"] == "edf"]
    assert len(played) == 8  # 2 roots × 2 episodes × 2 cells
    strip = [{k: v for k, v in r.items() if k != "method"} for r in played if r["task_set"] == "id"]
    assert strip == [{k: v for k, v in r.items() if k != "method"} for r in same]


def test_a_policy_in_the_current_directory_needs_no_pythonpath(bank_dir, workloads_dir, tmp_path):
    (tmp_path / "my_policy.py").write_text(POLICY_FILE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "table3", "--methods", "fifo", "--policy",
                           "Patient=my_policy:Mine:patience=2", "--bank", str(bank_dir), "--workloads",
                           str(workloads_dir), "--out", str(tmp_path / "out"), "--roots", "1", "--episodes", "1",
                           "--no-progress", "--jobs", "2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "out" / "table3.md").read_text()
    assert "| Patient |" in table


def test_quick_writes_to_a_scratch_directory_and_a_full_run_to_results():
    quick = parse_args(["--quick"])
    assert quick.out != RESULTS and quick.out.is_dir() and not any(quick.out.iterdir())
    assert Path(quick.out).resolve() != (ROOT / "results").resolve()
    assert parse_args(["--quick", "--out", "mine"]).out == Path("mine")
    assert parse_args([]).out == RESULTS


def test_the_predictor_bench_writes_to_a_scratch_directory_unless_told():
    default = bench.parse_args([]).out
    assert default.is_dir() and not any(default.iterdir()) and "results" not in default.parts
    assert bench.parse_args(["--out", "here"]).out == Path("here")


@pytest.mark.parametrize("argv", [["--quick"]])
def test_quick_leaves_the_shipped_results_untouched(argv, bank_dir, workloads_dir, tmp_path):
    """A real ``evaluate.py --quick`` run (on the synthetic bank) changes nothing under results/."""
    status = subprocess.run(["git", "status", "--porcelain", "results/"], cwd=ROOT, capture_output=True, text=True)
    if status.returncode != 0:
        pytest.fail(f"git status failed: {status.stderr}")
    before = status.stdout
    done = subprocess.run([sys.executable, "evaluate.py", "table3", *argv, "--methods", "fifo", "--bank",
                           str(bank_dir), "--workloads", str(workloads_dir), "--no-progress"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    after = subprocess.run(["git", "status", "--porcelain", "results/"], cwd=ROOT, capture_output=True,
                           text=True).stdout
    assert after == before
    assert "results in /" in done.stdout and "mara-quick-" in done.stdout


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_process_plays_with_one_torch_thread(jobs, bank_dir, workloads_dir, tmp_path):
    """``--jobs N`` means N threads in all: each worker (or the main process with one job) uses one."""
    log = tmp_path / "threads.log"
    name = f"eval_toy_policy:ThreadProbe:path='{log}'"
    settings = Settings(bank_dir, workloads_dir, roots=2, episodes=1, jobs=jobs, cache=None, progress=False)
    evaluate([(name, "stress", None)], settings)
    lines = [line.split() for line in log.read_text().splitlines()]
    assert lines and all(threads == "1" for _, threads in lines)
