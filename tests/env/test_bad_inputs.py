"""Every env-side bad input gives one clear error: the exception type, and a message naming the culprit.

Each row: (what is wrong, a call that must fail, the exception type, a pattern the message must match).
"""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded

import mara_env
from mara_env import MARAConfig
from mara_env.gym_env import MARAEnv
from mara_env.pettingzoo_env import raw_env


def _gym_after_reset(bank, **kw):
    env = gym.make("MARA-v0", bank=str(bank), disable_env_checker=True, **kw)
    env.reset(seed=0)
    return env


def _aec_after_reset(bank, **kw):
    env = mara_env.env(bank=str(bank), **kw)
    env.reset(seed=0)
    return env


def _parallel_after_reset(bank, **kw):
    env = mara_env.parallel_env(bank=str(bank), **kw)
    env.reset(seed=0)
    return env


CASES = [
    # configuration fields, refused at construction
    ("shaping_beta inf", lambda b: MARAConfig(shaping_beta=float("inf")), ValueError, "shaping_beta"),
    ("shaping_beta nan", lambda b: MARAConfig(shaping_beta=float("nan")), ValueError, "shaping_beta"),
    ("shaping_beta negative", lambda b: MARAConfig(shaping_beta=-0.1), ValueError, "shaping_beta"),
    ("arrival_prob string", lambda b: gym.make("MARA-v0", bank=str(b), arrival_prob="0.5"), TypeError,
     "arrival_prob"),
    ("arrival_prob above 1", lambda b: MARAConfig(arrival_prob=1.5), ValueError, "arrival_prob"),
    ("arrival_prob bool", lambda b: MARAConfig(arrival_prob=True), TypeError, "arrival_prob"),
    ("num_nodes zero", lambda b: MARAConfig(num_nodes=0), ValueError, "num_nodes"),
    ("num_nodes float", lambda b: MARAConfig(num_nodes=7.0), TypeError, "num_nodes"),
    ("num_nodes above max_nodes", lambda b: MARAConfig(num_nodes=20), ValueError, "max_nodes"),
    ("max_active negative", lambda b: MARAConfig(max_active=-3), ValueError, "max_active"),
    ("arrival_window string", lambda b: MARAConfig(arrival_window="500"), TypeError, "arrival_window"),
    ("reward unknown", lambda b: MARAConfig(reward="dense"), ValueError, "reward"),
    ("conflicts unknown", lambda b: MARAConfig(conflicts="fix"), ValueError, "conflicts"),
    ("actions unknown", lambda b: MARAConfig(actions="rank"), ValueError, "actions"),
    ("scores for the pettingzoo env", lambda b: mara_env.parallel_env(actions="scores", bank=str(b)), ValueError,
     "actions"),
    ("observation unknown", lambda b: MARAConfig(observation="image"), ValueError, "observation"),
    ("flat_history zero", lambda b: MARAConfig(flat_history=0), ValueError, "flat_history"),
    ("task_set unknown", lambda b: MARAConfig(task_set="nope"), ValueError, "task_set"),
    ("curve_splits unknown", lambda b: MARAConfig(curve_splits=("train", "bogus")), ValueError, "curve_splits"),
    ("bank not a path", lambda b: MARAConfig(bank=3), TypeError, "bank"),
    ("unknown field", lambda b: gym.make("MARA-v0", bank=str(b), colour=1), ValueError, "colour"),
    ("render_mode unknown", lambda b: MARAEnv(render_mode="rgb", bank=str(b)), ValueError, "render_mode"),
    ("pettingzoo render_mode unknown", lambda b: mara_env.parallel_env(render_mode="video", bank=str(b)),
     ValueError, "render_mode"),
    ("agent_reward unknown", lambda b: mara_env.parallel_env(agent_reward="all", bank=str(b)), ValueError,
     "agent_reward"),
    ("max_cycles zero", lambda b: mara_env.env(max_cycles=0, bank=str(b)), ValueError, "max_cycles"),
    # actions
    ("gym action 1.7", lambda b: _gym_after_reset(b).step(np.array([1.7, 0, 0, 0, 0, 0, 0])), ValueError,
     "integers"),
    ("gym action too short", lambda b: _gym_after_reset(b).step(np.zeros(6, dtype=int)), ValueError, "shape"),
    ("gym action above K", lambda b: _gym_after_reset(b).step(np.array([11, 0, 0, 0, 0, 0, 0])), ValueError,
     r"\[0, 10\]"),
    ("scores with a NaN",
     lambda b: _gym_after_reset(b, actions="scores").step(np.array([np.nan] + [0.0] * 9)), ValueError, "scores"),
    ("scores of the wrong length",
     lambda b: _gym_after_reset(b, actions="scores").step(np.zeros(7)), ValueError, "10 finite slot scores"),
    ("parallel action 1.7", lambda b: _parallel_after_reset(b).step({"node_0": 1.7}), ValueError,
     "node_0.*1.7"),
    ("parallel action negative", lambda b: _parallel_after_reset(b).step({"node_3": -1}), ValueError,
     "node_3.*-1"),
    ("parallel action string", lambda b: _parallel_after_reset(b).step({"node_1": "2"}), ValueError, "node_1"),
    ("parallel action for unknown agent", lambda b: _parallel_after_reset(b).step({"node_9": 0}), ValueError,
     "node_9"),
    ("aec action 1.7", lambda b: _aec_after_reset(b).step(1.7), ValueError, "node_0.*1.7"),
    ("aec action None for a live agent", lambda b: _aec_after_reset(b).step(None), ValueError, "node_0.*None"),
    ("aec action above K", lambda b: _aec_after_reset(b).step(11), ValueError, r"node_0.*\[0, 10\]"),
    ("workload episode out of range",
     lambda b: gym.make("MARA-v0", bank=str(b), workload=str(_workload(b))).reset(options={"episode": 99}),
     ValueError, "episode"),
    # call order
    ("gym step before reset", lambda b: MARAEnv(bank=str(b)).step(np.zeros(7, dtype=int)), RuntimeError,
     "reset"),
    ("gym.make step before reset", lambda b: gym.make("MARA-v0", bank=str(b)).step(np.zeros(7, dtype=int)),
     ResetNeeded, "reset"),
    ("action_masks before reset", lambda b: MARAEnv(bank=str(b)).action_masks(), RuntimeError, "reset"),
    ("aec step before reset", lambda b: mara_env.env(bank=str(b)).step(0), AssertionError, "reset"),
    ("raw aec step before reset", lambda b: raw_env(bank=str(b)).step(0), RuntimeError, "reset"),
    ("parallel step before reset", lambda b: mara_env.parallel_env(bank=str(b)).step({}), RuntimeError, "reset"),
]


def _workload(bank):
    from mara_env.fixed_workloads import build_workload
    from mara_env.engine import cached_bank
    from mara_env.workload import save_workload

    path = bank / "bad_inputs_workload.json"
    if not path.exists():
        save_workload(path, build_workload(cached_bank(str(bank)), "id", 0.05, roots=1, episodes=2))
    return path


@pytest.mark.parametrize(("call", "error", "pattern"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_bad_input_is_refused_with_a_message_naming_it(bank_dir, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(bank_dir)


def _short(bank, **kw):
    """An episode with no tasks: it ends at the arrival window, T = 3."""
    return dict(bank=str(bank), arrival_prob=0.0, arrival_window=3, **kw)


def _state(sim):
    """What a step would change: the clock and the counters behind the episode metrics."""
    return sim.t, dict(sim.totals)


def test_gym_step_after_termination_raises_and_keeps_the_metrics(bank_dir):
    env = gym.make("MARA-v0", disable_env_checker=True, **_short(bank_dir))
    env.reset(seed=0)
    terminated = False
    while not terminated:
        _, _, terminated, _, _ = env.step(np.zeros(7, dtype=int))
    before = _state(env.unwrapped.engine.sim)
    with pytest.raises(RuntimeError, match="ended.*reset"):
        env.step(np.zeros(7, dtype=int))
    assert _state(env.unwrapped.engine.sim) == before


def test_parallel_step_after_the_end_raises_and_keeps_the_metrics(bank_dir):
    env = mara_env.parallel_env(**_short(bank_dir))
    env.reset(seed=0)
    while env.agents:
        env.step({agent: 0 for agent in env.agents})
    before = _state(env.engine.sim)
    with pytest.raises(RuntimeError, match="ended.*reset"):
        env.step({})
    assert _state(env.engine.sim) == before


def test_aec_step_after_the_end_changes_nothing(bank_dir):
    env = mara_env.env(**_short(bank_dir))
    env.reset(seed=0)
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else 0)
    before = _state(env.unwrapped.engine.sim)
    env.step(0)  # PettingZoo's order-enforcing wrapper warns and ignores it
    assert _state(env.unwrapped.engine.sim) == before
    with pytest.raises(RuntimeError, match="ended.*reset"):
        env.unwrapped.step(0)


def test_the_table_is_large_enough():
    assert len(CASES) >= 20
