"""The Clairvoyant bound: the most tasks any schedule could complete in an episode if every curve were known.

The Oracle (paper §5.1) counts every task whose curve reaches ε within B batches when served alone; it
ignores that tasks compete for the same M nodes.  The Clairvoyant bound keeps that competition.  Task k
needs c_k batches — the first s with L_k(s) ≤ ε_k — and may run in steps t ∈ [b_k, d_k) (the steps at which
the simulator can serve it: it is admitted at its arrival step and expires after the step d_k − 1).  A task
with c_k > B_k can never succeed and is dropped.  The bound solves exactly

    max Σ_k y_k   s.t.   Σ_t x_{k,t} ≥ c_k y_k  (each counted task gets its batches),
                         Σ_k x_{k,t} ≤ M        (M nodes per step),
                         0 ≤ x_{k,t} ≤ 1        (at most one node per task and step),  y_k ∈ {0, 1}.

**Aggregation.**  The set of tasks inside their window is constant between consecutive arrival/deadline
events, so the steps of such an interval j (length ℓ_j) are interchangeable: X_{k,j} = Σ_{t∈j} x_{k,t} ∈
[0, ℓ_j] and Σ_k X_{k,j} ≤ M ℓ_j.  This shrinks the program from tasks × steps to tasks × events.

**Why the relaxation is exact.**  For the chosen set (y fixed), the X-constraints are a flow network
(source → task, capacity c_k; task → interval j inside its window, capacity ℓ_j; interval → sink, capacity
M ℓ_j).  Its capacities are integers, so whenever a fractional X meets every demand an integral one does
too (max-flow integrality).  Integral amounts X_{k,j} ≤ ℓ_j with Σ_k X_{k,j} ≤ M ℓ_j are then scheduled
inside the interval by McNaughton's wrap-around rule: fill node 1 step by step with the tasks one after
another, wrap to node 2 when ℓ_j steps are used, and so on.  A task split across two nodes runs at the end
of one and the start of the next; since X_{k,j} ≤ ℓ_j the two parts never overlap, so no task ever holds
two nodes in a step and every part starts on a whole step.  Hence the optimum is achieved by a real
step-by-step schedule of one batch per node and step, and every run of the simulator is a feasible point:
Oracle ≥ Clairvoyant ≥ successes of any policy, episode by episode.

**Node speeds and switching costs** (the env options ``node_speeds``, ``switch_cost``).  A task runs at most
v_max = max(speeds) batches per step (one node per step), all nodes together at most V = Σ speeds, and no
batch before c setup steps on the node that first serves it, so never before b_k + c.  The bound then solves
the same program in batches with the window [b_k + c, d_k), X_{k,j} ≤ v_max ℓ_j and Σ_k X_{k,j} ≤ V ℓ_j, and
drops a task with c_k > v_max (B_k − c).  Every run of the simulator is still a feasible point (count each
task's batches per interval), so it stays an upper bound on every policy, and below the Oracle (same drop
rule).  It is a relaxation, not exact: it lets a task's batches spread over nodes of different speeds as if
capacity were one pool, and it charges no node time for setups after the first or for the setup steps
themselves (a node in setup runs no batch); an exact model needs per-node, per-step variables with setup
states, far too large for every evaluated episode.  With the default options it is exactly the program above.

**What it leaves out.**  The bound knows every curve in advance (no prediction error, no probing) and it
ignores the K-slot admission limit: in the simulator at most K tasks are active, later arrivals wait in a
FIFO queue, and a task holds its slot until it succeeds or expires, so a realisable policy can be blocked
from serving a task that the bound serves.  It does respect M, one node per task, the windows and B_k.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from curves.bank import CurveBank
from mara_env.simulator import batch_allowance
from mara_env.workload import Episode


def required_batches(episode: Episode, bank: CurveBank, node_speeds: Sequence[int] | None = None,
                     switch_cost: int = 0) -> np.ndarray:
    """c_k: the first batch at which task k's cumulative-average loss reaches ε_k, or 0 if not within the
    batches it can run (B_k with the default options; :func:`mara_env.simulator.batch_allowance`)."""
    needed = np.zeros(len(episode), dtype=np.int64)
    allowance = batch_allowance(episode.budget, node_speeds, switch_cost).tolist()
    for k, (cid, eps, limit) in enumerate(zip(episode.curve, episode.eps.tolist(), allowance)):
        hits = np.flatnonzero(bank.cumavg(cid)[:limit] <= eps)
        needed[k] = hits[0] + 1 if hits.size else 0
    return needed


@contextmanager
def solver_output_silenced() -> Iterator[None]:
    """Discard what is written to file descriptor 1 inside the block.

    The HiGHS build in SciPy prints a debugging line (``HighsMipSolverData::transformNewIntegerFeasibleSolution``)
    from C for some MILPs, whatever ``disp`` says; the evaluation's own output must not carry it.
    """
    if sys.stdout is not None:  # None when the process started without a standard output
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no standard output to protect (a process started with it closed)
        yield
        return
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def max_completions(arrival: np.ndarray, deadline: np.ndarray, needed: np.ndarray, num_nodes: int,
                    rate: int = 1) -> np.ndarray:
    """Which tasks an optimal clairvoyant schedule completes (boolean per task; ``needed == 0`` = infeasible).

    Task k may run batches in steps [arrival_k, deadline_k), at most ``rate`` per step, and succeeds once it
    has ``needed_k`` batches; ``num_nodes`` batches run per step in all (M unit-speed nodes; with speeds, the
    relaxation of the module text: ``rate`` = the fastest speed, ``num_nodes`` = the sum of the speeds).
    """
    # Imported here, where a bound is solved: at module level SciPy's optimiser would add its memory to every
    # process that imports the evaluation, including those that never compute a bound.
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    chosen = np.zeros(needed.size, dtype=bool)
    tasks = np.flatnonzero((needed > 0) & (needed <= rate * (deadline - arrival)))
    if tasks.size == 0:
        return chosen
    events = np.unique(np.concatenate([arrival[tasks], deadline[tasks]]))
    starts, lengths = events[:-1], np.diff(events)
    # (task, interval) pairs where the interval lies inside the task's window: the X variables.
    inside = (arrival[tasks, None] <= starts[None, :]) & (starts[None, :] + lengths[None, :] <= deadline[tasks, None])
    pair_task, pair_interval = np.nonzero(inside)
    n, p = tasks.size, pair_task.size
    # Variables: y_0..y_{n-1}, then X for each pair.
    cost = np.concatenate([-np.ones(n), np.zeros(p)])
    upper = np.concatenate([np.ones(n), rate * lengths[pair_interval]])
    integrality = np.concatenate([np.ones(n), np.zeros(p)])
    # Demand rows: Σ_j X_{k,j} − c_k y_k ≥ 0.
    demand = coo_array((np.concatenate([-needed[tasks].astype(float), np.ones(p)]),
                        (np.concatenate([np.arange(n), pair_task]), np.concatenate([np.arange(n), n + np.arange(p)]))),
                       shape=(n, n + p))
    constraints = [LinearConstraint(demand, 0.0, np.inf)]
    # Capacity rows Σ_k X_{k,j} ≤ M ℓ_j, only where the tasks could run more than that (others hold trivially).
    crowded = np.flatnonzero(inside.sum(axis=0) * rate > num_nodes)
    if crowded.size:
        row_of = np.full(lengths.size, -1)
        row_of[crowded] = np.arange(crowded.size)
        keep = row_of[pair_interval] >= 0
        capacity = coo_array((np.ones(int(keep.sum())), (row_of[pair_interval[keep]], n + np.flatnonzero(keep))),
                             shape=(crowded.size, n + p))
        constraints.append(LinearConstraint(capacity, -np.inf, num_nodes * lengths[crowded].astype(float)))
    with solver_output_silenced():
        result = milp(cost, integrality=integrality, bounds=Bounds(np.zeros(n + p), upper), constraints=constraints,
                      options={"mip_rel_gap": 0.0})
    if result.status != 0:
        raise RuntimeError(f"Clairvoyant MILP did not reach optimality: {result.message}")
    chosen[tasks] = result.x[:n] > 0.5
    return chosen


def clairvoyant_successes(episode: Episode, bank: CurveBank, num_nodes: int, node_speeds: Sequence[int] | None = None,
                          switch_cost: int = 0) -> np.ndarray:
    """The Clairvoyant bound of one episode: which tasks an optimal schedule with known curves completes.
    With the env options ``node_speeds`` and ``switch_cost`` it is the relaxation of the module text (an
    upper bound, not always reached)."""
    arrival = episode.arrival.astype(np.int64)
    needed = required_batches(episode, bank, node_speeds, switch_cost)
    if not node_speeds and not switch_cost:
        return max_completions(arrival, arrival + episode.budget, needed, num_nodes)
    speeds = tuple(node_speeds) if node_speeds else (1,) * num_nodes
    if len(speeds) != num_nodes:
        raise ValueError(f"node_speeds must have num_nodes = {num_nodes} entries, got {node_speeds!r}")
    return max_completions(arrival + switch_cost, arrival + episode.budget, needed, sum(speeds), max(speeds))
