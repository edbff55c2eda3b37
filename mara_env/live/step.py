"""The one step of a live episode, shared by every live front end.

A live step differs from a simulated one only in where the losses come from: the batches the served tasks
just ran reveal them, and a task whose recipe failed for good expires instead. :func:`live_step` does
exactly that, then steps the simulator through the engine's :func:`~mara_env.engine.advance`, so the reward,
info and episode end are the ones every ``MARA-v0`` front end reports. ``LiveMARAEnv`` (losses from Ray
workers), ``mara_agents.live.tune.MARAScheduler`` (losses reported by Tune trials) and :func:`mara_env.live.replay`
(losses read back from the recorded bank) all call it.

With ``abandon=True`` a node's choice K + j abandons slot j − 1 as in ``MARA-v0``: the task leaves as abandoned
before any batch runs, and the front end stops it.  :func:`served_tasks` names the tasks that run a batch in a
step, :func:`abandoned_tasks` those that left as abandoned.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from mara_env.dynamics import ABANDONED, standing_choices, standing_picks
from mara_env.engine import advance
from mara_env.live.simulator import LiveSimulator


class LiveStep(NamedTuple):
    """What one live step applied and produced."""

    picks: list[int]
    """The joint action the simulator applied: the given picks, with the nodes serving a failed task idle."""
    reward: float
    terminated: bool
    info: dict[str, Any]
    """The engine's step info (:func:`~mara_env.engine.advance`)."""


def serving(sim: LiveSimulator, picks: Sequence[int] | np.ndarray) -> np.ndarray:
    """Boolean (M,): which of the nodes' ``picks`` serve a task this step (an abandon choice serves none)."""
    picks = np.asarray(picks, dtype=np.int64)
    if sim.abandon:
        return standing_choices(picks, sim.occupied)[0]
    return standing_picks(picks, sim.occupied)


def served_tasks(sim: LiveSimulator, picks: Sequence[int] | np.ndarray) -> dict[int, int]:
    """Node → task (its index in the episode) for every node whose pick serves a task this step."""
    return {node: int(sim.slot_task[int(picks[node]) - 1]) for node in np.flatnonzero(serving(sim, picks)).tolist()}


def abandoned_tasks(sim: LiveSimulator, before: np.ndarray) -> list[int]:
    """The tasks that left as abandoned in the step just taken, given the statuses ``before`` it."""
    return np.flatnonzero((sim.status == ABANDONED) & (before != ABANDONED)).tolist()


def live_step(sim: LiveSimulator, picks: Sequence[int], losses: Mapping[int, float], failed: Collection[int],
              repaired: int | None = None) -> LiveStep:
    """Advance a live episode by one step of ``picks`` (each node's choice, conflicts already resolved).

    ``losses`` maps each task that ran a batch in this step to its loss, which :meth:`LiveSimulator.reveal`
    records; each task in ``failed`` expires at the end of the step (:meth:`LiveSimulator.fail`) and a node
    that the picks let serve it idles instead. ``repaired`` is passed on to the info (how many picks
    :func:`~mara_env.engine.resolve_conflicts` moved).
    """
    for task, loss in losses.items():
        sim.reveal(task, loss)
    stands = serving(sim, picks)
    applied = [0 if stand and int(sim.slot_task[pick - 1]) in failed else int(pick)
               for pick, stand in zip(picks, stands.tolist())]
    for task in failed:
        sim.fail(task)
    return LiveStep(applied, *advance(sim, applied, repaired))
