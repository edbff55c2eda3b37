"""Which node serves which task, when nodes differ in speed or a task pays a setup to start on a node.

With the environment's node options (``node_speeds``, ``switch_cost``) the observation carries ``nodes`` and
``slot_nodes`` (``mara_env.features.NODE_FEATURES``, ``SLOT_NODE_FEATURES``), and the hand-written allocators
then decide in two parts: their own ranking chooses *which* tasks are served (with the speed- and
setup-aware feasibility of the predictive rules), and :func:`place` decides *where*.  Without those entries
none of this runs and every allocator decides exactly as on identical nodes (``docs/agents.md``, "Node speeds
and switching costs").

Placement, for the served tasks in the rule's placement order (most deserving of a fast node first):

1. **Reservation.**  When moving costs setup (c > 0, or c unknown), each served task that is *running* (its
   last node served it at the previous step) holds that node: no other task may take it.
2. **Choice.**  In placement order each task takes one node among the free, unreserved nodes and its own:

   * with an estimate of its remaining batches r (FM-slack, LARA), the node where it finishes soonest,
     steps_k(i) = setup_k(i) + ⌈r / speed_i⌉ (setup_k(i): its setup left on its own node, c on any other);
     ties go to its own node, then the faster node, then the lower index.  A running task therefore moves
     exactly when the gain ⌈r/v_own⌉ + setup_own − (c + ⌈r/v_new⌉) is positive;
   * without one (FIFO, EDF), its own node when it holds one and moving costs setup, else the fastest free
     node (ties to the lower index): these rules cannot tell what a move would save, so with c > 0 a
     running task never moves.

   A task that moves frees its old node for the tasks after it.

The observation shows c directly on every occupied slot whose task no node served at the previous step (its
``setup_left`` is c).  When every task is running it does not, so :class:`SwitchCost` remembers the last c
seen since ``reset()``; until one is seen, c counts as unknown and running tasks do not move.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mara_env.features import NODE_FEATURE_INDEX, SLOT_NODE_FEATURE_INDEX, TASK_FEATURE_INDEX

_SPEED = NODE_FEATURE_INDEX["speed"]
_SETUP = SLOT_NODE_FEATURE_INDEX["setup_left"]
_LAST = SLOT_NODE_FEATURE_INDEX["last_node"]
_PRESENT = TASK_FEATURE_INDEX["present"]


def has_nodes(observation: dict[str, np.ndarray]) -> bool:
    """Does the observation carry node features (a node option is set)?"""
    return "nodes" in observation


@dataclass(frozen=True)
class NodeView:
    """The node side of one observation, in integers.

    ``speed`` (M,): batches per step; ``own`` (K,): the node that served each slot's task at the previous step
    (−1: none, and for empty slots); ``setup_left`` (K,): the setup steps the task still needs on its own node
    (c for a task without one); ``switch_cost``: c, or None when it cannot be known yet.
    """

    speed: np.ndarray
    own: np.ndarray
    setup_left: np.ndarray
    switch_cost: int | None

    @property
    def fastest(self) -> int:
        """The highest node speed."""
        return int(self.speed.max())

    @property
    def slowest(self) -> int:
        """The lowest node speed."""
        return int(self.speed.min())

    @property
    def sticky(self) -> bool:
        """Does moving a running task cost setup (c > 0, or c not known)?"""
        return self.switch_cost != 0

    def setup(self, slots: np.ndarray) -> np.ndarray:
        """(n, M) setup steps each listed slot's task needs on each node before it runs a batch: its
        ``setup_left`` on its own node, c elsewhere (c unknown: its own node only, others never chosen)."""
        other = np.inf if self.switch_cost is None else self.switch_cost
        on_own = self.own[slots, None] == np.arange(self.speed.size)[None, :]
        return np.where(on_own, self.setup_left[slots, None], other)

    def steps_needed(self, slots: np.ndarray, remaining: np.ndarray) -> np.ndarray:
        """(n, M) steps each listed slot's task needs to run ``remaining`` (n,) batches on each node, setup
        included: setup + ⌈remaining / speed⌉."""
        runs = np.ceil(np.maximum(np.asarray(remaining, dtype=np.float64), 0.0)[:, None] / self.speed[None, :])
        return self.setup(slots) + runs


class SwitchCost:
    """c as the observations show it: read from a slot whose task no node served at the previous step, else
    the last value seen since :meth:`reset` (the env's c is fixed), else ``known`` — the c of the setting, when
    the reader is told it (a privileged expert, a policy trained for its setting) — else unknown (None)."""

    def __init__(self, known: int | None = None) -> None:
        self.known = known
        self.seen: int | None = known

    def reset(self) -> None:
        self.seen = self.known

    def view(self, observation: dict[str, np.ndarray]) -> NodeView:
        """The :class:`NodeView` of an observation with node features."""
        present = observation["tasks"][:, _PRESENT] > 0
        slot_nodes = np.rint(observation["slot_nodes"]).astype(np.int64)
        own = np.where(present, slot_nodes[:, _LAST] - 1, -1)
        fresh = present & (own < 0)
        if fresh.any():
            self.seen = int(slot_nodes[fresh, _SETUP].max())
        speed = np.rint(observation["nodes"][:, _SPEED]).astype(np.int64)
        return NodeView(speed, own, slot_nodes[:, _SETUP], self.seen)


class RemembersSwitchCost:
    """An allocator's memory of c (:class:`SwitchCost`), forgotten by :meth:`reset`. Created on first use, so
    that a user's subclass whose ``__init__`` does not call its parent's still works."""

    @property
    def switch(self) -> SwitchCost:
        if "_switch" not in self.__dict__:
            self._switch = SwitchCost()
        return self._switch

    def reset(self) -> None:
        """Forget the switching cost seen."""
        self.switch.reset()


def _by_speed(speed: np.ndarray) -> np.ndarray:
    """Node indices, fastest first, ties to the lower index."""
    return np.lexsort((np.arange(speed.size), -speed))


def place(order: np.ndarray, view: NodeView, steps: np.ndarray | None = None) -> np.ndarray:
    """The joint action (M,) that serves the slots of ``order`` (at most M, in placement order) on the nodes
    by the module's rule.  ``steps`` (len(order), M): each task's :meth:`NodeView.steps_needed`, or None for
    a rule without remaining-work estimates."""
    num_nodes = view.speed.size
    action = np.zeros(num_nodes, dtype=np.int64)
    free = np.ones(num_nodes, dtype=bool)
    reserved = np.zeros(num_nodes, dtype=bool)
    if view.sticky:
        holders = view.own[order]
        reserved[holders[holders >= 0]] = True
    fastest_first = _by_speed(view.speed)
    for row, slot in enumerate(order.tolist()):
        own = int(view.own[slot])
        candidates = fastest_first[free[fastest_first] & ~reserved[fastest_first]]
        if own >= 0 and free[own]:
            candidates = np.concatenate([[own], candidates[candidates != own]])
        if steps is None:
            node = own if view.sticky and own >= 0 and free[own] else fastest_free(candidates, view.speed)
        else:
            node = int(candidates[np.argmin(steps[row, candidates])])  # first minimum: own, then fastest first
        action[node] = slot + 1
        free[node] = False
        if own >= 0 and node != own:
            reserved[own] = False
    return action


def fastest_free(candidates: np.ndarray, speed: np.ndarray) -> int:
    """The fastest of ``candidates`` (ties to the lower index)."""
    return int(candidates[_by_speed(speed[candidates])[0]])
