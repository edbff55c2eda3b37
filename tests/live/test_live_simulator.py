"""The live simulator, fed real losses batch by batch, is the MARA-v0 simulator: same observations, rewards
and outcomes as the simulator over the finished curves; the live step and the replay take the engine's steps
(pure NumPy, no Ray)."""

from __future__ import annotations

import numpy as np
import pytest

from curves.bank import load_bank
from mara_env.config import MARAConfig
from mara_env.dynamics import standing_picks
from mara_env.engine import advance
from mara_env.live.record import EpisodeLog, replay, replay_mismatches, save_episode
from mara_env.live.simulator import LiveSimulator, episode_bank
from mara_env.live.step import live_step
from mara_env.live.tasks import LiveEpisode, LiveTask
from mara_env.simulator import Simulator

WIDTH = 64


def _episode(bank, rng):
    """Twelve tasks over 30 steps on the synthetic bank's ID curves, with ε spread so some succeed."""
    ids = bank.ids(family="toy_fast") + bank.ids(family="toy_slow")
    picks = rng.choice(len(ids), size=12, replace=False)
    tasks, losses = [], []
    for arrival, i in zip(sorted(rng.integers(0, 30, size=12).tolist()), picks.tolist()):
        cid = ids[i]
        record, curve = bank.records[cid], bank.cumavg(cid)
        tasks.append(LiveTask(arrival, record.family, record.seed, record.data_seed, record.batch_size, record.lr,
                              float(curve[int(rng.integers(3, 30))] * rng.uniform(0.97, 1.03)),
                              int(rng.integers(15, 40))))
        losses.append(bank.per_batch[cid][:WIDTH])
    return LiveEpisode(tuple(tasks), "synthetic"), losses


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_revealed_losses_give_the_simulators_observations_rewards_and_outcomes(bank_dir, seed):
    bank = load_bank(bank_dir)
    rng = np.random.default_rng(seed)
    episode, losses = _episode(bank, rng)
    config = MARAConfig(num_nodes=3, max_active=4, arrival_window=30, bank=str(bank_dir))
    reference = Simulator(config, episode_bank(episode, losses, WIDTH, bank.families))
    reference.load(episode.episode())
    live = LiveSimulator(config, WIDTH)
    live.load_live(episode, bank.families)
    steps = 0
    while not reference.terminated:
        for key, value in reference.observation().items():
            observed = live.observation()[key]
            assert not np.isnan(observed.astype(float)).any(), key
            np.testing.assert_array_equal(observed, value, err_msg=f"step {steps}: {key}")
        picks = rng.integers(0, config.max_active + 1, size=config.num_nodes)
        stands = standing_picks(picks, live.slot_task >= 0)
        for slot in (picks[stands] - 1).tolist():
            task = int(live.slot_task[slot])
            live.reveal(task, float(losses[task][live.batches[task]]))
        expected, got = reference.step(picks.tolist()), live.step(picks.tolist())
        assert got == expected, f"step {steps}"
        steps += 1
    assert live.terminated
    np.testing.assert_array_equal(live.status, reference.status)
    assert reference.totals["successes"] > 0 and reference.totals["expirations"] > 0


def test_unrevealed_losses_are_unknown(bank_dir):
    bank = load_bank(bank_dir)
    episode, _ = _episode(bank, np.random.default_rng(0))
    live = LiveSimulator(MARAConfig(num_nodes=2, max_active=4, arrival_window=30), WIDTH)
    live.load_live(episode, bank.families)
    assert np.isnan(live.loss_table[:, 1:]).all()
    live.reveal(0, 2.5)
    live.reveal(0, 1.5)
    assert live.loss_table[0, 2] == 2.0 and np.isnan(live.loss_table[0, 3])


def _first_task_admitted(bank_dir) -> tuple[LiveSimulator, int]:
    """A two-node live simulator stepped idle until slot 0 holds a task, and that task."""
    bank = load_bank(bank_dir)
    episode, _ = _episode(bank, np.random.default_rng(0))
    live = LiveSimulator(MARAConfig(num_nodes=2, max_active=4, arrival_window=30), WIDTH)
    live.load_live(episode, bank.families)
    while live.slot_task[0] < 0:
        live.step([0, 0])
    return live, int(live.slot_task[0])


def test_a_failed_task_expires_at_the_end_of_the_step(bank_dir):
    live, task = _first_task_admitted(bank_dir)
    live.fail(task)
    outcome = live.step([0, 0])
    assert outcome.expirations >= 1 and live.left_at[task] == live.t


def test_live_episode_json_round_trip():
    episode = LiveEpisode((LiveTask(0, "cnn_fmnist", 1, 2, 16, 1e-3, 0.123456789012345, 20),
                           LiveTask(4, "lstm_fmnist", 3, 4, 32, 2e-3, 1.5, 30)), "cpu")
    assert LiveEpisode.from_json(episode.to_json()) == episode
    with pytest.raises(ValueError, match="sorted by arrival"):
        LiveEpisode(tuple(reversed(episode.tasks)))


def test_an_episode_without_tasks_runs_to_the_end_of_its_window(bank_dir):
    bank = load_bank(bank_dir)
    live = LiveSimulator(MARAConfig(num_nodes=2, max_active=4, arrival_window=3), WIDTH)
    live.load_live(LiveEpisode(()), bank.families)
    assert live.observation()["history"].shape == (4, WIDTH)
    outcomes = [live.step([0, 0]) for _ in range(3)]
    assert outcomes[-1].terminated and not any(o.terminated for o in outcomes[:-1])


@pytest.mark.parametrize("field, value", [("families", "cnn_fmnist"), ("families", ()), ("max_steps", 0),
                                          ("attempts", 0), ("node_cpus", 0.0)])
def test_bad_live_settings_name_the_field(field, value):
    from mara_env.live import LiveSettings

    with pytest.raises(ValueError, match=field):
        LiveSettings(**{field: value})


@pytest.mark.parametrize("setting", [{"observation": "flat"}, {"actions": "scores"},
                                     {"node_speeds": (2, 1, 1, 1, 1, 1, 1)}, {"switch_cost": 1}])
def test_the_live_env_refuses_what_it_does_not_offer_before_starting_ray(setting):
    from mara_env.live.env import LiveMARAEnv

    with pytest.raises(ValueError, match=next(iter(setting))):
        LiveMARAEnv(MARAConfig(**setting))


def _played(bank, seed: int, fail_at: int | None = None):
    """An episode of ``_episode`` played by random picks through the live step, each served task revealing its
    next recorded loss; with ``fail_at``, the first task served at that step fails instead.  Returns the
    episode, its losses, the live simulator and per step (picks asked, served, failed, live step taken)."""
    rng = np.random.default_rng(seed)
    episode, losses = _episode(bank, rng)
    config = MARAConfig(num_nodes=3, max_active=4, arrival_window=30)
    live = LiveSimulator(config, WIDTH)
    live.load_live(episode, bank.families)
    steps = []
    while not live.terminated:
        picks = rng.integers(0, config.max_active + 1, size=config.num_nodes)
        stands = standing_picks(picks, live.occupied)
        served = [int(live.slot_task[slot]) for slot in (picks[stands] - 1).tolist()]
        failed = served[:1] if live.t == fail_at else []
        revealed = {task: float(losses[task][live.batches[task]]) for task in served if task not in failed}
        steps.append((picks.tolist(), sorted(revealed), failed, live_step(live, picks.tolist(), revealed, failed)))
    return episode, losses, live, steps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_live_step_gives_the_engine_s_reward_info_and_episode_end_over_the_finished_curves(bank_dir, seed):
    bank = load_bank(bank_dir)
    episode, losses, live, steps = _played(bank, seed)
    reference = Simulator(live.config, episode_bank(episode, losses, WIDTH, bank.families))
    reference.load(episode.episode())
    for picks, _, _, taken in steps:
        assert taken.picks == picks
        assert (taken.reward, taken.terminated, taken.info) == advance(reference, picks)
    assert steps[-1][3].terminated and "episode_metrics" in steps[-1][3].info


def test_a_failed_task_s_node_idles_and_the_task_expires_in_that_step(bank_dir):
    live, task = _first_task_admitted(bank_dir)
    taken = live_step(live, [1, 0], {}, [task])
    assert taken.picks == [0, 0] and taken.info["conflicts"] == 0 and taken.info["expirations"] >= 1
    assert live.task_outcome(task) == "expired" and live.per_batch[task] == []


def test_the_replay_takes_the_live_steps_again_from_the_recorded_bank(bank_dir, tmp_path):
    bank = load_bank(bank_dir)
    episode, _, live, steps = _played(bank, 3, fail_at=12)
    assert any(failed for _, _, failed, _ in steps)
    log = EpisodeLog(live.config, episode, WIDTH, bank.families)
    for t, (_, served, failed, taken) in enumerate(steps):
        log.failed.update(dict.fromkeys(failed, "failed"))
        log.steps.append({"t": t, "picks": taken.picks, "served": served, "failed": failed,
                          "successes": taken.info["successes"], "expirations": taken.info["expirations"]})
    save_episode(tmp_path, log, live.per_batch, list(live.task_outcomes()), live.metrics(),
                 dict.fromkeys(bank.families, "synthetic"))
    again = replay(tmp_path)
    assert again.rewards == [taken.reward for *_, taken in steps]
    assert again.infos == [taken.info for *_, taken in steps]
    assert again.outcomes == list(live.task_outcomes()) and replay_mismatches(tmp_path) == []
