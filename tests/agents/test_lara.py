"""LARA's exact feasibility test and largest-feasible-subset search, checked against brute force."""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.allocators.lara import WHOLE_TREE_UP_TO, LARAPolicy, is_feasible, largest_feasible_subset
from mara_agents.predictors import WLSPredictor
from mara_agents.play.lockstep import evaluate_workload

from conftest import hand_observation


def brute_force_feasible(demand: tuple[int, ...], window: tuple[int, ...], nodes: int) -> bool:
    """Search every discrete schedule: each step serve any ≤ `nodes` unfinished tasks still before their
    deadline; feasible if every task's remaining demand is 0 at its deadline."""
    horizon = max(window, default=0)

    @lru_cache(maxsize=None)
    def reachable(t: int, remaining: tuple[int, ...]) -> bool:
        if any(r > 0 and w <= t for r, w in zip(remaining, window)):
            return False
        if t == horizon or not any(remaining):
            return not any(remaining)
        open_tasks = [k for k, r in enumerate(remaining) if r > 0 and t < window[k]]
        for size in range(min(nodes, len(open_tasks)), -1, -1):
            for served in itertools.combinations(open_tasks, size):
                nxt = tuple(r - (k in served) for k, r in enumerate(remaining))
                if reachable(t + 1, nxt):
                    return True
        return False

    return reachable(0, tuple(demand))


def problems(tasks: int, demand: int, window: int, nodes: int) -> st.SearchStrategy:
    """(demands, windows, nodes) of 1..``tasks`` tasks with demands in 0..``demand``, windows in 1..``window``."""
    return st.integers(1, tasks).flatmap(lambda n: st.tuples(
        st.lists(st.integers(0, demand), min_size=n, max_size=n),
        st.lists(st.integers(1, window), min_size=n, max_size=n),
        st.integers(1, nodes)))


instances = problems(tasks=4, demand=5, window=6, nodes=3)


@settings(max_examples=300, deadline=None)
@given(instances)
def test_feasibility_test_matches_brute_force_schedules(instance):
    demand, window, nodes = instance
    assert is_feasible(np.array(demand), np.array(window), nodes) == brute_force_feasible(tuple(demand), tuple(window), nodes)


def test_two_tasks_sharing_one_node_back_to_back_are_feasible():
    # The "work that can be done by L" variant rejects this; the must-do-by-L test accepts it.
    assert is_feasible(np.array([5, 5]), np.array([10, 10]), 1)
    assert not is_feasible(np.array([5, 6]), np.array([10, 10]), 1)


def test_a_task_needing_more_than_its_window_is_infeasible_even_alone():
    assert not is_feasible(np.array([7]), np.array([6]), 7)


@settings(max_examples=150, deadline=None)
@given(problems(tasks=7, demand=8, window=8, nodes=3))
def test_subset_search_returns_a_largest_feasible_subset(instance):
    demand, window, nodes = (np.array(instance[0]), np.array(instance[1]), instance[2])
    chosen = largest_feasible_subset(demand, window, nodes)
    assert len(set(chosen.tolist())) == chosen.size
    assert is_feasible(demand[chosen], window[chosen], nodes)
    best = max(size for size in range(len(demand) + 1)
               for subset in itertools.combinations(range(len(demand)), size)
               if is_feasible(demand[list(subset)], window[list(subset)], nodes))
    assert chosen.size == best
    assert np.all(np.diff(window[chosen]) >= 0), "chosen tasks come in deadline order"


def reference_search(demand: np.ndarray, window: np.ndarray, nodes: int) -> list[int]:
    """The include-first tree search written plainly: the full feasibility test at every node of the tree."""
    order = [k for k in np.lexsort((demand, window)).tolist() if demand[k] <= window[k]]
    best: list[int] = []

    def search(position: int, chosen: list[int]) -> None:
        nonlocal best
        if len(chosen) + len(order) - position <= len(best):
            return
        if position == len(order):
            best = chosen
            return
        candidate = chosen + [order[position]]
        if is_feasible(demand[candidate], window[candidate], nodes):
            search(position + 1, candidate)
        search(position + 1, chosen)

    search(0, [])
    return best


@settings(max_examples=200, deadline=None)
@given(problems(tasks=10, demand=40, window=40, nodes=7))
def test_subset_search_picks_the_same_subset_as_the_plain_tree_search(instance):
    # The whole tree is checked at once against all candidates' kinks; the subset it returns (not only its
    # size) must be the one the plain search finds first.
    demand, window, nodes = np.array(instance[0]), np.array(instance[1]), instance[2]
    assert largest_feasible_subset(demand, window, nodes).tolist() == reference_search(demand, window, nodes)


def test_more_candidates_than_the_whole_tree_takes_are_searched_by_walking_it():
    rng = np.random.default_rng(5)
    for _ in range(60):  # tight windows on one or two nodes: the first subset found is seldom the largest
        tasks = WHOLE_TREE_UP_TO + 1
        demand, window, nodes = rng.integers(1, 12, tasks), rng.integers(4, 30, tasks), int(rng.integers(1, 3))
        assert largest_feasible_subset(demand, window, nodes).tolist() == reference_search(demand, window, nodes)


def test_subset_search_prefers_earlier_deadlines_then_smaller_demands_among_equal_sizes():
    # One node: any one task fits alone, no two do; the earliest deadline wins, then the smaller demand.
    assert largest_feasible_subset(np.array([9, 8, 7]), np.array([12, 10, 11]), 1).tolist() == [1]
    assert largest_feasible_subset(np.array([9, 4]), np.array([10, 10]), 1).tolist() == [1]


def test_tasks_that_cannot_finish_alone_are_never_chosen():
    assert largest_feasible_subset(np.array([11, 3]), np.array([10, 10]), 7).tolist() == [1]


def test_lara_reserves_one_node_for_warm_up_and_drops_predicted_infeasible_tasks():
    # Slot 0 is warming up; slots 1–2 are ready but flat (predicted to need their whole window): on the one
    # remaining node only one of them fits, the earlier deadline (slot 2) wins; the other gets nothing.
    obs = hand_observation(history_len=[1, 10, 10], remaining_steps=[50, 30, 20])
    action = LARAPolicy(WLSPredictor()).act(obs)
    assert action.tolist() == [1, 3]


def test_lara_serves_a_matching_and_beats_fifo_on_the_stress_test(bank_dir, stress_file):
    rows = evaluate_workload(LARAPolicy(WLSPredictor()), stress_file, bank=bank_dir)
    assert rows[0]["conflicts"] == 0
    assert rows[0]["successes"] >= 1
