"""The native vector env gives the same trajectories as N single envs (Gymnasium's SyncVectorEnv over MARA-v0)."""

import weakref

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import mara_env  # noqa: F401  (registers MARA-v0)
from curves.bank import load_bank
from mara_env import history_copies
from benchmarks.env_bench import fifo_picks, random_legal_picks
from mara_env.shaping import potential, potential_batch
from mara_env.tasksets import TASK_SETS
from mara_env.vector_env import MARAVectorEnv
from mara_env.workload import Workload, save_workload
from vector_compare import assert_same, play_both

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

SMALL = {"arrival_window": 40, "arrival_prob": 0.3}


def make_pair(bank_dir, num_envs, **settings):
    native = gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                          bank=str(bank_dir), **settings)
    reference = gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode="sync", bank=str(bank_dir),
                             **settings)
    return native, reference


@pytest.mark.parametrize("rule", ["fifo", "random_legal", "raw"])
@pytest.mark.parametrize("settings", [{}, {"num_nodes": 3, "max_active": 4, "reward": "sparse"},
                                      {"conflicts": "repair"}])
def test_same_trajectories_as_sync_vector_env(bank_dir, rule, settings):
    rng = np.random.default_rng(7)
    num_envs = 5
    native, reference = make_pair(bank_dir, num_envs, **SMALL, **settings)
    m, k = native.unwrapped.config.num_nodes, native.unwrapped.config.max_active
    choose = {"fifo": fifo_picks,
              "random_legal": lambda obs: random_legal_picks(obs, rng),
              "raw": lambda obs: rng.integers(0, k + 1, size=(num_envs, m))}[rule]  # conflicts included
    ends = play_both(native, reference, choose, 800, {"seed": 11})
    assert ends >= num_envs  # every sub-env ended and autoreset at least once


@pytest.mark.parametrize("observation", ["dict", "flat", "rllib"])
@pytest.mark.parametrize("conflicts", ["idle", "repair"])
@pytest.mark.parametrize("actions", ["picks", "scores"])
def test_every_format_and_action_mode_matches_sync_vector_env(bank_dir, observation, conflicts, actions):
    """Full episodes with autoreset, two seeds: observations, rewards, flags and infos are identical."""
    num_envs = 4
    settings = {"observation": observation, "conflicts": conflicts, "actions": actions, "flat_history": 5}
    native, reference = make_pair(bank_dir, num_envs, **SMALL, **settings)
    assert isinstance(native.unwrapped, MARAVectorEnv)
    assert native.single_observation_space == reference.single_observation_space
    assert native.single_action_space == reference.single_action_space
    m, k = native.unwrapped.config.num_nodes, native.unwrapped.config.max_active
    for seed in (3, 21):
        rng = np.random.default_rng(seed)
        if actions == "picks":
            def choose(obs):
                return rng.integers(0, k + 1, size=(num_envs, m))  # conflicts included
        else:
            def choose(obs):
                return rng.uniform(-1.0, 1.0, size=(num_envs, k)).astype(np.float32)
        ends = play_both(native, reference, choose, 700, {"seed": seed})
        assert ends >= num_envs
        np.testing.assert_array_equal(native.unwrapped.action_masks(), np.stack(reference.call("action_masks")))


def test_workload_replay_and_per_env_episodes(bank_dir, tmp_path):
    rng = np.random.default_rng(3)
    bank = load_bank(bank_dir)
    episodes = tuple(TASK_SETS["id"].sample(bank, rng, 0.3, 40, ("test",), index=i) for i in range(6))
    path = tmp_path / "small.json"
    save_workload(path, Workload(episodes))
    native, reference = make_pair(bank_dir, 3, workload=str(path), arrival_window=40)
    assert play_both(native, reference, fifo_picks, 700, {}) >= 3  # each sub-env replays 0, 1, 2, …
    native, _ = make_pair(bank_dir, 3, workload=str(path), arrival_window=40)
    obs, _ = native.reset(options={"episode": [4, 0, 5]})
    for row, index in enumerate([4, 0, 5]):
        single = gym.make("MARA-v0", bank=str(bank_dir), workload=str(path), arrival_window=40)
        single_obs, _ = single.reset(options={"episode": index})
        assert_same({key: value[row] for key, value in obs.items()}, single_obs, f"episode {index}")


def test_seed_s_gives_sub_env_i_the_single_env_seeded_s_plus_i(bank_dir):
    native = gym.make_vec("MARA-v0", num_envs=3, bank=str(bank_dir), **SMALL)  # the default mode is native
    assert isinstance(native.unwrapped, MARAVectorEnv)
    assert native.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, _ = native.reset(seed=100)
    for i in range(3):
        single_obs, _ = gym.make("MARA-v0", bank=str(bank_dir), **SMALL).reset(seed=100 + i)
        assert_same({key: value[i] for key, value in obs.items()}, single_obs, f"sub-env {i}")
    assert native.observation_space.contains(obs)


def test_disabled_autoreset_resets_only_the_masked_sub_envs(bank_dir):
    envs = MARAVectorEnv(2, autoreset_mode=AutoresetMode.DISABLED, bank=str(bank_dir), **SMALL)
    obs, _ = envs.reset(seed=0)
    terminated = np.zeros(2, dtype=bool)
    while not terminated.any():
        obs, _, terminated, _, info = envs.step(fifo_picks(obs))
    assert info["_episode_metrics"].tolist() == terminated.tolist()
    with pytest.raises(RuntimeError, match="reset_mask"):
        envs.step(fifo_picks(obs))
    live = int(np.flatnonzero(~terminated)[0]) if not terminated.all() else None
    before = None if live is None else obs["tasks"][live].copy()
    obs, info = envs.reset(options={"reset_mask": terminated})
    assert info["_successes"].tolist() == terminated.tolist()
    assert np.all(obs["global"][terminated, 3] == 0.0)  # t = 0 again
    if live is not None:
        np.testing.assert_array_equal(obs["tasks"][live], before)
    envs.step(fifo_picks(obs))


def test_copy_false_returns_the_same_values_without_copying_history(bank_dir):
    copying = MARAVectorEnv(3, bank=str(bank_dir), **SMALL)
    sharing = MARAVectorEnv(3, bank=str(bank_dir), copy=False, **SMALL)
    obs, _ = copying.reset(seed=5)
    shared, _ = sharing.reset(seed=5)
    for _ in range(30):
        assert_same(obs, {key: np.array(value) for key, value in shared.items()}, "copy=False")
        buffer = shared["history"]
        obs = copying.step(fifo_picks(obs))[0]
        shared = sharing.step(fifo_picks(shared))[0]
        assert shared["history"] is buffer


def test_copied_histories_are_recycled_only_once_nothing_holds_them(bank_dir):
    """With copy=True a history nobody references any more comes back, brought up to date; one that is still
    held (the array itself, or a view of it) never changes."""
    copying = MARAVectorEnv(4, bank=str(bank_dir), **SMALL)
    sharing = MARAVectorEnv(4, bank=str(bank_dir), copy=False, **SMALL)
    rng = np.random.default_rng(3)
    obs, _ = copying.reset(seed=11)
    shared, _ = sharing.reset(seed=11)
    handed, kept, recycled, ends = [], [], 0, 0
    for t in range(520):
        np.testing.assert_array_equal(obs["history"], shared["history"], err_msg=f"step {t}")
        if t % 7 == 0:  # held: the array or a view of one sub-env, with what it held when handed out
            held = obs["history"] if t % 14 == 0 else obs["history"][t % 4]
            kept.append((held, held.copy()))
        handed.append(weakref.ref(obs["history"]))
        if t == 450:  # a reset in mid-episode clears rows that still hold losses
            (obs, _), (shared, _) = copying.reset(seed=12), sharing.reset(seed=12)
        else:
            actions = random_legal_picks(obs, rng)
            obs, _, terminated, _, _ = copying.step(actions)
            shared, *_ = sharing.step(actions)
            ends += int(terminated.sum())
        recycled += obs["history"] is handed[-2]() if len(handed) >= 2 else 0
    for held, snapshot in kept:
        np.testing.assert_array_equal(held, snapshot)
    assert ends >= 4, ends  # episodes end and restart along the way
    assert recycled >= 350, recycled  # every step but those after a held copy reuses the copy of two steps ago


def test_where_reference_counts_say_nothing_every_history_is_a_full_copy(bank_dir, monkeypatch):
    monkeypatch.setattr(history_copies, "COUNTS_REFERENCES", False)
    copying = MARAVectorEnv(2, bank=str(bank_dir), **SMALL)
    sharing = MARAVectorEnv(2, bank=str(bank_dir), copy=False, **SMALL)
    (obs, _), (shared, _) = copying.reset(seed=4), sharing.reset(seed=4)
    handed = []
    for t in range(60):
        np.testing.assert_array_equal(obs["history"], shared["history"], err_msg=f"step {t}")
        handed.append(weakref.ref(obs["history"]))
        obs = copying.step(fifo_picks(obs))[0]
        shared = sharing.step(fifo_picks(shared))[0]
        assert all(ref() is not obs["history"] for ref in handed)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"observation": "image"}, "observation"),
    ({"render_mode": "ansi"}, "render_mode"),
    ({"autoreset_mode": AutoresetMode.SAME_STEP}, "autoreset_mode"),
    ({"num_nodes": 0}, "num_nodes"),
])
def test_unsupported_settings_are_refused_by_name(bank_dir, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MARAVectorEnv(2, bank=str(bank_dir), **kwargs)


def test_bad_actions_and_calls_give_clear_errors(bank_dir):
    envs = MARAVectorEnv(2, bank=str(bank_dir), **SMALL)
    with pytest.raises(RuntimeError, match="reset"):
        envs.step(np.zeros((2, 7), dtype=np.int64))
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        envs.step(np.zeros(7, dtype=np.int64))
    with pytest.raises(ValueError, match="integers"):
        envs.step(np.full((2, 7), 0.5))
    with pytest.raises(ValueError, match=r"actions values must lie in \[0, 10\]"):
        envs.step(np.full((2, 7), 11))
    with pytest.raises(ValueError, match="actions must hold integers"):
        envs.step(np.full((2, 7), np.nan))
    with pytest.raises(ValueError, match="actions must hold integers"):
        envs.step(np.full((2, 7), "1"))
    scores = MARAVectorEnv(2, bank=str(bank_dir), actions="scores", **SMALL)
    scores.reset(seed=0)
    for bad in (np.zeros((2, 7)), np.full((2, 10), np.nan), np.full((2, 10), np.inf), np.full((2, 10), "a")):
        with pytest.raises(ValueError, match="actions must be 2x10 finite slot scores"):
            scores.step(bad)
    with pytest.raises(ValueError, match="seed"):
        envs.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="episode"):
        envs.reset(options={"episode": [0]})


@pytest.mark.parametrize("width", [1, 7, 8, 10, 17, 40, 130])
def test_batched_potential_sums_exactly_like_the_single_one(width):
    rng = np.random.default_rng(width)
    progress = rng.random((400, width)) * rng.choice([1e-6, 1e-2, 1.0], size=(400, width))
    active = rng.random((400, width)) < rng.random((400, 1))
    expected = [potential(row[mask]) for row, mask in zip(progress, active)]
    np.testing.assert_array_equal(potential_batch(progress, active), expected)


def test_gymnasium_vector_wrappers_apply_and_the_shaped_return_is_the_success_count(bank_dir):
    envs = RecordEpisodeStatistics(gym.make_vec("MARA-v0", num_envs=3, bank=str(bank_dir), **SMALL))
    obs, _ = envs.reset(seed=2)
    ended = 0
    for _ in range(500):
        obs, _, _, _, info = envs.step(fifo_picks(obs))
        if "episode" in info:
            done = info["_episode"]
            ended += int(done.sum())
            np.testing.assert_allclose(info["episode"]["r"][done], info["episode_metrics"]["successes"][done],
                                       atol=1e-9)  # paper Eq. 15: Φ is 0 at both ends
    assert ended >= 3
