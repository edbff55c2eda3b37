"""Bad input to the agents' command lines and APIs: each case exits non-zero (or raises the documented error
type) with a message that names the culprit — never a bare traceback.

``evaluate.py`` and ``train.py`` are called in-process (their ``main`` functions) for speed; two cases run them
as real processes to check the exit status and that stderr holds no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import evaluate as evaluate_cli
import train as train_cli
from cli_status import exit_status
from mara_agents import make_policy
from mara_agents.play.checkpoints import save_run_state, write_checksum_manifest
from mara_agents.evaluation.methods import MethodError, parse_user_policy
from mara_agents.training.ppo import PPOSettings

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["table3", "--methods", "fifo", "--no-progress"]

EVALUATE_CASES = [  # (argv, words the message must contain)
    (["--jobs", "0"], ["--jobs", "0"]),
    (["--jobs", "-3"], ["--jobs", "-3"]),
    (["--jobs", "many"], ["--jobs", "many"]),
    (["--episodes", "0"], ["--episodes", "0"]),
    (["--episodes", "13"], ["--episodes", "13"]),
    (["--roots", "-1"], ["--roots", "-1"]),
    (["--roots", "6"], ["--roots", "6"]),
    (["--seeds", "-1"], ["--seeds", "-1"]),
    (["--seeds", "0"], ["--seeds", "0"]),
    (["--methods", "oracle-ish"], ["unknown method", "oracle-ish"]),
    (["--policy", "no_such_module:Policy"], ["no_such_module"]),
    (["--policy", "eval_toy_policy:NoSuchFactory"], ["NoSuchFactory"]),
    (["--policy", "just-a-name"], ["just-a-name", "Factory"]),
    (["--policy", "eval_toy_policy:CountingEDF:depth"], ["depth", "key=value"]),
    (["--loads", "0.5"], ["--loads", "0.5"]),
    (["--task-sets", "moon"], ["--task-sets", "moon"]),
    (["tableX"], ["tableX"]),
    (["--readme", "no/such/README.md"], ["--readme", "no/such/README.md"]),
]

TRAIN_CASES = [
    (["mat", "--gamma", "5"], ["gamma", "5"]),
    (["mat", "--clip", "-1"], ["clip", "-1"]),
    (["mat", "--lr", "0"], ["lr", "0"]),
    (["mat", "--epochs", "0"], ["epochs", "0"]),
    (["mat", "--steps", "0"], ["steps", "0"]),
    (["mat", "--steps", "lots"], ["--steps", "lots"]),
    (["mat", "--num-envs", "0"], ["num_envs", "0"]),
    (["mat", "--seed", "-1"], ["seed", "-1"]),
    (["mat", "--predictor", "oracle"], ["predictor", "oracle"]),
    (["mat", "--reward", "dense"], ["reward", "dense"]),
    (["mat", "--arrival-prob", "2"], ["arrival_prob", "2"]),
    (["mat", "--shaping-beta", "inf"], ["shaping_beta", "inf"]),
    (["mat", "--device", "cuda:7"] if not torch.cuda.is_available() else ["mat", "--threads", "0"],
     ["cuda:7"] if not torch.cuda.is_available() else ["threads"]),
    (["fm", "--batch-size", "0"], ["batch_size", "0"]),
    (["fm", "--lr", "-1"], ["lr", "-1"]),
    (["fm", "--min-prefix", "2"], ["min_prefix", "2"]),
    (["fm", "--threads", "0"], ["threads", "0"]),
    (["fm", "--bank", "/no/such/bank", "--run-dir", "{tmp}/fm"], ["/no/such/bank", "bank"]),
    (["mat", "--bank", "/no/such/bank", "--run-dir", "{tmp}/mat"], ["/no/such/bank", "bank"]),
    (["nonsense"], ["fm,mat"]),
]


def run_main(main, argv, capsys) -> tuple[int, str]:
    """(exit status, stderr) of a CLI ``main``, whether it returns its status or exits through argparse."""
    status, _, err = exit_status(main, argv, capsys)
    return status, err


@pytest.mark.parametrize(("argv", "words"), EVALUATE_CASES, ids=[" ".join(a) for a, _ in EVALUATE_CASES])
def test_evaluate_rejects_bad_flags_with_a_message_naming_them(argv, words, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "evaluation"))
    status, stderr = run_main(evaluate_cli.main, [*SMALL, *argv], capsys)
    assert status == 2, stderr
    assert all(word in stderr for word in words), stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("argv", "words"), TRAIN_CASES, ids=[" ".join(a) for a, _ in TRAIN_CASES])
def test_train_rejects_bad_settings_with_a_message_naming_them(argv, words, capsys, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    status, stderr = run_main(train_cli.main, argv, capsys)
    assert status == 2, stderr
    assert all(word in stderr for word in words), stderr


@pytest.mark.parametrize("start, words", [
    ("fm", ["error: --init-from: ", "fm.pt: not a MAT checkpoint (expected format 'mara-mat-policy')"]),
    ("corrupt", ["error: --init-from: ", "corrupt.pt: unreadable MAT checkpoint: not a file torch.save wrote"]),
])
def test_train_mat_names_an_init_from_that_is_no_policy_before_any_other_setting(start, words, capsys, tmp_path):
    path = ROOT / "mara_agents" / "predictors" / "checkpoints" / "fm.pt"
    if start == "corrupt":
        path = tmp_path / "corrupt.pt"
        path.write_bytes(b"not a checkpoint")
    argv = ["mat", "--init-from", str(path), "--unverified", "--run-dir", str(tmp_path / "run")]
    status, stderr = run_main(train_cli.main, argv, capsys)
    assert status == 2 and all(word in stderr.splitlines()[-1] for word in words), stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("stage", ["mat", "fm"])
def test_no_resume_over_an_existing_run_needs_force(stage, tmp_path, capsys):
    save_run_state(tmp_path / "run" / "last.pt", {"model": {}, "step": 1})
    status, stderr = run_main(train_cli.main, [stage, "--run-dir", str(tmp_path / "run"), "--no-resume"], capsys)
    assert status == 2 and "--force" in stderr and str(tmp_path / "run") in stderr


def test_evaluate_refuses_a_corrupt_checkpoint_naming_the_file(bank_dir, tmp_path, capsys):
    from curves.bank import load_bank
    from mara_env.fixed_workloads import build_workload, workload_path
    from mara_env.workload import save_workload

    workloads = tmp_path / "workloads"
    save_workload(workload_path("stress", None, workloads), build_workload(load_bank(bank_dir), "stress", 0.0, 1, 1))
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"\x00not a checkpoint")
    write_checksum_manifest(broken)  # verified bytes, but not a checkpoint
    policy = f"mine=mara_agents.mat.policy:load_mat_policy:path='{broken}'"
    status, stderr = run_main(evaluate_cli.main, ["table3", "--methods", "fifo", "--policy", policy, "--bank",
                                                  str(bank_dir), "--workloads", str(workloads), "--out",
                                                  str(tmp_path / "out"), "--no-progress"], capsys)
    assert status == 2 and "broken.pt" in stderr and "unreadable MAT checkpoint" in stderr


def test_evaluate_names_a_missing_workload_directory(capsys, tmp_path):
    status, stderr = run_main(evaluate_cli.main, [*SMALL, "--workloads", str(tmp_path / "nowhere"), "--out",
                                                  str(tmp_path / "out")], capsys)
    assert status == 2 and "nowhere" in stderr and "no such directory" in stderr


@pytest.mark.parametrize(("script", "argv", "words"), [
    ("evaluate.py", ["--jobs", "0"], ["--jobs"]),
    ("train.py", ["mat", "--gamma", "5"], ["gamma"]),
])
def test_the_real_commands_exit_non_zero_without_a_traceback(script, argv, words):
    done = subprocess.run([sys.executable, script, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert all(word in done.stderr for word in words), done.stderr


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: make_policy("oracle"), ValueError, ["oracle"]),
    (lambda: make_policy("mara", checkpoint="no/such.pt"), RuntimeError, ["no/such.pt", "not found"]),
    (lambda: parse_user_policy("m:F:x=1,oops"), MethodError, ["oops"]),
    (lambda: PPOSettings(gamma=float("nan")), ValueError, ["gamma"]),
    (lambda: PPOSettings(minibatches=0), ValueError, ["minibatches"]),
])
def test_library_calls_raise_the_documented_error_naming_the_culprit(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert all(word in str(raised.value) for word in words)
