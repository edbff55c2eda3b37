"""The live simulator, fed real losses batch by batch, is the MARA-v0 simulator: same observations, rewards
and outcomes as the simulator over the finished curves (pure NumPy, no Ray)."""

from __future__ import annotations

import numpy as np
import pytest

from curves.bank import load_bank
from mara_env.config import MARAConfig
from mara_env.dynamics import standing_picks
from mara_env.live.simulator import LiveSimulator, episode_bank
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


def test_a_failed_task_expires_at_the_end_of_the_step(bank_dir):
    bank = load_bank(bank_dir)
    episode, _ = _episode(bank, np.random.default_rng(0))
    live = LiveSimulator(MARAConfig(num_nodes=2, max_active=4, arrival_window=30), WIDTH)
    live.load_live(episode, bank.families)
    while live.slot_task[0] < 0:
        live.step([0, 0])
    task = int(live.slot_task[0])
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
