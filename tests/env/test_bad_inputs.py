"""Every env-side bad input gives one clear error: the exception type, and a message naming the culprit.

Each row: (what is wrong, a call that must fail, the exception type, a pattern the message must match).
"""

import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded

import mara_env
from mara_env import MARAConfig
from mara_env.gym_env import MARAEnv
from mara_env.pettingzoo_env import raw_env
from mara_env.tasksets import MixtureTaskSet, StressTaskSet, register_task_set
from mara_env.workload import Episode


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
    # MARAConfig: every field, wrong kind, range and upper bound
    ("config num_nodes huge", lambda b: MARAConfig(num_nodes=10**6, max_nodes=10**6), ValueError,
     "max_nodes must be ≤ 1024"),
    ("config max_nodes zero", lambda b: MARAConfig(max_nodes=0), ValueError, "max_nodes must be ≥ 1, got 0"),
    ("config max_active huge", lambda b: MARAConfig(max_active=10**7), ValueError, "max_active must be ≤ 1024"),
    ("config max_active string", lambda b: MARAConfig(max_active="10"), TypeError, "max_active must be an integer"),
    ("config arrival_window huge", lambda b: MARAConfig(arrival_window=10**10), ValueError,
     "arrival_window must be ≤ 1000000"),
    ("config warmup_observations zero", lambda b: MARAConfig(warmup_observations=0), ValueError,
     "warmup_observations must be ≥ 1"),
    ("config warmup_observations float", lambda b: MARAConfig(warmup_observations=4.0), TypeError,
     "warmup_observations must be an integer"),
    ("config flat_history huge", lambda b: MARAConfig(flat_history=10**6), ValueError, "flat_history must be ≤ 4096"),
    ("config flat_history None", lambda b: MARAConfig(flat_history=None), TypeError, "flat_history"),
    ("config arrival_prob nan", lambda b: MARAConfig(arrival_prob=float("nan")), ValueError,
     "arrival_prob must be a finite number, got nan"),
    ("config arrival_prob negative", lambda b: MARAConfig(arrival_prob=-0.1), ValueError, "arrival_prob must be ≥ 0"),
    ("config shaping_beta string", lambda b: MARAConfig(shaping_beta="0.1"), TypeError, "shaping_beta"),
    ("config reward None", lambda b: MARAConfig(reward=None), ValueError, "reward must be one of shaped, sparse"),
    ("config task_set not a string", lambda b: MARAConfig(task_set=3), ValueError, "task_set.*got 3"),
    ("config curve_splits empty", lambda b: MARAConfig(curve_splits=()), ValueError, "curve_splits must name"),
    ("config curve_splits not a sequence", lambda b: MARAConfig(curve_splits=3), TypeError, "curve_splits"),
    ("config bank missing", lambda b: MARAConfig(bank=str(b / "nowhere")), ValueError, "bank: no such directory"),
    ("config bank is a file", lambda b: MARAConfig(bank=str(b / "manifest.json")), ValueError,
     "bank: .*manifest.json is not a directory"),
    ("config bank empty string", lambda b: MARAConfig(bank=""), ValueError, "bank must be a path"),
    ("config workload missing", lambda b: MARAConfig(workload=str(b / "no.json")), ValueError,
     "workload: no such file .*no.json"),
    ("config workload is a directory", lambda b: MARAConfig(workload=str(b)), ValueError,
     "workload: .* is not a file"),
    ("config replace unknown", lambda b: MARAConfig().replace(nodes=3), ValueError,
     r"unknown MARA config field\(s\) \['nodes'\]; known: num_nodes"),
    # gym.make / MARAEnv arguments
    ("gym config not a MARAConfig", lambda b: MARAEnv(config={"num_nodes": 3}, bank=str(b)), TypeError,
     "config must be a MARAConfig"),
    ("gym workload garbage", lambda b: gym.make("MARA-v0", bank=str(b), workload=str(_garbage(b))), ValueError,
     r"garbage\.json: unreadable workload file"),
    ("gym workload fractional arrival", lambda b: gym.make("MARA-v0", bank=str(b), workload=str(_edited(b, "arrival",
                                                                                                     1.5))),
     ValueError, "arrival must hold whole numbers"),
    ("gym workload curve id not a string", lambda b: gym.make("MARA-v0", bank=str(b), workload=str(_edited(b, "curve",
                                                                                                        7))),
     ValueError, "curve ids must be strings, got 7"),
    ("gym workload unknown curve", lambda b: gym.make("MARA-v0", bank=str(b), workload=str(_edited(b, "curve",
                                                                                                 "toy_fast/x/000"))),
     ValueError, "uses curve 'toy_fast/x/000'"),
    ("gym bank without a manifest", lambda b: gym.make("MARA-v0", bank=str(_empty_dir(b))), ValueError,
     "manifest.json: curve bank manifest not found"),
    # PettingZoo constructors
    ("aec max_cycles float", lambda b: mara_env.env(max_cycles=1.5, bank=str(b)), TypeError, "max_cycles"),
    ("parallel max_cycles bool", lambda b: mara_env.parallel_env(max_cycles=True, bank=str(b)), TypeError,
     "max_cycles"),
    ("parallel unknown field", lambda b: mara_env.parallel_env(nodes=3, bank=str(b)), ValueError, "'nodes'"),
    ("aec config not a MARAConfig", lambda b: mara_env.env(config="fast", bank=str(b)), TypeError,
     "config must be a MARAConfig"),
    ("aec num_nodes zero", lambda b: mara_env.env(num_nodes=0, bank=str(b)), ValueError, "num_nodes"),
    # reset options and seeds
    ("gym reset options a string", lambda b: gym.make("MARA-v0", bank=str(b)).reset(seed=0, options="episode"),
     TypeError, "reset options must be None or a dict"),
    ("gym reset options a list", lambda b: MARAEnv(bank=str(b)).reset(options=["episode"]), TypeError,
     "reset options"),
    ("gym reset episode index without workload", lambda b: MARAEnv(bank=str(b)).reset(options={"episode": 0}),
     ValueError, r"options\['episode'\] = 0 is an index into a workload file"),
    ("gym reset episode float", lambda b: _gym_workload(b).reset(options={"episode": 1.0}), TypeError,
     r"options\['episode'\] must be an episode index"),
    ("gym reset episode bool", lambda b: _gym_workload(b).reset(options={"episode": True}), TypeError,
     r"options\['episode'\].*True"),
    ("gym reset episode negative", lambda b: _gym_workload(b).reset(options={"episode": -1}), ValueError,
     r"options\['episode'\] must be an index in \[0, 2\), got -1"),
    ("gym reset Episode with a curve outside the bank",
     lambda b: MARAEnv(bank=str(b)).reset(options={"episode": Episode.from_lists([0], ["nope/test/000"], [0.5],
                                                                                   [10])}),
     ValueError, "uses curve 'nope/test/000'"),
    ("gym reset Episode longer than its curve",
     lambda b: MARAEnv(bank=str(b)).reset(options={"episode": Episode.from_lists([0], ["toy_fast/test/000"], [0.5],
                                                                                   [10**6])}),
     ValueError, "fewer than budget 1000000"),
    ("gym reset seed string", lambda b: MARAEnv(bank=str(b)).reset(seed="0"), gym.error.Error, "Seed"),
    ("gym reset seed negative", lambda b: MARAEnv(bank=str(b)).reset(seed=-1), gym.error.Error, "Seed"),
    ("aec reset options a string", lambda b: mara_env.env(bank=str(b)).reset(seed=0, options="episode"), TypeError,
     "reset options"),
    ("aec reset seed string", lambda b: mara_env.env(bank=str(b)).reset(seed="0"), gym.error.Error, "Seed"),
    ("parallel reset options a tuple", lambda b: mara_env.parallel_env(bank=str(b)).reset(options=("episode", 0)),
     TypeError, "reset options"),
    ("parallel reset episode index without workload",
     lambda b: mara_env.parallel_env(bank=str(b)).reset(options={"episode": 3}), ValueError,
     r"options\['episode'\] = 3"),
    ("Episode with fractional arrivals",
     lambda b: Episode(np.array([0.5]), ("toy_fast/test/000",), np.array([0.5]), np.array([10])), ValueError,
     "arrival must be an integer array, got dtype float64"),
    ("Episode with mismatched lengths",
     lambda b: Episode.from_lists([0, 1], ["toy_fast/test/000"], [0.5], [10]), ValueError,
     r"arrival has shape \(2,\), expected \(1,\)"),
    ("Episode with a NaN target", lambda b: Episode.from_lists([0], ["toy_fast/test/000"], [float("nan")], [10]),
     ValueError, "target loss must be finite"),
    # gym actions, picks
    ("gym action NaN", lambda b: _gym_after_reset(b).step(np.array([np.nan, 0, 0, 0, 0, 0, 0])), ValueError,
     "integers, got .*nan.* for node 0"),
    ("gym action bools", lambda b: _gym_after_reset(b).step(np.ones(7, dtype=bool)), ValueError, "integers"),
    ("gym action strings", lambda b: _gym_after_reset(b).step(["1"] * 7), ValueError, "integers, got '1'"),
    ("gym action negative", lambda b: _gym_after_reset(b).step(np.array([0, 0, -1, 0, 0, 0, 0])), ValueError,
     r"\[0, 10\].*got -1 for node 2"),
    ("gym action 2-D", lambda b: _gym_after_reset(b).step(np.zeros((7, 1), dtype=int)), ValueError,
     r"shape \(7,\).*got shape \(7, 1\)"),
    ("gym action scalar", lambda b: _gym_after_reset(b).step(3), ValueError, r"shape \(7,\).*got shape \(\)"),
    ("gym action None", lambda b: _gym_after_reset(b).step(None), ValueError, "shape.*None"),
    ("gym action float 2.5 on node 4", lambda b: _gym_after_reset(b).step([0, 0, 0, 0, 2.5, 0, 0]), ValueError,
     "2.5 for node 4"),
    # gym actions, scores
    ("scores above 1", lambda b: _gym_after_reset(b, actions="scores").step(np.array([0.5] * 9 + [1.5])), ValueError,
     r"scores must lie in \[-1, 1\].*1.5 for slot 9"),
    ("scores below -1", lambda b: _gym_after_reset(b, actions="scores").step(np.array([-2.0] + [0.0] * 9)),
     ValueError, "-2.0 for slot 0"),
    ("scores inf", lambda b: _gym_after_reset(b, actions="scores").step(np.array([np.inf] + [0.0] * 9)),
     ValueError, "finite slot scores"),
    ("scores strings", lambda b: _gym_after_reset(b, actions="scores").step(["a"] * 10), ValueError,
     "finite slot scores"),
    ("scores 2-D", lambda b: _gym_after_reset(b, actions="scores").step(np.zeros((1, 10))), ValueError,
     "10 finite slot scores"),
    # PettingZoo actions
    ("aec action NaN", lambda b: _aec_after_reset(b).step(float("nan")), ValueError, "node_0.*nan"),
    ("aec action negative", lambda b: _aec_after_reset(b).step(-1), ValueError, r"node_0.*\[0, 10\].*-1"),
    ("aec action string", lambda b: _aec_after_reset(b).step("3"), ValueError, "node_0.*'3'"),
    ("aec action two values", lambda b: _aec_after_reset(b).step(np.array([1, 2])), ValueError, "node_0"),
    ("aec action bool", lambda b: _aec_after_reset(b).step(True), ValueError, "node_0.*True"),
    ("aec second node above K", lambda b: _aec_turns(b, 1).step(12), ValueError, r"node_1.*\[0, 10\].*12"),
    ("aec done node acts", lambda b: _aec_done(b).step(0), ValueError, "node_0 is done; its only valid action is None"),
    ("parallel actions not a dict", lambda b: _parallel_after_reset(b).step([0] * 7), TypeError,
     "actions must be a dict"),
    ("parallel live agent left out", lambda b: _parallel_after_reset(b).step({f"node_{i}": 0 for i in range(6)}),
     ValueError, r"lacks live agent\(s\) \['node_6'\]"),
    ("parallel action NaN", lambda b: _parallel_after_reset(b).step({**_idle(), "node_2": np.float32("nan")}),
     ValueError, "node_2.*nan"),
    ("parallel action above K", lambda b: _parallel_after_reset(b).step({**_idle(), "node_5": 11}), ValueError,
     r"node_5.*\[0, 10\].*11"),
    ("parallel action array of two", lambda b: _parallel_after_reset(b).step({**_idle(), "node_1": np.array([1, 2])}),
     ValueError, "node_1"),
    ("aec observe an unknown agent", lambda b: _aec_after_reset(b).observe("node_99"), KeyError, "node_99"),
    ("parallel action_space of an unknown agent", lambda b: mara_env.parallel_env(bank=str(b)).action_space("n1"),
     KeyError, "n1"),
    # task sets
    ("task set ood_prob above 1", lambda b: MixtureTaskSet(ood_prob=1.5), ValueError, "ood_prob must be ≤ 1"),
    ("task set ood_prob nan", lambda b: MixtureTaskSet(ood_prob=float("nan")), ValueError, "ood_prob"),
    ("task set targets unknown", lambda b: MixtureTaskSet(targets="oracle"), ValueError, "targets.*'oracle'"),
    ("task set ood_modality not a string", lambda b: MixtureTaskSet(ood_modality=3), TypeError, "ood_modality"),
    ("stress early zero", lambda b: StressTaskSet(early=0), ValueError, "early must be ≥ 1"),
    ("stress short_crossing reversed", lambda b: StressTaskSet(short_crossing=(35, 22)), ValueError,
     "short_crossing"),
    ("register_task_set name not a string", lambda b: register_task_set(3, MixtureTaskSet()), TypeError,
     "task set name"),
    ("register_task_set without sample", lambda b: register_task_set("mine", object()), TypeError,
     "sample"),
    # the vector env
    ("make_vec num_envs beyond the memory bound", lambda b: gym.make_vec("MARA-v0", num_envs=10**9, bank=str(b)),
     ValueError, r"num_envs=1000000000 is too large: the loss history alone would take .* GiB.*at most \d+ sub-envs"),
    ("make_vec num_envs 10**7 over the shipped bank", lambda b: gym.make_vec("MARA-v0", num_envs=10**7),
     ValueError, r"num_envs=10000000 is too large"),
]



def _idle():
    return {f"node_{i}": 0 for i in range(7)}


def _gym_workload(bank):
    return MARAEnv(bank=str(bank), workload=str(_workload(bank)))


def _aec_turns(bank, turns):
    env = _aec_after_reset(bank)
    for _ in range(turns):
        env.step(0)
    return env


def _aec_done(bank):
    """The raw AEC env right after its episode ended (T = 3, no tasks): every node is done."""
    env = raw_env(bank=str(bank), arrival_prob=0.0, arrival_window=3)
    env.reset(seed=0)
    while not env.terminations[env.agent_selection]:
        env.step(0)
    return env


def _garbage(bank):
    path = bank / "garbage.json"
    path.write_text("{not json")
    return path


def _edited(bank, key, value):
    """The test workload with the first task's ``key`` replaced by ``value``."""
    import json

    data = json.loads(_workload(bank).read_text())
    episode = next(ep for ep in data["episodes"] if ep["curve"])
    episode[key][0] = value
    path = bank / f"edited_{key}.json"
    path.write_text(json.dumps(data))
    return path


def _empty_dir(bank):
    path = bank / "not_a_bank"
    path.mkdir(exist_ok=True)
    return path


def _workload(bank):
    from mara_env.fixed_workloads import build_workload
    from mara_env.engine import cached_bank
    from mara_env.workload import save_workload

    path = bank / "bad_inputs_workload.json"
    if not path.exists():
        save_workload(path, build_workload(cached_bank(str(bank)), "id", 0.05, roots=1, episodes=2))
    return path


@pytest.fixture(scope="module")
def own_bank(bank_dir, tmp_path_factory):
    """A copy of the session's bank for the cases that write their bad files beside it (the session's bank is
    read by every module, and a file added to it changes its fingerprint)."""
    return Path(shutil.copytree(bank_dir, tmp_path_factory.mktemp("bad_inputs") / "bank"))


@pytest.mark.parametrize(("call", "error", "pattern"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_bad_input_is_refused_with_a_message_naming_it(own_bank, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(own_bank)


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
    assert len(CASES) >= 120


@pytest.mark.parametrize("make", [lambda b: MARAEnv(bank=str(b)), lambda b: mara_env.env(bank=str(b)),
                                  lambda b: mara_env.parallel_env(bank=str(b))], ids=["gym", "aec", "parallel"])
def test_an_unknown_reset_option_is_named_in_a_warning_not_refused(bank_dir, make):
    """PettingZoo's API tests reset with ``options={"options": 1}``, so an unknown key is taken, with a warning."""
    env = make(bank_dir)
    with pytest.warns(UserWarning, match=r"reset options: ignoring unknown key\(s\) 'episodes'; MARA reads only"):
        env.reset(seed=0, options={"episodes": 3})


FIXED_WORKLOADS = [
    (["--bank", "<missing>"], "--bank: no such directory"),
    (["--bank", "<file>"], "--bank: .* is not a directory"),
    (["--bank", "<empty>"], "manifest.json: curve bank manifest not found"),
    (["--out", "/proc/x"], "--out: /proc is not writable"),
    (["--out", "<file>"], "--out: .* is a file; name a directory"),
    (["--out", ""], "--out must be a path"),
    (["--min-test-curves", "0"], "--min-test-curves must be ≥ 1, got 0"),
    (["--min-test-curves", "many"], "--min-test-curves must be an integer, got 'many'"),
    (["--min-test-curves", "100000"], "--min-test-curves must be ≤ 10000"),
    (["--min-test-curves", "13"], "fewer than the 13 of a complete bank"),
]


@pytest.mark.parametrize(("argv", "pattern"), FIXED_WORKLOADS, ids=[" ".join(a) for a, _ in FIXED_WORKLOADS])
def test_fixed_workloads_cli_refuses_bad_flags_before_writing(bank_dir, tmp_path, capsys, argv, pattern):
    import re

    from mara_env.fixed_workloads import main

    (tmp_path / "a_file").write_text("x")
    (tmp_path / "empty").mkdir()
    names = {"<missing>": str(tmp_path / "no" / "such"), "<file>": str(tmp_path / "a_file"),
             "<empty>": str(tmp_path / "empty")}
    out = tmp_path / "out"
    full = ["--bank", str(bank_dir), "--out", str(out)] + [names.get(item, item) for item in argv]
    assert main(full) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and re.search(pattern, err[0]), err
    assert not out.exists()


FORECAST_WITHOUT_AGENTS = """
import gymnasium as gym, mara_env, sys
for make in (gym.make, lambda name: gym.make_vec(name, num_envs=2)):
    try:
        make("MARA-Forecast-v0")
    except gym.error.Error as error:
        print(error)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "mara_agents")))
"""


def test_the_forecast_env_without_mara_agents_says_which_import_registers_it():
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", FORECAST_WITHOUT_AGENTS], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=120, check=True)
    *errors, loaded = done.stdout.strip().splitlines()
    assert errors == ["MARA-Forecast-v0 is registered by the mara_agents package (it needs torch): "
                      "`import mara_agents` before gym.make"] * 2
    assert loaded == "[]"
