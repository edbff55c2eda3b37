"""``python -m mara_agents.live.jobs bank SOURCE... --out BANK``: job files and recorded runs become a bank with
train/val/test splits by job-name pattern, each job a family whose budget rule is its budget, curves run to 2·B;
``train.py fm --bank BANK --init-from`` fine-tunes on it; bad inputs are one line, exit 2 and no bank; ``forecast
--jobs`` forecasts the matching jobs alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curves.bank import load_bank
from mara_agents.live.jobs.__main__ import main
from mara_agents.live.jobs.files import load_jobs
from mara_agents.predictors.fm.examples import id_curve_set
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT
from mara_agents.predictors.train import FMTrainConfig, train
from mara_env.config import MARAConfig
from mara_env.live.jobs import job_episode, job_specs, run_offline
from mara_env.live.record import EpisodeLog, save_episode

CODE = '''
import numpy as np
from mara_agents.live.jobs import Job


def setup(seed):
    rng = np.random.default_rng(seed)
    return {"rate": rng.uniform(0.05, 0.2), "s": 0, "rng": rng}


def step(state, floor=0.2):
    state["s"] += 1
    return state, float(floor + np.exp(-state["rate"] * state["s"]) + 0.02 * state["rng"].random())


JOBS = [Job(f"{kind}-{k}", setup, step, target=0.6, budget=budget, seed=k, batch_size=8, lr=0.01)
        for k, (kind, budget) in enumerate([("fast", 10), ("fast", 12), ("slow", 8), ("slow", 9), ("odd", 10)])]
'''


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.py"
    path.write_text(CODE)
    return path


def recorded_run(folder: Path, job_file: Path, steps: int) -> Path:
    """A folder as a jobs run leaves it, written without Ray: each job's first ``steps`` losses."""
    jobs = load_jobs(job_file)
    episode = job_episode(jobs)
    log = EpisodeLog(MARAConfig(num_nodes=1, arrival_window=1), episode, 32, job_specs(jobs))
    by_name = {job.name: job for job in jobs}
    losses = [run_offline(by_name[task.family], steps).tolist() for task in episode.tasks]
    save_episode(folder, log, losses, ["expired"] * len(jobs), {}, {})
    return folder


def test_a_job_file_becomes_a_bank_split_by_pattern_with_one_curve_per_seed_offset(tmp_path, job_file, capsys):
    out = tmp_path / "bank"
    assert main(["bank", str(job_file), "--out", str(out), "--val", "slow-*", "--test", "odd-*",
                 "--seed-offsets", "0", "100"]) == 0
    bank = load_bank(out)
    assert {cid.rsplit("/", 2)[1] for cid in bank.ids(family="slow-2")} == {"val"}
    assert bank.ids(family="odd-4") == ["odd-4/test/000", "odd-4/test/001"]
    assert {name: spec.role for name, spec in bank.families.items()} == \
        {"fast-0": "id", "fast-1": "id", "slow-2": "id", "slow-3": "id", "odd-4": "ood"}
    assert bank.family("fast-1").max_budget == 12
    assert bank.records["fast-1/train/001"].seed == 101 and bank.records["fast-1/train/001"].length == 24
    assert not np.array_equal(bank.per_batch["fast-1/train/000"], bank.per_batch["fast-1/train/001"])
    assert id_curve_set(bank, "train", 4).ids == ("fast-0/train/000", "fast-0/train/001", "fast-1/train/000",
                                                 "fast-1/train/001")
    assert [line.split() for line in capsys.readouterr().out.splitlines()[:3]] == [
        ["train", "4", "curves", "of", "2", "jobs:", "fast-0,", "fast-1"],
        ["val", "4", "curves", "of", "2", "jobs:", "slow-2,", "slow-3"], ["test", "2", "curves", "of", "1", "jobs:", "odd-4"]]


def test_recorded_runs_are_completed_to_twice_the_budget_by_the_job_file(tmp_path, job_file):
    run = recorded_run(tmp_path / "run", job_file, 5)
    assert main(["bank", str(run), "--out", str(tmp_path / "short"), "--val", "slow-*"]) == 0
    assert load_bank(tmp_path / "short").records["fast-1/train/000"].length == 5
    assert main(["bank", str(run), "--out", str(tmp_path / "full"), "--val", "slow-*", "--complete",
                 str(job_file)]) == 0
    full = load_bank(tmp_path / "full")
    assert full.records["fast-1/train/000"].length == 24
    assert np.array_equal(full.per_batch["fast-1/train/000"][:5], load_bank(run / "bank").per_batch["fast-1/test/001"])


def test_fm_fine_tunes_on_the_bank_from_the_shipped_checkpoint(tmp_path, job_file):
    assert main(["bank", str(job_file), "--out", str(tmp_path / "bank"), "--val", "slow-*"]) == 0
    config = FMTrainConfig(bank=str(tmp_path / "bank"), run_dir=str(tmp_path / "run"), out=str(tmp_path / "fm.pt"),
                           init_from=str(DEFAULT_CHECKPOINT), max_steps=2, eval_every=1, batch_size=8,
                           val_examples=8, stats_examples=8, progress=False)
    result = train(config)
    assert result.checkpoint.is_file() and result.steps == 2


@pytest.mark.parametrize("extra, message", [
    (["--val", "nope-*"], "--val 'nope-*' matches no job"),
    ([], "no job goes to 'val'"),
    (["--val", "slow-*", "--test", "slow-2"], "job 'slow-2' matches both a --val and a --test pattern"),
    (["--val", "slow-*", "--seed-offsets", "0", "0"], "--seed-offsets must be distinct"),
    (["--val", "slow-*", "--complete", "JOBS"], "--complete completes recorded runs"),
])
def test_bad_requests_are_one_line_exit_2_and_no_bank(tmp_path, job_file, capsys, extra, message):
    extra = [str(job_file) if item == "JOBS" else item for item in extra]
    assert main(["bank", str(job_file), "--out", str(tmp_path / "bank"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["jobs.py"]


def test_a_job_given_twice_an_existing_out_and_a_foreign_complete_are_refused(tmp_path, job_file, capsys):
    run = recorded_run(tmp_path / "run", job_file, 5)
    assert main(["bank", str(job_file), str(run), "--out", str(tmp_path / "bank"), "--val", "slow-*"]) == 2
    assert "given by more than one source" in capsys.readouterr().err
    assert main(["bank", str(job_file), "--out", str(run), "--val", "slow-*"]) == 2
    assert "already exists" in capsys.readouterr().err
    other = tmp_path / "other.py"
    other.write_text(CODE.replace("floor=0.2", "floor=0.3"))
    assert main(["bank", str(run), "--out", str(tmp_path / "bank"), "--val", "slow-*", "--complete", str(other)]) == 2
    assert "differs from its record" in capsys.readouterr().err
    assert not (tmp_path / "bank").exists() and not list(tmp_path.glob(".bank.*"))


def test_forecast_jobs_keeps_the_matching_jobs_and_refuses_a_pattern_that_matches_none(job_file, capsys):
    assert main(["forecast", str(job_file), "--crossings-only", "--jobs", "slow-*", "odd-4"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.strip().splitlines()[1:]]
    assert rows == ["slow-2", "slow-3", "odd-4"]
    assert main(["forecast", str(job_file), "--crossings-only", "--jobs", "fast-9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--jobs 'fast-9' matches no job" in err[0]


def test_keep_bank_files_its_id_training_curves_beside_the_jobs_and_refuses_a_name_clash(tmp_path, job_file, capsys):
    assert main(["bank", str(job_file), "--out", str(tmp_path / "kept"), "--val", "slow-*", "--test", "odd-*"]) == 0
    kept = load_bank(tmp_path / "kept")
    assert main(["bank", str(job_file), "--out", str(tmp_path / "clash"), "--val", "slow-*",
                 "--keep-bank", str(tmp_path / "kept")]) == 2
    assert "have the name of a family of --keep-bank" in capsys.readouterr().err
    renamed = tmp_path / "renamed.py"
    renamed.write_text(CODE.replace('f"{kind}-{k}"', 'f"new-{kind}-{k}"'))
    assert main(["bank", str(renamed), "--out", str(tmp_path / "both"), "--val", "new-slow-*",
                 "--keep-bank", str(tmp_path / "kept")]) == 0
    both = load_bank(tmp_path / "both")
    assert sorted(both.ids(splits=["val"])) == ["new-slow-2/val/000", "new-slow-3/val/000"]
    assert set(kept.ids(splits=["train"])) < set(both.ids(splits=["train"]))
    assert not set(kept.ids(splits=["val", "test"])) & set(both.ids())
    assert np.array_equal(both.per_batch["fast-1/train/000"], kept.per_batch["fast-1/train/000"])
