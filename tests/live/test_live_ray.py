"""The Ray paths on a local Ray with 2 CPUs: a live episode and its replay, faults, and the bank on Ray.

One Ray instance serves every test of this module (starting one costs seconds); it is always shut down.
Episodes are tiny: 2 nodes, 3 small-CNN tasks, budgets of about 20 batches.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from curves.data.fashion_mnist import DEFAULT_DIR

ray = pytest.importorskip("ray", reason="the Ray tests need the [ray] extra")
pytestmark = pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="needs apt-get install dataset-fashion-mnist")

from curves.bank import load_bank  # noqa: E402
from mara_agents import make_policy  # noqa: E402
from mara_env.config import MARAConfig  # noqa: E402
from mara_env.live import LiveEpisode, LiveMARAEnv, LiveSettings, LiveTask, replay_mismatches  # noqa: E402
from mara_env.live.record import load_episode_log  # noqa: E402

TASKS = LiveEpisode((LiveTask(0, "cnn_fmnist", 1, 2, 16, 2e-3, 2.15, 20),
                     LiveTask(0, "cnn_fmnist", 3, 4, 32, 1e-3, 2.20, 18),
                     LiveTask(3, "cnn_fmnist", 5, 6, 16, 3e-3, 1.90, 20)))
CONFIG = MARAConfig(num_nodes=2, max_active=2, arrival_window=5)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def play(out: Path, policy: str = "fifo", batch_function=None, attempts: int = 3) -> LiveMARAEnv:
    """One live episode of TASKS under ``policy``, saved to ``out``; returns the (closed) env."""
    env = LiveMARAEnv(CONFIG, LiveSettings(families=("cnn_fmnist",), max_steps=30, attempts=attempts),
                      batch_function)
    try:
        chooser = make_policy(policy)
        chooser.reset()
        observation, _ = env.reset(seed=0, options={"episode": TASKS})
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(chooser.act(observation))
            assert env.observation_space.contains(observation)
            done = terminated or truncated
        env.save(out, policy=policy)
    finally:
        env.close()
    return env


@pytest.fixture(scope="module")
def fifo_run(local_ray, tmp_path_factory):
    out = tmp_path_factory.mktemp("fifo")
    return out, play(out)


def test_fifo_episode_has_outcomes_and_replays_to_identical_successes_and_expiries(fifo_run):
    out, env = fifo_run
    assert env.outcomes() == ["succeeded", "succeeded", "expired"]
    assert replay_mismatches(out) == []


def test_the_recorded_bank_holds_each_task_s_losses_as_the_offline_curve(fifo_run):
    import torch

    from curves.catalog import get_family
    from curves.generate import run_recipe
    from curves.recipe import Recipe

    out, env = fifo_run
    bank = load_bank(out / "bank")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for k, task in enumerate(TASKS.tasks):
            recorded = bank.per_batch[TASKS.curve_id(k)]
            assert recorded.size == len(env.sim.per_batch[k]) > 0
            offline = run_recipe(get_family(task.family), Recipe(task.seed, task.data_seed, task.batch_size, task.lr),
                                 recorded.size)
            np.testing.assert_array_equal(recorded, offline)
    finally:
        torch.set_num_threads(threads)


def crash_once(marker: str, seed: int, batch: int, how: str):
    """A batch function that fails once — the worker process exits (``kill``) or raises — in task ``seed``'s
    batch ``batch``, then behaves normally (the marker file is consumed by the failing call)."""
    from mara_env.live.worker import train_batch

    def flaky(*args):
        state = args[-1]
        done = 0 if state is None else state["epoch"] * 10**6 + state["offset"]
        if args[4] == seed and done == batch and os.path.exists(marker):
            os.remove(marker)
            if how == "kill":
                os._exit(1)
            raise RuntimeError("injected fault")
        return train_batch(*args)
    return flaky


@pytest.mark.parametrize("how", ["kill", "raise"])
def test_a_worker_that_dies_mid_batch_is_retried_from_the_task_s_last_state(fifo_run, tmp_path, how):
    out, reference = fifo_run
    marker = tmp_path / "fault"
    marker.touch()
    env = play(tmp_path / "run", batch_function=crash_once(str(marker), seed=1, batch=5, how=how))
    assert not marker.exists(), "the fault was never injected"
    log = load_episode_log(tmp_path / "run")
    assert sum(step["retries"] for step in log["steps"]) == 1 and not log["failed"]
    assert env.outcomes() == reference.outcomes()
    assert env.sim.per_batch == reference.sim.per_batch


def test_a_recipe_that_keeps_failing_is_reported_and_counted_as_expired(local_ray, tmp_path):
    def always_fails(*args):
        from mara_env.live.worker import train_batch

        if args[4] == 3 and args[-1] is not None and args[-1]["offset"] == 2:
            raise RuntimeError("this recipe always fails at its third batch")
        return train_batch(*args)

    env = play(tmp_path, batch_function=always_fails, attempts=2)
    assert env.outcomes()[1] == "expired"
    assert list(env.failed_tasks) == [1] and "always fails" in env.failed_tasks[1]
    assert len(env.sim.per_batch[1]) == 2
    assert replay_mismatches(tmp_path) == []


def test_bank_built_on_ray_equals_the_local_build(local_ray, tmp_path):
    import torch

    from curves.build_bank import build
    from curves.ray_build import build_on_ray

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        build(["cnn_fmnist"], tmp_path / "local", "cpu", None, "cpu", None, scale=0.125, length=6)
    finally:
        torch.set_num_threads(threads)
    report = build_on_ray(["cnn_fmnist"], tmp_path / "ray", scale=0.125, length=6, progress=False)
    assert report.made == 6 and not report.failed
    local, remote = load_bank(tmp_path / "local"), load_bank(tmp_path / "ray")
    assert local.records == remote.records and local.families == remote.families
    for cid in local.records:
        np.testing.assert_array_equal(local.per_batch[cid], remote.per_batch[cid])
    assert build_on_ray(["cnn_fmnist"], tmp_path / "ray", scale=0.125, length=6, progress=False).made == 0


def test_a_failing_curve_is_retried_then_reported_never_dropped(local_ray, tmp_path):
    from curves.ray_build import build_on_ray, train_curve

    marker = tmp_path / "fault"
    marker.touch()

    def faulty(family, split, index, *rest):
        if (split, index) == ("test", 1):
            raise RuntimeError("curve 1 always fails")
        if index == 0 and os.path.exists(marker):
            os.remove(marker)
            os._exit(1)
        return train_curve(family, split, index, *rest)

    report = build_on_ray(["cnn_fmnist"], tmp_path / "bank", scale=0.125, length=4, retries=2, progress=False,
                          train=faulty)
    assert report.retried == 3 and report.made == 5
    assert list(report.failed) == ["cnn_fmnist/test/001"] and "always fails" in report.failed["cnn_fmnist/test/001"]
    assert "cnn_fmnist/test/001" not in load_bank(tmp_path / "bank").records
    assert len(load_bank(tmp_path / "bank").records) == 5
