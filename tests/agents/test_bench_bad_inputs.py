"""Bad input to the agents' benches, checkpoints without a manifest or of the wrong structure, ``make_policy``
arguments, and the one signal helper every command stops through.

Each bench is called in-process; every case asserts exit status 2 (or the documented exception) and that the
message names the culprit.  One test runs every command that writes files with an unwritable ``--out`` and
checks that it is refused before any work: nothing printed, no run directory made.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch

import evaluate as evaluate_cli
import train as train_cli
from cli_status import exit_status
from mara_agents import make_policy
from mara_agents.play.checkpoints import CheckpointError, manifest_path, write_checksum_manifest
from benchmarks import profile_evaluation as profile
from studies import workload_report
from mara_common.cli import INTERRUPTED, run_command
from benchmarks import decode_bench
from benchmarks import mat_bench
from mara_agents.training import validation
from mara_agents.mat.checkpoint import export_policy, load_policy_model
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.predictors import bench as predictor_bench
from mara_agents.predictors.demand import make_demand
from mara_agents.predictors.fm import FlowMatchingModel, FMHyperParameters, load_model, save_checkpoint
from benchmarks import fm_throughput as throughput


@pytest.fixture(name="bare_fm")
def bare_fm_fixture(tmp_path: Path) -> Path:
    """A small FM checkpoint whose manifest was deleted."""
    path = tmp_path / "bare" / "fm.pt"
    save_checkpoint(path, FlowMatchingModel(FMHyperParameters(hidden=8, width=16, time_dim=8)))
    manifest_path(path).unlink()
    return path


BENCH_CASES = [  # (entry point, argv, words); every flag of each bench
    (predictor_bench.run, ["--bank", "{tmp}/no-bank"], ["--bank", "no-bank"]),
    (predictor_bench.run, ["--checkpoint", "/no/fm.pt"], ["--checkpoint", "/no/fm.pt"]),
    (predictor_bench.run, ["--checkpoint", "{bare}"], ["fm.pt", "no manifest", "--unverified"]),
    (predictor_bench.run, ["--unverified=yes"], ["--unverified"]),
    (predictor_bench.run, ["--out", "/proc/x"], ["--out", "/proc/x"]),
    (predictor_bench.run, ["--out", ""], ["--out", "empty"]),
    (predictor_bench.run, ["--seed", "-1"], ["--seed", "-1"]),
    (predictor_bench.run, ["--threads", "0"], ["--threads", "0"]),
    (predictor_bench.run, ["--threads", "99999"], ["--threads", "99999"]),
    (predictor_bench.run, ["--device", "tpu"], ["--device", "tpu"]),
    (throughput.run, ["--rows", "0"], ["--rows", "0"]),
    (throughput.run, ["--rows", "1", "99999999"], ["--rows", "99999999"]),
    (throughput.run, ["--repeats", "0"], ["--repeats", "0"]),
    (throughput.run, ["--seconds", "nan"], ["--seconds", "nan"]),
    (throughput.run, ["--seconds", "0"], ["--seconds", "0"]),
    (throughput.run, ["--threads", "-1"], ["--threads", "-1"]),
    (throughput.run, ["--checkpoint", "/no/fm.pt"], ["--checkpoint", "/no/fm.pt"]),
    (throughput.run, ["--checkpoint", "{bare}"], ["fm.pt", "no manifest"]),
    (throughput.run, ["--unverified=1"], ["--unverified"]),
    (throughput.run, ["--bank", "{tmp}/no-bank"], ["--bank", "no-bank"]),
    (mat_bench.run, ["--predictors", "fm,lara"], ["--predictors", "lara"]),
    (mat_bench.run, ["--modes", "async"], ["--modes", "async"]),
    (mat_bench.run, ["--iterations", "0"], ["--iterations", "0"]),
    (mat_bench.run, ["--warmup", "-1"], ["--warmup", "-1"]),
    (mat_bench.run, ["--num-envs", "0"], ["num_envs", "0"]),
    (mat_bench.run, ["--rollout-steps", "0"], ["rollout_steps", "0"]),
    (mat_bench.run, ["--threads", "0"], ["threads", "0"]),
    (mat_bench.run, ["--device", "tpu"], ["device", "tpu"]),
    (mat_bench.run, ["--bank", "{tmp}/no-bank"], ["--bank", "no-bank"]),
    (mat_bench.run, ["--fm-checkpoint", "/no/fm.pt"], ["fm_checkpoint", "/no/fm.pt"]),
    (mat_bench.run, ["--unverified=1"], ["--unverified"]),
    (mat_bench.run, ["--out", "/proc/x"], ["--out", "/proc/x"]),
    (decode_bench.main, ["--batches", "0"], ["--batches"]),
    (decode_bench.main, ["--calls", "0"], ["--calls"]),
    (decode_bench.main, ["--repeats", "-1"], ["--repeats"]),
    (decode_bench.main, ["--out", "/proc/x"], ["--out", "/proc/x"]),
    (profile.main, ["table3", "--jobs", "0"], ["--jobs", "0"]),
    (validation.main, ["fifo", "--bank", "{tmp}/no-bank"], ["--bank", "no-bank"]),
    (validation.main, ["fifo", "--dir", "/proc/check"], ["--dir", "/proc/check"]),
    (validation.main, ["fifo", "--load", "nan"], ["--load", "nan"]),
    (validation.main, ["fifo", "--task-set", "moon"], ["moon"]),
    (validation.main, ["fifo", "--roots", "0"], ["--roots"]),
    (validation.main, ["fifo", "--seed-base", "x"], ["--seed-base", "x"]),
    (validation.main, ["fifo", "--unverified=1"], ["--unverified"]),
    (workload_report.main, ["--dir", "{tmp}/nowhere"], ["--dir", "nowhere"]),
    (workload_report.main, ["--bank", "{tmp}/no-bank"], ["--bank", "no-bank"]),
    (workload_report.main, ["--loads", "0.5"], ["--loads", "0.5"]),
    (profile.main, ["table3", "--out", "/proc/x"], ["--out", "/proc/x"]),
]


@pytest.mark.parametrize(("call", "argv", "words"), BENCH_CASES,
                         ids=[f"{c.__module__.split('.')[-1]} {' '.join(a)}" for c, a, _ in BENCH_CASES])
def test_every_bench_flag_is_checked_before_work(call, argv, words, tmp_path, bare_fm, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{bare}", str(bare_fm)) for a in argv]
    status, out, err = exit_status(call, argv, capsys)
    assert status == 2, err
    assert all(word in err for word in words), err
    assert "Traceback" not in err and out == ""


UNWRITABLE = [  # every command of the agents that writes files, with its output in /proc
    ("evaluate.py", evaluate_cli.main, ["table3", "--methods", "fifo", "--out", "/proc/x"]),
    ("train.py fm", train_cli.main, ["fm", "--out", "/proc/x.pt"]),
    ("train.py mat", train_cli.main, ["mat", "--out", "/proc/x.pt"]),
    ("train.py mat-il", train_cli.main, ["mat-il", "--out", "/proc/x.pt"]),
    ("predictors.bench", predictor_bench.run, ["--out", "/proc/x"]),
    ("mat.bench", mat_bench.run, ["--out", "/proc/x"]),
    ("mat.decode_bench", decode_bench.main, ["--out", "/proc/x"]),
    ("mat.validation", validation.main, ["fifo", "--dir", "/proc/x"]),
    ("evaluation.profile", profile.main, ["table2", "--out", "/proc/x"]),
]


@pytest.mark.parametrize(("name", "call", "argv"), UNWRITABLE, ids=[name for name, _, _ in UNWRITABLE])
def test_every_command_refuses_an_unwritable_out_before_doing_work(name, call, argv, tmp_path, capsys):
    run_dir = [] if not name.startswith("train") else ["--run-dir", str(tmp_path / "run")]
    status, out, err = exit_status(call, [*argv, *run_dir], capsys)
    assert status == 2 and "/proc/x" in err and "Traceback" not in err, err
    assert out == "" and not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------ checkpoints
def mat_checkpoint(path: Path, **hparams) -> Path:
    export_policy(path, MATModel(MATHyperParameters(dim=8, **hparams)), "wls", {"method": "test"})
    return path


def test_a_mat_checkpoint_without_manifest_is_refused_unless_unverified(tmp_path, bank_dir, capsys):
    path = mat_checkpoint(tmp_path / "policy.pt")
    manifest_path(path).unlink()
    with pytest.raises(CheckpointError, match="no manifest policy.json") as raised:
        make_policy("mara", checkpoint=path)
    assert str(path) in str(raised.value) and "verify=False" in str(raised.value)
    played = make_policy("mara", checkpoint=path, verify=False).model.state_dict()  # the file's own weights
    saved = torch.load(path, weights_only=True)["state_dict"]
    assert played.keys() == saved.keys() and all(torch.equal(played[key], saved[key]) for key in saved)
    status, _, err = exit_status(validation.main, [str(path), "--bank", str(bank_dir), "--dir",
                                                   str(tmp_path / "check"), "--roots", "1", "--episodes", "1"], capsys)
    assert status == 2 and "no manifest" in err and "--unverified" in err


def test_an_fm_checkpoint_without_manifest_is_refused_unless_unverified(bare_fm):
    with pytest.raises(CheckpointError, match="no manifest") as raised:
        make_demand("fm", bare_fm)
    assert str(bare_fm) in str(raised.value)
    with pytest.raises(CheckpointError, match="no manifest"):
        make_policy("lara-fm", fm_checkpoint=str(bare_fm))
    assert make_demand("fm", bare_fm, verify=False).name == "fm"


def test_a_manifest_without_a_checksum_is_refused(tmp_path):
    path = mat_checkpoint(tmp_path / "policy.pt")
    manifest_path(path).write_text(json.dumps({"checkpoint": "policy.pt"}))
    with pytest.raises(CheckpointError, match="records no checkpoint_sha256"):
        load_policy_model(path)
    load_policy_model(path, verify=False)


def test_save_checkpoint_writes_the_manifest_that_loading_verifies(tmp_path):
    path = tmp_path / "fm.pt"
    save_checkpoint(path, FlowMatchingModel(FMHyperParameters(hidden=8, width=16, time_dim=8)))
    assert json.loads(manifest_path(path).read_text())["checkpoint"] == "fm.pt"
    load_model(path)
    with path.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(path)


@pytest.mark.parametrize("hparams", [{"dim": -4}, {"heads": 3}, {"blocks": 0}, {"surprise": 1}])
def test_a_structurally_wrong_mat_checkpoint_names_the_file(hparams, tmp_path):
    path = mat_checkpoint(tmp_path / "policy.pt")
    payload = torch.load(path, weights_only=True)
    payload["hparams"].update(hparams)
    torch.save(payload, path)
    write_checksum_manifest(path)
    with pytest.raises(CheckpointError, match="does not match the MAT architecture") as raised:
        load_policy_model(path)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("hparams", [{"width": 0}, {"time_dim": 5}, {"delta": float("nan")}])
def test_a_structurally_wrong_fm_checkpoint_names_the_file(hparams, tmp_path):
    path = tmp_path / "fm.pt"
    save_checkpoint(path, FlowMatchingModel(FMHyperParameters(hidden=8, width=16, time_dim=8)))
    payload = torch.load(path, weights_only=True)
    payload["hparams"].update(hparams)
    torch.save(payload, path)
    write_checksum_manifest(path)
    with pytest.raises(CheckpointError, match="does not match the FM architecture") as raised:
        load_model(path)
    assert str(path) in str(raised.value)


# ------------------------------------------------------------------------------------------ make_policy
@pytest.mark.parametrize(("name", "kwargs", "error", "words"), [
    ("oracle", {}, ValueError, ["oracle"]),
    (7, {}, ValueError, ["7"]),
    ("mara", {"depth": 3}, TypeError, ["depth", "seed"]),
    ("fifo", {"seed": 1}, TypeError, ["seed", "no arguments"]),
    ("mara", {"seed": "zero"}, TypeError, ["seed", "zero"]),
    ("mara", {"seed": -1}, ValueError, ["seed", "-1"]),
    ("mara", {"seed": 1.0}, TypeError, ["seed", "1.0"]),
    ("mara", {"checkpoint": 5}, TypeError, ["checkpoint", "5"]),
    ("mara", {"checkpoint": ""}, ValueError, ["checkpoint", "empty"]),
    ("mara", {"sample": "yes"}, TypeError, ["sample", "yes"]),
    ("mara", {"device": "tpu"}, ValueError, ["device", "tpu"]),
    ("mara", {"verify": 0}, TypeError, ["verify", "0"]),
    ("mara", {"fm_checkpoint": 3}, TypeError, ["fm_checkpoint", "3"]),
    ("mat-il-ens", {"checkpoints": []}, TypeError, ["checkpoints"]),
    ("mat-il-ens", {"checkpoints": [1, 2]}, TypeError, ["checkpoints", "1"]),
    ("lara-fm", {"device": 0}, TypeError, ["device", "0"]),
    ("random", {"seed": True}, TypeError, ["seed", "True"]),
])
def test_make_policy_checks_its_arguments_before_loading_anything(name, kwargs, error, words):
    with pytest.raises(error) as raised:
        make_policy(name, **kwargs)
    assert all(word in str(raised.value) for word in words), raised.value


# ------------------------------------------------------------------------------------------ signals
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_sigint_and_sigterm_both_stop_a_command_with_130_and_one_line(signum, capsys):
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}

    def body() -> int:
        os.kill(os.getpid(), signum)
        # The handler runs in the main thread at its next check for signals, which may come a little after
        # os.kill returns when another thread of the process (torch's, Ray's) took the signal: give it 10 s.
        for _ in range(1000):
            time.sleep(0.01)
        raise AssertionError("the signal should have stopped the body")

    status = run_command(body, (ValueError,), lambda: "state kept in X")
    assert status == INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == "interrupted: state kept in X"
    assert {number: signal.getsignal(number) for number in previous} == previous  # the caller's handlers are back


def test_ctrl_c_stops_a_command_even_after_a_library_set_sigint_aside(capsys):
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as an imported library might leave it
    try:
        def body() -> int:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                time.sleep(0.01)
            raise AssertionError("SIGINT should have stopped the body")

        assert run_command(body, (ValueError,), "nothing") == INTERRUPTED
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # the caller's choice is back
    finally:
        signal.signal(signal.SIGINT, before)
    assert capsys.readouterr().err.strip() == "interrupted: nothing"


def test_an_expected_error_is_one_line_with_status_2(capsys):
    def body() -> int:
        raise ValueError("threads must be ≥ 1, got 0")

    assert run_command(body, (ValueError,), "-") == 2
    assert capsys.readouterr().err == "error: threads must be ≥ 1, got 0\n"
