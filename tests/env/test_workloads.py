"""Workload files: round trip, validation with named errors, and reproducible generation."""

import json

import gymnasium as gym
import numpy as np
import pytest

import mara_env  # noqa: F401
from curves.bank import load_bank
from mara_env.fixed_workloads import build_workload
from mara_env.workload import Episode, WorkloadError, file_checksum, load_workload, save_workload


def test_round_trip_preserves_episodes(bank_dir, tmp_path):
    workload = build_workload(load_bank(bank_dir), "rl_ood", 0.05, roots=2, episodes=3)
    save_workload(tmp_path / "w.json", workload)
    loaded = load_workload(tmp_path / "w.json", load_bank(bank_dir))
    assert len(loaded.episodes) == 6 and loaded.task_set == "rl_ood" and loaded.arrival_prob == 0.05
    for a, b in zip(workload.episodes, loaded.episodes):
        assert a.curve == b.curve and np.array_equal(a.arrival, b.arrival) and np.allclose(a.eps, b.eps, rtol=1e-5)
        assert (a.root, a.index) == (b.root, b.index)


def test_generation_is_reproducible(bank_dir, tmp_path):
    for name in ("a.json", "b.json"):
        save_workload(tmp_path / name, build_workload(load_bank(bank_dir), "vit_ood", 0.06, roots=2, episodes=2))
    assert file_checksum(tmp_path / "a.json") == file_checksum(tmp_path / "b.json")


def test_eval_workloads_use_only_test_curves(bank_dir):
    workload = build_workload(load_bank(bank_dir), "vit_ood", 0.07, roots=1, episodes=4)
    assert all(cid.split("/")[1] == "test" for ep in workload.episodes for cid in ep.curve)


def test_env_replays_workload_episodes_in_turn(bank_dir, tmp_path):
    workload = build_workload(load_bank(bank_dir), "id", 0.04, roots=1, episodes=2)
    save_workload(tmp_path / "w.json", workload)
    env = gym.make("MARA-v0", bank=str(bank_dir), workload=str(tmp_path / "w.json"))
    env.reset()
    assert env.unwrapped.engine.sim.episode.curve == workload.episodes[0].curve
    env.reset()
    assert env.unwrapped.engine.sim.episode.curve == workload.episodes[1].curve
    env.reset(options={"episode": 0})
    assert env.unwrapped.engine.sim.episode.curve == workload.episodes[0].curve
    with pytest.raises(ValueError, match="options\\['episode'\\]"):
        env.reset(options={"episode": 7})


def test_missing_file_is_named(tmp_path):
    with pytest.raises(WorkloadError, match="nope.json"):
        load_workload(tmp_path / "nope.json")


def test_unknown_curve_is_named(bank_dir, tmp_path):
    path = tmp_path / "bad.json"
    workload = build_workload(load_bank(bank_dir), "id", 0.04, roots=1, episodes=1)
    data = workload.to_json()
    data["episodes"][0]["curve"][0] = "ghost/test/999"
    path.write_text(json.dumps(data))
    with pytest.raises(WorkloadError, match="ghost/test/999"):
        load_workload(path, load_bank(bank_dir))


@pytest.mark.parametrize("text", ["{not json", json.dumps({"format": "other"}),
                                  json.dumps({"format": "mara-workload", "version": 1, "episodes": [{}]})])
def test_malformed_files_are_named(tmp_path, text):
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(WorkloadError, match="broken.json"):
        load_workload(path)


def test_unsorted_arrivals_are_rejected():
    with pytest.raises(WorkloadError, match="sorted"):
        Episode.from_lists([5, 1], ["a", "b"], [0.1, 0.1], [10, 10])
