"""The hand-written allocators with node speeds and switching costs (``docs/agents.md``, "Node speeds and
switching costs"), and the Oracle and Clairvoyant bounds under the same options."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import SHORT_WINDOW, hand_observation

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.allocators.lara import LARAPolicy, largest_feasible_subset
from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy
from mara_agents.rules.slots import serve_in_order
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.rules.slack import slack_order
from mara_agents.evaluation.clairvoyant import clairvoyant_successes, max_completions
from mara_agents.predictors import WLSPredictor
from mara_agents.play.lockstep import evaluate_workload
from mara_env.engine import cached_bank, cached_workload
from mara_env.features import NODE_FEATURE_INDEX, SLOT_NODE_FEATURE_INDEX, TASK_FEATURE_INDEX
from mara_env.simulator import oracle_successes
from mara_env.workload import Episode


def with_nodes(observation, speeds, last_node, setup_left):
    """Add the node entries the env adds with a node option: per slot its last node (i + 1, 0: none) and setup
    left, per node its speed and the slot it last served."""
    nodes = np.zeros((len(speeds), 3), dtype=np.float32)
    nodes[:, NODE_FEATURE_INDEX["speed"]] = speeds
    slot_nodes = np.zeros((len(last_node), 2), dtype=np.float32)
    slot_nodes[:, SLOT_NODE_FEATURE_INDEX["last_node"]] = last_node
    slot_nodes[:, SLOT_NODE_FEATURE_INDEX["setup_left"]] = setup_left
    for slot, node in enumerate(last_node):
        if node:
            nodes[node - 1, NODE_FEATURE_INDEX["last_pick"]] = slot + 1
    return {**observation, "nodes": nodes, "slot_nodes": slot_nodes}


def test_the_fastest_node_gets_the_tightest_task_that_fits_only_there():
    # Nodes of speed (1, 1, 4), c = 0, four ready tasks (steps left l, predicted batches r):
    #   slot 0: l 10, r 8   fits at speed 1 (8 steps), fresh slack 10 − 8/4  = 8
    #   slot 1: l 10, r 30  fits only at speed 4 (⌈30/4⌉ = 8 steps), fresh slack 10 − 30/4 = 2.5
    #   slot 2: l 50, r 20  fresh slack 50 − 20/4 = 45
    #   slot 3: l 20, r 15  fresh slack 20 − 15/4 = 16.25
    # Served: slots 1, 0, 3 (least fresh slack); slot 1 finishes soonest on node 2 (8 steps), slot 0 takes the
    # first speed-1 node (node 0), slot 3 the other.
    observation = hand_observation(history_len=[10] * 4, remaining_steps=[10, 10, 50, 20], nodes=3)
    predicted = np.array([8.0, 30.0, 20.0, 15.0])
    policy = SlackPolicy(WLSPredictor())
    nodes = with_nodes(observation, speeds=[1, 1, 4], last_node=[0] * 4, setup_left=[0] * 4)
    assert policy.decide(nodes, predicted).tolist() == [1, 4, 2]
    # On identical nodes the rule finds slot 1 short (30 > 10) and serves slots 0, 3, 2 instead.
    assert policy.decide(observation, predicted).tolist() == [1, 4, 3]


def test_lara_puts_its_feasible_subset_on_the_fast_node_before_the_warm_up_task():
    # Nodes of speed (4, 1), c = 0. Slot 0 is in warm-up (2 observations, l 50) and takes the reserved node;
    # slot 1 (l 10, r 30) fits only at speed 4 (⌈30/4⌉ = 8 steps). Its demand min(30, 1 · 10) = 10 passes the
    # relaxed test on the node left after the reservation (4 batches per step: 10 ≤ 4 · 10). Placed first, it
    # takes node 0 (8 steps against 30); on identical nodes node 0 would serve the warm-up task.
    observation = hand_observation(history_len=[2, 10], remaining_steps=[50, 10], nodes=2)
    predicted = np.array([100.0, 30.0])
    policy = LARAPolicy(WLSPredictor())
    nodes = with_nodes(observation, speeds=[4, 1], last_node=[0, 0], setup_left=[0, 0])
    assert policy.decide(nodes, predicted).tolist() == [2, 1]
    assert policy.decide(observation, predicted).tolist() == [1, 2]


def _running_and_fresh(remaining_running: float, switch_cost: int):
    # Nodes of speed (1, 4, 1). Slot 0 runs on node 0 (l 30); slot 1 (l 50, r 1) waits with setup c.
    observation = hand_observation(history_len=[10, 10], remaining_steps=[30, 50], nodes=3)
    nodes = with_nodes(observation, speeds=[1, 4, 1], last_node=[1, 0], setup_left=[0, switch_cost])
    return nodes, np.array([remaining_running, 1.0])


def test_a_running_task_stays_when_moving_does_not_pay():
    # c = 2, r = 2: on its own node 2 steps, on the speed-4 node 2 + ⌈2/4⌉ = 3 steps: the gain is −1, it stays.
    # Slot 1 then finishes in 2 + 1 steps on node 1 or 2, and takes the faster one.
    observation, predicted = _running_and_fresh(2.0, switch_cost=2)
    assert SlackPolicy(WLSPredictor()).decide(observation, predicted).tolist() == [1, 2, 0]


def test_a_running_task_moves_when_the_gain_beats_the_switching_cost():
    # c = 2, r = 12: 12 steps on its own node against 2 + ⌈12/4⌉ = 5 on node 1, a gain of 7 > 0: it moves, and
    # its old node is free for slot 1 (3 steps on node 0 or node 2: the tie goes to the lower index).
    observation, predicted = _running_and_fresh(12.0, switch_cost=2)
    assert SlackPolicy(WLSPredictor()).decide(observation, predicted).tolist() == [2, 1, 0]


def test_rules_without_estimates_keep_a_running_task_on_its_node_only_when_moving_costs_setup():
    # FIFO ranks slot 0 first (it arrived 70 steps ago, slot 1 50). With c = 2 slot 0 keeps node 0 and slot 1
    # gets the fastest free node; with c = 0 the first-ranked task takes the fastest node.
    for policy in (FIFOPolicy(), EDFPolicy()):
        sticky, _ = _running_and_fresh(0.0, switch_cost=2)
        assert policy.act(sticky).tolist() == [1, 2, 0]
        free, _ = _running_and_fresh(0.0, switch_cost=0)
        assert policy.act(free).tolist() == [2, 1, 0]


def test_a_task_whose_setup_cost_is_unknown_never_moves():
    # Every task is running, so the observation does not show c: a fresh policy keeps slot 0 on node 0 even
    # though the speed-4 node is free; once it has seen c = 0 the move pays (12 steps against 3).
    observation = hand_observation(history_len=[10], remaining_steps=[30], nodes=3)
    running = with_nodes(observation, speeds=[1, 4, 1], last_node=[1], setup_left=[0])
    policy = SlackPolicy(WLSPredictor())
    assert policy.decide(running, np.array([12.0])).tolist() == [1, 0, 0]
    policy.decide(_running_and_fresh(12.0, switch_cost=0)[0], np.array([12.0, 1.0]))
    assert policy.decide(running, np.array([12.0])).tolist() == [0, 1, 0]
    policy.reset()
    assert policy.decide(running, np.array([12.0])).tolist() == [1, 0, 0]


def test_on_unit_speed_nodes_without_setup_the_rules_serve_the_tasks_they_serve_today():
    # Node features with every speed 1 and c = 0: the same tasks are served as without them.
    observation = hand_observation(history_len=[10, 2, 10, 10, 0], remaining_steps=[100, 200, 50, 300, 80],
                                   budget=400, nodes=3)
    predicted = np.array([150.0, 800.0, 40.0, 100.0, 800.0])
    nodes = with_nodes(observation, speeds=[1, 1, 1], last_node=[0] * 5, setup_left=[0] * 5)
    for policy in (FIFOPolicy(), EDFPolicy()):
        assert policy.act(nodes).tolist() == policy.act(observation).tolist()
    slack = SlackPolicy(WLSPredictor())
    assert sorted(slack.decide(nodes, predicted)) == sorted(serve_in_order(slack_order(observation, predicted), 3))
    lara = LARAPolicy(WLSPredictor())
    assert sorted(lara.decide(nodes, predicted)) == sorted(lara.decide(observation, predicted))


def test_the_relaxed_feasibility_test_counts_speed_per_task_and_in_all():
    # Speeds (4, 1): a task runs at most 4 batches per step, both nodes 5. Within 2 steps, 8 + 2 batches fit
    # (8 on the fast node, 2 on the slow one); 8 + 8 do not (16 > 10); 9 alone does not (9 > 4 · 2).
    assert largest_feasible_subset(np.array([8, 2]), np.array([2, 2]), 5, rate=4).tolist() == [1, 0]
    assert largest_feasible_subset(np.array([8, 8]), np.array([2, 2]), 5, rate=4).size == 1
    assert largest_feasible_subset(np.array([9]), np.array([2]), 5, rate=4).size == 0


def test_the_clairvoyant_program_counts_batches_per_step_per_task_and_in_all():
    # Two tasks in steps [0, 2): 8 and 2 batches fit at speeds (4, 1); 8 and 8 do not; a setup of 1 step
    # (window [1, 2)) leaves room for 4 + 1 batches only.
    assert max_completions(np.array([0, 0]), np.array([2, 2]), np.array([8, 2]), 5, rate=4).all()
    assert max_completions(np.array([0, 0]), np.array([2, 2]), np.array([8, 8]), 5, rate=4).sum() == 1
    assert max_completions(np.array([1, 1]), np.array([2, 2]), np.array([4, 1]), 5, rate=4).all()
    assert max_completions(np.array([1, 1]), np.array([2, 2]), np.array([4, 2]), 5, rate=4).sum() == 1


def test_the_oracle_runs_the_fastest_speed_after_one_setup(bank_dir):
    bank = cached_bank(str(bank_dir))
    cid = sorted(bank.records)[0]
    loss = bank.cumavg(cid)
    eps = float(loss[19])  # reached at batch 20 (or earlier, never before a lower loss)
    first = int(np.flatnonzero(loss <= eps)[0]) + 1
    budget = first  # just enough on unit-speed nodes without setup
    episode = Episode.from_lists([0], [cid], [eps], [budget])
    assert oracle_successes(episode, bank).tolist() == [True]
    assert oracle_successes(episode, bank, switch_cost=1).tolist() == [False]  # B − 1 batches: one short
    # At speed 2 after one setup step it runs 2 (B − 1) ≥ B batches: enough again.
    assert oracle_successes(episode, bank, node_speeds=(1, 2), switch_cost=1).tolist() == [budget >= 2]
    assert clairvoyant_successes(episode, bank, 2, node_speeds=(1, 2), switch_cost=1).tolist() == [budget >= 2]
    with pytest.raises(ValueError, match="node_speeds"):
        clairvoyant_successes(episode, bank, 3, node_speeds=(1, 2))


@pytest.mark.parametrize("options", [{"node_speeds": (1, 1, 1, 2, 2, 2, 4)}, {"switch_cost": 2},
                                     {"node_speeds": (1, 1, 1, 2, 2, 2, 4), "switch_cost": 2}])
def test_oracle_above_clairvoyant_above_every_allocator_per_episode(options, bank_dir, short_file):
    episodes = cached_workload(str(short_file), str(bank_dir)).episodes
    bank = cached_bank(str(bank_dir))
    clairvoyant = [int(clairvoyant_successes(episode, bank, 7, options.get("node_speeds"),
                                             options.get("switch_cost", 0)).sum()) for episode in episodes]
    for policy in (FIFOPolicy(), EDFPolicy(), LARAPolicy(WLSPredictor()), SlackPolicy(WLSPredictor())):
        rows = evaluate_workload(policy, short_file, bank=bank_dir, arrival_window=SHORT_WINDOW, **options)
        for row, bound in zip(rows, clairvoyant):
            assert row["conflicts"] == 0
            assert row["oracle_successes"] >= bound >= row["successes"]


def test_default_options_give_exactly_the_actions_of_the_rules_on_identical_nodes(bank_dir, monkeypatch):
    # With the defaults (given or omitted) the observation has no node entries, the node-aware placement never
    # runs, and FIFO and EDF serve the i-th task of their ranking on node i, step by step over a whole episode.
    # (tests/evaluation/test_refactor_rows.py pins every method's recorded episode rows.)
    def never(*args, **kwargs):
        raise AssertionError("node placement ran with the default options")

    for module in ("allocators.naive", "rules.slack", "allocators.lara"):
        monkeypatch.setattr(f"mara_agents.{module}.place", never)
    policies = (FIFOPolicy(), EDFPolicy(), SlackPolicy(WLSPredictor()), LARAPolicy(WLSPredictor()))
    for explicit in ({}, {"node_speeds": (1,) * 7, "switch_cost": 0}):
        env = gym.make("MARA-v0", bank=str(bank_dir), arrival_window=60, **explicit)
        observation, _ = env.reset(seed=3)
        done, step = False, 0
        while not done:
            assert "nodes" not in observation and "slot_nodes" not in observation
            fifo, edf, slack, lara = (policy.act(observation) for policy in policies)
            budget = np.rint(observation["budget"]).astype(np.int64)
            share = observation["tasks"][:, TASK_FEATURE_INDEX["remaining_time"]]
            left = np.rint(observation["budget"] * share).astype(np.int64)
            slots = np.flatnonzero(observation["tasks"][:, TASK_FEATURE_INDEX["present"]] > 0)
            by_deadline = slots[np.lexsort((slots, left[slots]))]
            by_arrival = slots[np.lexsort((slots, -(budget - left)[slots]))]
            assert fifo.tolist() == [*(by_arrival[:7] + 1), *[0] * (7 - by_arrival[:7].size)]
            assert edf.tolist() == [*(by_deadline[:7] + 1), *[0] * (7 - by_deadline[:7].size)]
            observation, _, done, _, _ = env.step(slack if step % 2 else lara)
            step += 1
