"""Bad settings for ``train.py fm``, ``train.py mat`` and ``train.py mat-il``: every flag is checked before any
training starts, and a bad value is one line naming the setting, with exit status 2 and nothing created.
SIGTERM and SIGINT stop a run with exit status 130 and one line saying what was saved.

``train.py`` is called in-process (its ``main``); one case runs it as a real process to send it SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import train as train_cli
from cli_status import exit_status
from mara_agents.play.checkpoints import load_run_state

ROOT = Path(__file__).resolve().parents[2]
BAD = "=no"  # a value given to an on/off flag, which takes none

FM_CASES = [  # (argv, words the message must contain); every flag of `train.py fm`
    (["--bank", "{tmp}/no-bank"], ["bank", "no-bank"]),
    (["--bank", "{file}"], ["bank", "not a directory"]),
    (["--run-dir", "/proc/run"], ["run_dir", "/proc/run"]),
    (["--run-dir", "{file}"], ["run_dir", "is a file"]),
    (["--out", "/proc/x.pt"], ["out", "/proc/x.pt"]),
    (["--out", "{tmp}"], ["out", "is a directory"]),
    (["--out", ""], ["out", "empty"]),
    (["--seed", "-1"], ["seed", "-1"]),
    (["--seed", "one"], ["--seed", "one"]),
    (["--device", "tpu"], ["device", "tpu"]),
    (["--threads", "0"], ["threads", "0"]),
    (["--threads", "100000"], ["threads", "100000"]),
    (["--batch-size", "0"], ["batch_size", "0"]),
    (["--batch-size", "100000000"], ["batch_size", "100000000"]),
    (["--lr", "nan"], ["lr", "nan"]),
    (["--lr", "0"], ["lr", "0"]),
    (["--grad-clip", "-1"], ["grad_clip", "-1"]),
    (["--max-steps", "40"], ["max_steps=40", "eval_every=250"]),
    (["--max-steps", "0"], ["max_steps", "0"]),
    (["--eval-every", "0"], ["eval_every", "0"]),
    (["--patience", "0"], ["patience", "0"]),
    (["--val-examples", "0"], ["val_examples", "0"]),
    (["--val-examples", "999999999"], ["val_examples", "999999999"]),
    (["--stats-examples", "-5"], ["stats_examples", "-5"]),
    (["--min-prefix", "2"], ["min_prefix", "2"]),
    (["--resume" + BAD], ["--resume"]),
    (["--force" + BAD], ["--force"]),
    (["--notes"], ["--notes"]),
    (["--progress" + BAD], ["--progress"]),
    (["--hidden", "0"], ["hidden", "0"]),
    (["--history-points", "-3"], ["history_points", "-3"]),
    (["--width", "-1"], ["width", "-1"]),
    (["--width", "1000000"], ["width", "1000000"]),
    (["--time-dim", "7"], ["time_dim", "7"]),
]

MAT_CASES = [  # every flag of `train.py mat`, its PPO settings, model and environment
    (["--seed", "-1"], ["seed", "-1"]),
    (["--predictor", "oracle"], ["predictor", "oracle"]),
    (["--fm-checkpoint", "{tmp}/no-fm.pt"], ["fm_checkpoint", "no-fm.pt"]),
    (["--fm-checkpoint", "{tmp}"], ["fm_checkpoint", "not a file"]),
    (["--steps", "0"], ["steps", "0"]),
    (["--validate-every", "-1"], ["validate_every", "-1"]),
    (["--validation-roots", "0"], ["validation_roots", "0"]),
    (["--validation-episodes", "0"], ["validation_episodes", "0"]),
    (["--validation-stress-episodes", "-1"], ["validation_stress_episodes", "-1"]),
    (["--device", "tpu"], ["device", "tpu"]),
    (["--device", "cuda:x"], ["device", "cuda:x"]),
    (["--threads", "0"], ["threads", "0"]),
    (["--num-envs", "0"], ["num_envs", "0"]),
    (["--num-envs", "100000", "--rollout-steps", "100"], ["num_envs × rollout_steps", "10000000"]),
    (["--rollout-steps", "0"], ["rollout_steps", "0"]),
    (["--run-dir", "/proc/run"], ["run_dir", "/proc/run"]),
    (["--out", "/proc/x.pt"], ["out", "/proc/x.pt"]),
    (["--out", "{tmp}"], ["out", "is a directory"]),
    (["--snapshot-every", "-1"], ["snapshot_every", "-1"]),
    (["--checkpoint-every", "0"], ["checkpoint_every", "0"]),
    (["--resume" + BAD], ["--resume"]),
    (["--force" + BAD], ["--force"]),
    (["--init-from", "{tmp}/no-policy.pt"], ["init_from", "no-policy.pt"]),
    (["--method", "mara"], ["method", "mara"]),
    (["--critic-warmup", "-1"], ["critic_warmup", "-1"]),
    (["--privileged-critic" + BAD], ["--privileged-critic"]),
    (["--unverified" + BAD], ["--unverified"]),
    (["--progress" + BAD], ["--progress"]),
    (["--arrival-prob", "2"], ["arrival_prob", "2"]),
    (["--task-set", "moon"], ["task_set", "moon"]),
    (["--reward", "dense"], ["reward", "dense"]),
    (["--shaping-beta", "inf"], ["shaping_beta", "inf"]),
    (["--bank", "{tmp}/no-bank"], ["bank", "no-bank"]),
    (["--lr", "0"], ["lr", "0"]),
    (["--anneal-lr" + BAD], ["--anneal-lr"]),
    (["--gamma", "5"], ["gamma", "5"]),
    (["--gae-lambda", "-1"], ["gae_lambda", "-1"]),
    (["--clip", "-1"], ["clip", "-1"]),
    (["--value-coef", "-1"], ["value_coef", "-1"]),
    (["--entropy-coef", "nan"], ["entropy_coef", "nan"]),
    (["--epochs", "0"], ["epochs", "0"]),
    (["--minibatches", "0"], ["minibatches", "0"]),
    (["--max-grad-norm", "0"], ["max_grad_norm", "0"]),
    (["--reference-kl", "1"], ["reference_kl", "init_from"]),
    (["--dim", "0"], ["dim", "0"]),
    (["--dim", "100000"], ["dim", "100000"]),
    (["--heads", "3"], ["dim (64)", "heads (3)"]),
    (["--blocks", "0"], ["blocks", "0"]),
    (["--slack-prior" + BAD], ["--slack-prior"]),
]

MAT_IL_CASES = [  # every flag of `train.py mat-il`
    (["--seed", "-1"], ["seed", "-1"]),
    (["--predictor", "oracle"], ["predictor", "oracle"]),
    (["--fm-checkpoint", "{tmp}/no-fm.pt"], ["fm_checkpoint", "no-fm.pt"]),
    (["--num-envs", "0"], ["num_envs", "0"]),
    (["--num-envs", "1000000"], ["num_envs", "1000000"]),
    (["--validation-roots", "0"], ["validation_roots", "0"]),
    (["--validation-episodes", "0"], ["validation_episodes", "0"]),
    (["--validation-stress-episodes", "-1"], ["validation_stress_episodes", "-1"]),
    (["--device", "tpu"], ["device", "tpu"]),
    (["--threads", "0"], ["threads", "0"]),
    (["--run-dir", "/proc/run"], ["run_dir", "/proc/run"]),
    (["--out", "/proc/x.pt"], ["out", "/proc/x.pt"]),
    (["--force" + BAD], ["--force"]),
    (["--unverified" + BAD], ["--unverified"]),
    (["--progress" + BAD], ["--progress"]),
    (["--arrival-prob", "-1"], ["arrival_prob", "-1"]),
    (["--task-set", "moon"], ["task_set", "moon"]),
    (["--bank", "{tmp}/no-bank"], ["bank", "no-bank"]),
    (["--rounds", "0"], ["rounds", "0"]),
    (["--round-steps", "0"], ["round_steps", "0"]),
    (["--beta-decay", "2"], ["beta_decay", "2"]),
    (["--bc-epochs", "0"], ["bc_epochs", "0"]),
    (["--bc-batch", "0"], ["bc_batch", "0"]),
    (["--bc-lr", "0"], ["bc_lr", "0"]),
    (["--bc-grad-norm", "0"], ["bc_grad_norm", "0"]),
    (["--load-low", "0.5", "--load-high", "0.1"], ["load_low", "load_high"]),
    (["--stress-envs", "100"], ["stress_envs", "100"]),
    (["--dim", "0"], ["dim", "0"]),
    (["--heads", "0"], ["heads", "0"]),
    (["--blocks", "100"], ["blocks", "100"]),
    (["--slack-prior" + BAD], ["--slack-prior"]),
]

CASES = ([("fm", *case) for case in FM_CASES] + [("mat", *case) for case in MAT_CASES]
         + [("mat-il", *case) for case in MAT_IL_CASES])


def run_main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    return exit_status(train_cli.main, argv, capsys)


@pytest.mark.parametrize(("stage", "argv", "words"), CASES, ids=[f"{s} {' '.join(a)}" for s, a, _ in CASES])
def test_every_training_flag_is_checked_before_training(stage, argv, words, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{file}", str(a_file)) for a in argv]
    run_dir = tmp_path / "run"
    given = {a.split("=")[0] for a in argv}
    defaults = [] if "--run-dir" in given else ["--run-dir", str(run_dir)]
    status, out, err = run_main([stage, *defaults, *argv], capsys)
    assert status == 2, err
    assert all(word in err for word in words), err
    assert "Traceback" not in err and out == ""
    assert not run_dir.exists()  # refused before anything was made


def test_no_progress_is_accepted_by_every_stage():
    from mara_agents.training.config import parse_config as parse_mat
    from mara_agents.training.config import parse_il_config as parse_il
    from mara_agents.predictors.train import parse_config as parse_fm

    assert not any(parse(["--no-progress"]).progress for parse in (parse_fm, parse_mat, parse_il))
    assert all(parse([]).progress for parse in (parse_fm, parse_mat, parse_il))


def test_sigterm_stops_fm_training_with_130_saving_a_resumable_state(bank_dir, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "train.py", "fm", "--bank", str(bank_dir), "--run-dir", str(run), "--out",
               str(tmp_path / "fm.pt"), "--max-steps", "1000000", "--eval-every", "5", "--batch-size", "8",
               "--val-examples", "16", "--stats-examples", "32", "--hidden", "8", "--width", "16", "--no-progress"]
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # The first state is saved after step 5: from then on the process is training, however busy the host is.
    while not (run / "last.pt").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # some steps further
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"interrupted: the training state is saved in {run / 'last.pt'}; run the same command "
                     "again to resume"]
    assert load_run_state(run / "last.pt")["step"] >= 5


def test_an_interrupted_stage_without_saved_state_says_so(monkeypatch, tmp_path, capsys):
    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr("mara_agents.training.train.train", interrupted)
    status, _, err = run_main(["mat", "--run-dir", str(tmp_path / "run")], capsys)
    assert status == 130 and "no training state was saved yet" in err
    monkeypatch.setattr("mara_agents.training.il_train.train_il", interrupted)
    status, _, err = run_main(["mat-il", "--run-dir", str(tmp_path / "il")], capsys)
    assert status == 130 and err.strip().endswith("MAT-IL does not resume; no policy was exported yet")


def test_an_interrupted_mat_il_run_says_that_training_it_again_needs_force(monkeypatch, tmp_path, capsys):
    def interrupted_after_writing(config):
        (config.run_path / "tb").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr("mara_agents.training.il_train.train_il", interrupted_after_writing)
    status, _, err = run_main(["mat-il", "--run-dir", str(tmp_path / "il")], capsys)
    assert status == 130 and err.strip().endswith("MAT-IL does not resume; no policy was exported yet; to train it "
                                                  f"again, add --force (it replaces {tmp_path / 'il'})")
    monkeypatch.undo()
    status, _, err = run_main(["mat-il", "--run-dir", str(tmp_path / "il")], capsys)
    assert status == 2 and "add --force" in err  # as the interruption said
