"""The evaluation harness: reproducible, resumable, and invalidated exactly by changed inputs."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

from mara_agents.evaluation import harness, methods
from mara_agents.evaluation.harness import Settings, evaluate
from mara_agents.evaluation.methods import MethodError
from mara_env.fixed_workloads import workload_path

TOY = "eval_toy_policy:ToyPolicy"


def make_settings(bank: Path, workloads: Path, cache: Path, jobs: int = 1) -> Settings:
    return Settings(bank, workloads, roots=2, episodes=1, jobs=jobs, cache=cache, progress=False)


def copy_workloads(source: Path, target: Path, task_sets=("id", "rl_ood")) -> Path:
    target.mkdir()
    for task_set in task_sets:
        shutil.copy(workload_path(task_set, 0.04, source), workload_path(task_set, 0.04, target))
    return target


@pytest.fixture
def toy_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "toy.ckpt"
    path.write_bytes(b"weights v1")
    monkeypatch.setenv("MARA_TOY_CHECKPOINT", str(path))
    return path


def test_a_rerun_reuses_every_episode_and_gives_identical_rows(bank_dir, workloads_dir, tmp_path):
    settings = make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite")
    requests = [("fifo", "id", 0.04), ("edf", "stress", None)]
    first = evaluate(requests, settings)
    second = evaluate(requests, settings)
    assert first.computed == 8 and first.reused == 0  # (bounds + method) × 2 cells × 2 roots × 1 episode
    assert second.computed == 0 and second.reused == 8
    assert second.rows == first.rows


def test_parallel_and_serial_runs_give_identical_rows(bank_dir, workloads_dir, tmp_path):
    requests = [("fifo", "id", 0.04), ("random", "stress", None)]
    serial = evaluate(requests, make_settings(bank_dir, workloads_dir, tmp_path / "a.sqlite", jobs=1))
    parallel = evaluate(requests, make_settings(bank_dir, workloads_dir, tmp_path / "b.sqlite", jobs=2))
    assert parallel.rows == serial.rows


def test_an_interrupted_run_resumes_without_recomputing_finished_units(bank_dir, workloads_dir, tmp_path,
                                                                       monkeypatch):
    settings = make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite")
    requests = [("fifo", "id", 0.04), ("edf", "id", 0.04)]
    real, calls = harness.play_unit, []

    def interrupted(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "play_unit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evaluate(requests, settings)
    monkeypatch.setattr(harness, "play_unit", real)
    resumed = evaluate(requests, settings)
    assert resumed.reused == 2 + 2  # the bounds of both roots and the two finished method units
    assert resumed.computed == 2
    fresh = evaluate(requests, make_settings(bank_dir, workloads_dir, tmp_path / "fresh.sqlite"))
    assert resumed.rows == fresh.rows


def test_a_changed_checkpoint_invalidates_only_that_methods_cells(bank_dir, workloads_dir, tmp_path,
                                                                  toy_checkpoint):
    settings = make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite")
    requests = [("fifo", "id", 0.04), (TOY, "id", 0.04)]
    evaluate(requests, settings)
    toy_checkpoint.write_bytes(b"weights v2")
    again = evaluate(requests, settings)
    assert again.computed == 2 and again.reused == 4
    assert {r["method"] for r in again.rows} == {"fifo", TOY, "oracle", "clairvoyant"}


def test_a_changed_workload_invalidates_its_cells_and_an_identical_copy_does_not(bank_dir, workloads_dir,
                                                                                 tmp_path):
    original = copy_workloads(workloads_dir, tmp_path / "original")
    cache = tmp_path / "cache.sqlite"
    requests = [("fifo", "id", 0.04), ("fifo", "rl_ood", 0.04)]
    evaluate(requests, make_settings(bank_dir, original, cache))

    same = copy_workloads(workloads_dir, tmp_path / "same")
    assert evaluate(requests, make_settings(bank_dir, same, cache)).computed == 0

    changed = copy_workloads(workloads_dir, tmp_path / "changed")
    path = workload_path("rl_ood", 0.04, changed)
    data = json.loads(path.read_text())
    data["episodes"][0]["eps"][0] *= 1.01
    path.write_text(json.dumps(data))
    rerun = evaluate(requests, make_settings(bank_dir, changed, cache))
    assert rerun.computed == 4 and rerun.reused == 4  # the rl_ood file's bounds and FIFO episodes, both roots


def test_unavailable_methods_are_skipped_with_their_reason_unless_strict(bank_dir, workloads_dir, tmp_path):
    requests = [("fifo", "id", 0.04), ("nowhere.module:Policy", "id", 0.04)]
    settings = make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite")
    results = evaluate(requests, settings)
    reasons = {s.method: s.reason for s in results.skipped}
    assert "cannot import module 'nowhere.module'" in reasons["nowhere.module:Policy"]
    assert {r["method"] for r in results.rows} == {"fifo", "oracle", "clairvoyant"}
    with pytest.raises(MethodError, match="nowhere"):
        evaluate(requests, dataclasses.replace(settings, strict=True))


def test_with_workers_a_process_of_its_own_probes_and_the_main_process_builds_no_policy(bank_dir, workloads_dir,
                                                                                         tmp_path):
    from eval_toy_policy import CountingEDF

    counting, missing = "eval_toy_policy:CountingEDF", "nowhere.module:Policy"
    settings = make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite", jobs=2)
    before = CountingEDF.built
    results = evaluate([(counting, "id", 0.04), (missing, "id", 0.04)], settings)
    assert CountingEDF.built == before  # probed and played in other processes only
    assert len([r for r in results.rows if r["method"] == counting]) == 2
    assert "cannot import module 'nowhere.module'" in {s.method: s.reason for s in results.skipped}[missing]
    with pytest.raises(MethodError, match="nowhere"):
        evaluate([(missing, "id", 0.04)], dataclasses.replace(settings, strict=True))


def test_a_probing_or_worker_process_that_dies_is_one_clear_error(bank_dir, workloads_dir, tmp_path):
    settings = make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite", jobs=2)
    with pytest.raises(MethodError, match="builds the methods to check them ended abruptly.*--jobs 1"):
        evaluate([("eval_toy_policy:DiesWhenBuilt", "id", 0.04)], settings)
    with pytest.raises(MethodError, match="a worker process ended abruptly.*cached.*--jobs 1"):
        evaluate([("fifo", "id", 0.04), ("eval_toy_policy:DiesWhenActing", "id", 0.04)], settings)


def test_a_registered_method_whose_optional_extra_is_missing_is_skipped_even_when_strict(bank_dir, workloads_dir,
                                                                                       tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sb3_contrib", None)  # import sb3_contrib now raises ImportError
    monkeypatch.setattr(methods, "_BUILT", {})
    settings = dataclasses.replace(make_settings(bank_dir, workloads_dir, tmp_path / "cache.sqlite"), strict=True)
    results = evaluate([("fifo", "id", 0.04), ("maskable-ppo", "id", 0.04)], settings)
    reasons = {s.method: s.reason for s in results.skipped}
    assert "sb3-contrib" in reasons["maskable-ppo"] and reasons["maskable-ppo"].startswith("ModuleNotFoundError")
    assert {r["method"] for r in results.rows} == {"fifo", "oracle", "clairvoyant"}


def test_an_unknown_method_name_is_an_error(bank_dir, workloads_dir, tmp_path):
    with pytest.raises(MethodError, match="unknown method 'no-such-method'"):
        evaluate([("no-such-method", "id", 0.04)], make_settings(bank_dir, workloads_dir, tmp_path / "c.sqlite"))


def test_a_batched_policy_plays_all_its_episodes_in_lockstep_with_the_same_results(bank_dir, workloads_dir,
                                                                                   tmp_path):
    from eval_toy_policy import BatchedEDF

    settings = Settings(bank_dir, workloads_dir, roots=2, episodes=2, cache=tmp_path / "cache.sqlite",
                        progress=False)
    batched = "eval_toy_policy:BatchedEDF"
    cells = [("id", 0.04), ("stress", None)]
    results = evaluate([(m, t, p) for m in ("edf", batched) for t, p in cells], settings)
    assert BatchedEDF.largest_batch == 8  # 2 files × 2 roots × 2 episodes at once
    by_method = {}
    for row in results.rows:
        by_method.setdefault(row["method"], []).append({k: v for k, v in row.items() if k != "method"})
    assert by_method[batched] == by_method["edf"]
