"""The Ray paths on a local Ray with 2 CPUs: a live episode and its replay, faults, and the bank on Ray.

One Ray instance serves every test of this module (starting one costs seconds); it is always shut down.
Episodes are tiny: 2 nodes, 3 small-CNN tasks, budgets of about 20 batches.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from curves.data.fashion_mnist import DEFAULT_DIR

ray = pytest.importorskip("ray", reason="the Ray tests need the [ray] extra")
pytestmark = [pytest.mark.long,  # started first by make test (tests/conftest.py)
              pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="needs apt-get install dataset-fashion-mnist")]

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


def injected_faults(folder: str):
    """A batch function that fails where a marker file in ``folder`` says so, else runs the real batch.

    ``kill-S-B`` makes the worker process exit in task seed S's batch B (counted from 0), ``raise-S-B``
    makes it raise; both markers are consumed by the failing call, so the retry succeeds.  ``always-S-B``
    is never consumed: that recipe fails every time.
    """
    from mara_env.live.worker import train_batch

    def batch(*args):
        state, seed = args[-1], args[4]
        done = 0 if state is None else state["epoch"] * 10**6 + state["offset"]
        for how in ("kill", "raise", "always"):
            marker = os.path.join(folder, f"{how}-{seed}-{done}")
            if os.path.exists(marker):
                if how == "always":
                    raise RuntimeError("this recipe always fails")
                os.remove(marker)
                if how == "kill":
                    os._exit(1)
                raise RuntimeError("injected fault")
        return train_batch(*args)
    return batch


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def live_env(local_ray, faults):
    """One 2-node live env for the module (its actors start once, on one of the two CPUs, leaving the other
    to the other tests); faults only where a test puts markers."""
    env = LiveMARAEnv(CONFIG, LiveSettings(families=("cnn_fmnist",), max_steps=30, attempts=2, node_cpus=0.5),
                      injected_faults(str(faults)))
    try:
        yield env
    finally:
        env.close()


def play(env: LiveMARAEnv, out: Path, policy: str = "fifo") -> list[str]:
    """One live episode of TASKS under ``policy``, saved to ``out``; returns the tasks' outcomes."""
    chooser = make_policy(policy)
    chooser.reset()
    observation, _ = env.reset(seed=0, options={"episode": TASKS})
    done = False
    while not done:
        observation, _, terminated, truncated, _ = env.step(chooser.act(observation))
        assert env.observation_space.contains(observation)
        done = terminated or truncated
    env.save(out, policy=policy)
    return list(env.task_outcomes())


@pytest.fixture(scope="module")
def fifo_run(live_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("fifo")
    return out, play(live_env, out), live_env.losses


def test_fifo_episode_has_outcomes_and_replays_to_identical_successes_and_expiries(fifo_run):
    out, outcomes, _ = fifo_run
    assert outcomes == ["succeeded", "succeeded", "expired"]
    assert replay_mismatches(out) == []


def test_the_recorded_bank_holds_each_task_s_losses_as_the_offline_curve(fifo_run):
    import torch

    from curves.catalog import get_family
    from curves.generate import run_recipe
    from curves.recipe import Recipe

    out, _, per_batch = fifo_run
    bank = load_bank(out / "bank")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for k, task in enumerate(TASKS.tasks):
            recorded = bank.per_batch[TASKS.curve_id(k)]
            assert recorded.size == len(per_batch[k]) > 0
            offline = run_recipe(get_family(task.family), Recipe(task.seed, task.data_seed, task.batch_size, task.lr),
                                 recorded.size)
            np.testing.assert_array_equal(recorded, offline)
    finally:
        torch.set_num_threads(threads)


def test_the_live_env_passes_gymnasium_s_env_checker(live_env):
    from gymnasium.utils.env_checker import check_env

    check_env(live_env, skip_render_check=True, skip_close_check=True)


def test_the_live_env_has_mara_v0_s_spaces(live_env):
    import gymnasium as gym

    import mara_env  # noqa: F401  (registers MARA-v0)

    simulated = gym.make("MARA-v0", num_nodes=CONFIG.num_nodes, max_active=CONFIG.max_active,
                         arrival_window=CONFIG.arrival_window)
    assert live_env.action_space == simulated.action_space
    assert live_env.observation_space == simulated.observation_space


@pytest.mark.parametrize("how", ["kill", "raise"])
def test_a_worker_that_dies_mid_batch_is_retried_from_the_task_s_last_state(live_env, fifo_run, faults, tmp_path,
                                                                             how):
    _, reference, per_batch = fifo_run
    marker = faults / f"{how}-1-5"
    marker.touch()
    outcomes = play(live_env, tmp_path)
    assert not marker.exists(), "the fault was never injected"
    log = load_episode_log(tmp_path)
    assert sum(step["retries"] for step in log["steps"]) == 1 and not log["failed"]
    assert outcomes == reference
    assert live_env.losses == per_batch


def test_a_recipe_that_keeps_failing_is_reported_and_counted_as_expired(live_env, fifo_run, faults, tmp_path):
    (faults / "always-3-2").touch()
    try:
        outcomes = play(live_env, tmp_path)
    finally:
        (faults / "always-3-2").unlink()
    assert outcomes[1] == "expired"
    assert list(live_env.failed_tasks) == [1] and "always fails" in live_env.failed_tasks[1]
    assert len(live_env.losses[1]) == 2
    assert replay_mismatches(tmp_path) == []


def play_steps(env: LiveMARAEnv, out: Path) -> tuple[list[float], list[dict]]:
    """One live episode of TASKS under FIFO, saved to ``out``; returns each step's reward and info (without
    the live env's own ``failed`` entry)."""
    chooser = make_policy("fifo")
    chooser.reset()
    observation, _ = env.reset(seed=0, options={"episode": TASKS})
    rewards, infos, done = [], [], False
    while not done:
        observation, reward, terminated, truncated, info = env.step(chooser.act(observation))
        assert isinstance(info.pop("failed"), list)
        rewards.append(reward)
        infos.append(info)
        done = terminated or truncated
    env.save(out)
    return rewards, infos


def engine_steps(out: Path) -> tuple[list[float], list[dict]]:
    """The logged decisions of the episode in ``out`` through the engine's step over the finished curves it
    recorded (the ``MARA-v0`` simulator as the Gymnasium env steps it)."""
    from mara_env.engine import advance
    from mara_env.live.simulator import episode_bank
    from mara_env.simulator import Simulator

    log, bank = load_episode_log(out), load_bank(out / "bank")
    per_batch = [bank.per_batch.get(TASKS.curve_id(k), np.empty(0)) for k in range(len(TASKS))]
    sim = Simulator(CONFIG, episode_bank(TASKS, per_batch, log["history_width"], bank.families))
    sim.load(TASKS.episode())
    steps = [advance(sim, step["picks"]) for step in log["steps"]]
    return [reward for reward, _, _ in steps], [info for _, _, info in steps]


def test_the_live_env_and_the_replay_take_the_engine_s_steps(live_env, tmp_path):
    from mara_env.live import replay

    rewards, infos = play_steps(live_env, tmp_path)
    again = replay(tmp_path)
    assert infos[-1]["task_outcomes"] == tuple(again.outcomes) == ("succeeded", "succeeded", "expired")
    assert (again.rewards, again.infos) == (rewards, infos) == engine_steps(tmp_path)


def test_a_failed_recipe_replays_to_the_live_env_s_rewards_and_infos(live_env, faults, tmp_path):
    from mara_env.live import replay

    (faults / "always-3-2").touch()
    try:
        rewards, infos = play_steps(live_env, tmp_path)
    finally:
        (faults / "always-3-2").unlink()
    assert list(live_env.failed_tasks) == [1]
    again = replay(tmp_path)
    assert (again.rewards, again.infos) == (rewards, infos)
    assert again.outcomes == list(live_env.task_outcomes())


def test_mara_drives_the_live_env_and_replays_identically(local_ray, tmp_path):
    """The shipped MAT checkpoints were trained with M = 7: seven nodes, packed onto one CPU."""
    env = LiveMARAEnv(MARAConfig(num_nodes=7, max_active=10, arrival_window=5),
                      LiveSettings(families=("cnn_fmnist",), max_steps=30, node_cpus=1 / 7))
    try:
        outcomes = play(env, tmp_path, "mara")
    finally:
        env.close()
    assert "succeeded" in outcomes
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


def test_nodes_the_cluster_cannot_hold_are_refused_with_its_size(local_ray):
    from mara_env.live.runner import BatchRunner

    with pytest.raises(RuntimeError, match=r"cannot hold 3 node\(s\) of 1 CPU: it has 2 CPU"):
        BatchRunner(3, ("cnn_fmnist",), node_cpus=1.0, startup_timeout_s=1.0)


def test_nodes_that_cannot_start_on_a_busy_cluster_say_so(live_env):
    """The module's live env holds one of the two CPUs, so a second node of 1 CPU waits for it."""
    from mara_env.live.runner import BatchRunner

    with pytest.raises(RuntimeError, match=r"of 2 node\(s\) of 1 CPU did not start within 1 s.*available"):
        BatchRunner(2, ("cnn_fmnist",), node_cpus=1.0, startup_timeout_s=1.0)
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0.0) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU") == pytest.approx(1.0)  # the node that did start was released


def test_nodes_run_at_the_default_priority_not_ray_s_worker_niceness(live_env):
    """Ray starts workers at niceness 15, which starves a node beside any other work; nodes run at 0."""
    from mara_env.live.runner import BatchRunner

    def niceness(*args):
        import os

        return None, {"loss": float(os.nice(0)), "compute_s": 0.0, "worker_s": 0.0}

    runner = BatchRunner(1, ("cnn_fmnist",), node_cpus=0.5, batch_function=niceness)
    try:
        assert runner.run([(0, 0, LiveTask(0, "cnn_fmnist", 1, 2, 16, 2e-3, 2.15, 20))]).losses == {0: 0.0}
    finally:
        runner.close()
