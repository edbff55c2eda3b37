"""LARA (Wang et al., 2024) adapted to discrete nodes: keep the largest deadline-feasible set of tasks.

Reconstruction
--------------
The LARA paper describes its allocator only in outline (predict each learner's remaining demand with WLS,
search a binary include/exclude tree for the set of learners that can still meet their deadlines, give
throughput to that set, and spend a little on learners without enough history).  MARA (§5.1) adapts it to
M indivisible nodes with at most one node per task.  Our reconstruction, at every step:

1. **Demands.**  r_k = ⌈predicted remaining batches⌉ from the policy's own predictor (WLS for ``lara``, FM
   for ``lara-fm``), clipped at l_k = steps left before task k's deadline = the batches it can still
   execute.  The clip keeps LARA's original reading of an estimate capped at the remaining budget: a task
   forecast never to finish counts as needing its whole window, so it is dropped only when it crowds out
   others.  Unclipped (the predictors' cap is the generation cap 2·B − s), WLS's large over-estimates drop
   most tasks outright and LARA idles its nodes (``docs/agents.md``, "LARA's demand clip").
2. **Warm-up reservation.**  Tasks with fewer than 4 observations have no trustworthy estimate.  If any
   exist, one node is reserved and serves the warm-up task with the earliest deadline, so new tasks collect
   history without starving the feasible set.
3. **Largest feasible subset.**  Over the ready tasks (≥ 4 observations) find a largest subset S that is
   deadline-feasible on the remaining nodes (see :func:`is_feasible`), by an include/exclude tree search in
   deadline order.  Among equally large subsets the first found wins (earlier deadlines, then smaller
   demands).  K ≤ 10 keeps the search exact and cheap: the whole tree (at most 2^10 leaves) is checked in a
   few array operations (larger K: a pruned walk of the tree).
4. **Service.**  The chosen tasks are served earliest deadline first; ready tasks outside S are judged
   infeasible and get nothing.  Nodes that S cannot use serve further warm-up tasks (earliest deadline
   first): an idle node gains nothing, and serving a warm-up task is how it becomes predictable.

Feasibility test
----------------
Tasks all available now, task k needs r_k unit-time batches before l_k, M unit-speed nodes, a task runs on at
most one node per step, preemption free.  As a flow problem (tasks → time intervals between deadlines →
sink) the min-cut condition reads: for every subset J, Σ_{k∈J} r_k ≤ the sum of the min(M, |J|) largest
l_k in J.  Writing that sum as min_{L≥0} [M·L + Σ_{k∈J} (l_k − L)⁺] and maximising over J gives the exact test

    for every L ≥ 0:   Σ_k max(0, r_k − max(0, l_k − L))  ≤  M·L,

i.e. the work that *must* be done before L (a task can do at most l_k − L after L) fits in M·L.  L = 0 gives
r_k ≤ l_k.  The left side minus M·L is piecewise linear with kinks at l_k and l_k − r_k, so checking those
points (and 0) is exact.  With integer data the flow is integral and McNaughton's wrap-around schedules
each interval in whole steps, so the test is exact for the discrete simulator too.  (The variant
Σ_{l_k≤L} r_k + Σ_{l_k>L} min(r_k, L) ≤ M·L bounds the work that *can* be done by L and rejects feasible
sets, e.g. M = 1 with two tasks r = 5, l = 10.)  ``tests/agents/test_lara.py`` checks the test against a
brute-force search over schedules.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from mara_agents.rules.nodes import RemembersSwitchCost, has_nodes, place
from mara_agents.allocators.predictive import PredictiveAllocator
from mara_agents.predictors.base import MIN_OBSERVATIONS, Predictor
from mara_agents.predictors.demand import Demand
from mara_agents.rules.slots import present_slots, serve_in_order, steps_to_deadline


def _must_do(demand: np.ndarray, window: np.ndarray, horizon: np.ndarray, rate: int = 1) -> np.ndarray:
    """(K, H) batches task k must run before each horizon L: max(0, r_k − rate·max(0, l_k − L))."""
    after = np.maximum(0, window[:, None] - horizon[None, :])
    return np.maximum(0, demand[:, None] - (after if rate == 1 else rate * after))


def _kinks(demand: np.ndarray, window: np.ndarray, rate: int = 1) -> np.ndarray:
    """The positive horizons where the test's left side can change slope: every l_k and l_k − r_k / rate."""
    horizon = np.union1d(window, window - demand if rate == 1 else window - demand / rate)
    return horizon[horizon > 0]


def is_feasible(demand: Sequence[int], window: Sequence[int], num_nodes: int) -> bool:
    """Can every task k finish r_k = ``demand[k]`` batches within l_k = ``window[k]`` steps on ``num_nodes``
    nodes, one node per task per step?  Exact (see the module docstring)."""
    demand, window = np.asarray(demand, dtype=np.int64), np.asarray(window, dtype=np.int64)
    if (demand > window).any():
        return False
    horizon = _kinks(demand, window)
    return bool((_must_do(demand, window, horizon).sum(axis=0) <= num_nodes * horizon).all())


WHOLE_TREE_UP_TO = 12  # candidates whose 2^n subsets are checked at once (4,096 rows); more: the pruned search


@cache
def _subsets(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Every subset of ``count`` ordered candidates as (2^count, count) float64 indicator rows, in the order the
    include-first tree search reaches them (all included first, none last), with their sizes."""
    codes = np.arange(2 ** count - 1, -1, -1)
    bits = (codes[:, None] >> np.arange(count - 1, -1, -1)) & 1  # candidate 0 is the most significant bit
    return bits.astype(np.float64), bits.sum(axis=1)


def largest_feasible_subset(demand: np.ndarray, window: np.ndarray, num_nodes: int, rate: int = 1) -> np.ndarray:
    """Indices of a largest feasible subset, in deadline order.

    ``rate`` > 1 is the relaxed test of nodes with speeds (``docs/research/agents_notes.md``, "Node speeds
    and switching costs"): a task runs at most ``rate`` (the fastest speed) batches per step and ``num_nodes`` is then the
    batches all nodes run per step (the sum of their speeds).

    Include/exclude tree search over tasks in (deadline, demand) order, include branch first; among equally large
    subsets the first one found wins, which prefers earlier deadlines and, at equal deadlines, smaller demands.
    Tasks that cannot finish even alone are dropped up front.  Up to :data:`WHOLE_TREE_UP_TO` candidates (the
    shipped K = 10 slots) the whole tree is checked at once: every subset's must-do work at each horizon is one
    row of a (2^n, n) × (n, H) product (sums of integers far below 2^53, exact in float64).  Beyond that the tree
    is walked: an infeasible partial set is never extended (subsets of feasible sets are feasible, so nothing is
    lost) and a branch is cut when even taking every undecided task could not beat the largest subset found.

    The test of :func:`is_feasible` is checked at the kinks of *all* candidate tasks, a superset of any subset's
    kinks, so it stays exact while each task's row of must-do work is computed once.
    """
    demand = np.asarray(demand, dtype=np.int64)
    window = np.asarray(window, dtype=np.int64)
    order = np.lexsort((demand, window))
    order = order[demand[order] <= rate * window[order]]
    if order.size == 0:
        return order
    horizon = _kinks(demand[order], window[order], rate)
    must_do, capacity = _must_do(demand[order], window[order], horizon, rate), num_nodes * horizon
    if order.size <= WHOLE_TREE_UP_TO:
        subsets, sizes = _subsets(order.size)
        feasible = (subsets @ must_do.astype(np.float64) <= capacity).all(axis=1)
        return order[subsets[np.flatnonzero(feasible & (sizes == sizes[feasible].max()))[0]] > 0]
    best: list[int] = []

    def search(position: int, chosen: list[int], load: np.ndarray) -> None:
        nonlocal best
        if len(chosen) + order.size - position <= len(best):
            return
        if position == order.size:
            best = list(chosen)
            return
        extended = load + must_do[position]
        if (extended <= capacity).all():
            search(position + 1, chosen + [position], extended)
        search(position + 1, chosen, load)

    search(0, [], np.zeros_like(horizon))
    return order[np.asarray(best, dtype=np.int64)]


class LARAPolicy(RemembersSwitchCost, PredictiveAllocator):
    """The LARA allocator over any batched predictor (``lara``: WLS, ``lara-fm``: FM); see the module text."""

    def __init__(self, demand: Demand | Predictor, warmup: int = MIN_OBSERVATIONS):
        super().__init__(demand)
        self.warmup = warmup

    def decide(self, observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
        """LARA's rule (Wang et al., 2024, as adapted to M nodes in MARA §5.1; steps 1–4 of the module text):
        clipped demands, one node reserved for the earliest-deadline warm-up task, the largest deadline-feasible
        subset of the ready tasks served earliest deadline first, spare nodes to further warm-up tasks.
        ``predicted`` holds the slots' predicted remaining batches (K,)."""
        if has_nodes(observation):
            return self.decide_on_nodes(observation, predicted)
        num_nodes = observation["action_mask"].shape[0]
        slots = present_slots(observation)
        window = steps_to_deadline(observation, slots)
        warm = observation["history_len"][slots] < self.warmup
        warm_order = slots[warm][np.argsort(window[warm], kind="stable")]
        reserved = min(1, warm_order.size)
        ready = ~warm
        demand = np.minimum(np.ceil(predicted[slots]), window).astype(np.int64)
        keep = np.flatnonzero(ready)[largest_feasible_subset(demand[ready], window[ready], num_nodes - reserved)]
        chosen = slots[keep]  # already in deadline order
        order = np.concatenate([warm_order[:reserved], chosen, warm_order[reserved:]])
        return serve_in_order(order, num_nodes)

    def decide_on_nodes(self, observation: dict[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
        """LARA with node speeds and switching costs (``docs/agents.md``, "Node speeds and switching costs").

        Each ready task's window is its steps to the deadline less the setup it still needs (on its own node
        when it is running, c otherwise); its demand is clipped at the batches the slowest node runs in that
        window (LARA's clip: a task forecast never to finish counts as holding a node for its whole window, not
        the fast node); the subset is the largest that passes the relaxed test of
        :func:`largest_feasible_subset` on the nodes left after the warm-up reservation (the slowest node).
        Tasks are served as on identical nodes (the reserved warm-up task, the subset, spare warm-up tasks), and
        :func:`~mara_agents.rules.nodes.place` puts the subset on the nodes before the warm-up tasks."""
        view = self.switch.view(observation)
        num_nodes = view.speed.size
        slots = present_slots(observation)
        window = steps_to_deadline(observation, slots) - view.setup_left[slots]
        warm = observation["history_len"][slots] < self.warmup
        warm_order = slots[warm][np.argsort(window[warm], kind="stable")]
        reserved = min(1, warm_order.size)
        capacity = int(np.sort(view.speed)[reserved:].sum())
        ready = ~warm
        wanted = np.ceil(predicted[slots])
        # A task whose setup alone outlasts its deadline keeps a demand it cannot meet and is dropped.
        clipped = np.minimum(wanted, window * view.slowest)
        demand = np.where(window > 0, clipped, np.maximum(wanted, 1)).astype(np.int64)
        keep = np.flatnonzero(ready)[largest_feasible_subset(demand[ready], window[ready], capacity, view.fastest)]
        served = np.concatenate([warm_order[:reserved], slots[keep], warm_order[reserved:]])[:num_nodes]
        placement = np.concatenate([served[np.isin(served, slots[keep])], served[~np.isin(served, slots[keep])]])
        return place(placement, view, view.steps_needed(placement, predicted[placement]))
