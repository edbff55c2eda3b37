"""The Clairvoyant bound is the exact optimum of the node-constrained problem with known curves."""

from __future__ import annotations

from itertools import combinations

import numpy as np
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from mara_agents.evaluation.clairvoyant import clairvoyant_successes, max_completions, required_batches
from mara_env.engine import cached_bank, cached_workload
from mara_env.fixed_workloads import workload_path
from mara_env.simulator import oracle_successes


def schedulable(arrival, deadline, needed, num_nodes) -> bool:
    """Exact per-step check by max flow: source → task (c_k) → each step of its window (1) → sink (M)."""
    n, horizon = len(needed), int(max(deadline, default=0))
    if n == 0:
        return True
    source, sink = n + horizon, n + horizon + 1
    edges = [(source, k, int(needed[k])) for k in range(n)]
    edges += [(k, n + t, 1) for k in range(n) for t in range(arrival[k], deadline[k])]
    edges += [(n + t, sink, num_nodes) for t in range(horizon)]
    rows, cols, caps = zip(*edges)
    graph = csr_array((np.array(caps, dtype=np.int32), (rows, cols)), shape=(sink + 1, sink + 1))
    return maximum_flow(graph, source, sink).flow_value == int(sum(needed))


def brute_force(arrival, deadline, needed, num_nodes) -> int:
    """The largest subset of feasible tasks that can all be scheduled, by trying every subset."""
    feasible = [k for k in range(len(needed)) if 0 < needed[k] <= deadline[k] - arrival[k]]
    for size in range(len(feasible), 0, -1):
        for subset in combinations(feasible, size):
            s = list(subset)
            if schedulable(arrival[s], deadline[s], needed[s], num_nodes):
                return size
    return 0


instances = st.integers(1, 7).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 8), min_size=n, max_size=n),
    st.lists(st.integers(1, 8), min_size=n, max_size=n),
    st.lists(st.integers(0, 8), min_size=n, max_size=n),
    st.integers(1, 3)))


@settings(max_examples=30, deadline=None)
@given(instances)
def test_bound_equals_brute_force_optimum_over_schedules(instance):
    arrival, window, needed = (np.array(values) for values in instance[:3])
    num_nodes = instance[3]
    deadline = arrival + window
    chosen = max_completions(arrival, deadline, needed, num_nodes)
    assert chosen.sum() == brute_force(arrival, deadline, needed, num_nodes)
    assert schedulable(arrival[chosen], deadline[chosen], needed[chosen], num_nodes)


def test_one_node_completes_one_of_two_tasks_that_each_need_the_whole_window():
    chosen = max_completions(np.array([0, 0]), np.array([10, 10]), np.array([10, 10]), num_nodes=1)
    assert chosen.sum() == 1


def test_tasks_needing_more_than_their_budget_are_never_counted():
    chosen = max_completions(np.array([0, 0]), np.array([5, 5]), np.array([6, 0]), num_nodes=4)
    assert not chosen.any()


def test_with_enough_nodes_the_bound_equals_the_oracle(bank_dir, workloads_dir):
    bank = cached_bank(str(bank_dir))
    workload = cached_workload(str(workload_path("id", 0.07, workloads_dir)), str(bank_dir))
    for episode in workload.episodes[:3]:
        assert (clairvoyant_successes(episode, bank, num_nodes=len(episode)) == oracle_successes(episode, bank)).all()


def test_the_bound_never_exceeds_the_oracle_with_few_nodes(bank_dir, workloads_dir):
    bank = cached_bank(str(bank_dir))
    workload = cached_workload(str(workload_path("id", 0.07, workloads_dir)), str(bank_dir))
    for episode in workload.episodes[:3]:
        bound = clairvoyant_successes(episode, bank, num_nodes=1)
        assert not (bound & ~oracle_successes(episode, bank)).any()
        assert bound.sum() < oracle_successes(episode, bank).sum()
        assert (required_batches(episode, bank)[bound] > 0).all()


def test_the_solver_cannot_print_into_the_evaluation_output(capfd):
    import os

    from mara_agents.evaluation.clairvoyant import solver_output_silenced

    print("before", flush=True)
    with solver_output_silenced():
        os.write(1, b"HighsMipSolverData::transformNewIntegerFeasibleSolution\n")  # as the C solver writes it
    os.write(1, b"after\n")
    assert capfd.readouterr().out == "before\nafter\n"


def test_silencing_needs_no_standard_output():
    import subprocess
    import sys

    code = ("from mara_agents.evaluation.clairvoyant import solver_output_silenced\n"
            "with solver_output_silenced():\n    pass\nimport sys; sys.stderr.write('ok')")
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False, close_fds=True, preexec_fn=lambda: __import__("os").close(1))
    assert done.returncode == 0 and done.stderr.endswith("ok")
