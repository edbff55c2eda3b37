"""MARA-v0's rules, written once: both simulators call these functions, so nothing can drift between them.

The single-episode :class:`~mara_env.simulator.Simulator` and the batched
:class:`~mara_env.batched.BatchSimulator` differ only in how they hold the state (one episode's arrays, or
N episodes' with a leading axis). What a state *means* lives here:

* the task statuses and their names;
* the conflict rule: which node picks are served (:func:`standing_picks`, and :func:`standing_picks_one`
  for one joint action in plain Python, where NumPy's per-call cost would dominate);
* the per-slot task features and the global features, set by name (:mod:`mara_env.features`);
* the episode metrics (paper §5.1, Table 4), those the options add, and the per-task outcomes;
* the step's reward (paper Eq. 14) and info;
* the distance of each task to its target along the replayed curve (the privileged view of experts).

Array functions broadcast over any leading batch axes, so one episode and N episodes run the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from mara_env.abandon import abandon_metrics, slot_claims, slot_claims_one
from mara_env.config import MARAConfig
from mara_env.curve_table import CurveTable
from mara_env.fairness import fairness_metrics
from mara_env.features import GLOBAL_FEATURE_INDEX as _G
from mara_env.features import GLOBAL_FEATURES, NUM_GLOBAL_FEATURES
from mara_env.shaping import log_progress, shaped_reward

FUTURE, QUEUED, ACTIVE, SUCCEEDED, EXPIRED, ABANDONED = range(6)
STATUS_NAMES = ("not arrived", "queued", "running", "succeeded", "expired", "abandoned")
"""A task's status by name, indexed by the status code (``STATUS_NAMES[SUCCEEDED] == "succeeded"``)."""
TOTALS = ("successes", "expirations", "conflicts", "busy", "queue_full", "waiting", "steps", "setup", "abandoned",
          "abandoned_feasible")
"""The per-episode counters the metrics are computed from."""
INFO_KEYS = ("successes", "expirations", "conflicts")
"""The counters every step's info holds (``repaired`` too with ``conflicts="repair"``, ``abandoned`` with
``abandon=True``)."""
TINY = 1e-12
"""The floor under a loss before taking its logarithm."""
SERVED_FEATURES = ("batches_done", "current_loss", "initial_loss", "log_loss_ratio", "warmup")
"""The task features that change when the task runs a batch, in the order :func:`progress_features` returns them."""


# ---------------------------------------------------------------------------------------------- conflicts
def standing_picks(picks: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Boolean ``(..., M)``: which node picks are served. ``picks`` (..., M) holds each node's choice (0 idle,
    j slot j − 1), ``occupied`` (..., K) which slots hold a task.

    A pick is served when its slot is occupied and no lower-indexed node picked the same slot: nodes take
    slots in index order. Every other non-idle pick is a conflict (the node idles, or is moved by
    ``conflicts="repair"``).
    """
    picks = np.asarray(picks)
    occupied = np.asarray(occupied, dtype=bool)
    num_nodes, num_slots = picks.shape[-1], occupied.shape[-1]
    rows = picks.size // num_nodes
    row_start, nodes, unpicked = _pick_layout(rows, num_nodes, num_slots)
    choice = (row_start + picks.reshape(rows, num_nodes)).ravel()  # one cell per (row, choice) of (rows, K + 1)
    occupied_choice = np.zeros((rows, num_slots + 1), dtype=bool)  # choice 0 (idle) is never a task
    occupied_choice[:, 1:] = occupied.reshape(rows, num_slots)
    first = unpicked.copy()
    np.minimum.at(first, choice, nodes)  # the lowest node making each choice
    return (occupied_choice.ravel()[choice] & (first[choice] == nodes)).reshape(picks.shape)


@lru_cache(maxsize=32)
def _pick_layout(rows: int, num_nodes: int, num_slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`standing_picks` needs for every step of a vector env of this shape, built once: where each
    row's cells start in a flat (rows, K + 1) table, each flat pick's node, and a table where no node has
    picked yet (every cell M)."""
    row_start = np.arange(rows)[:, None] * (num_slots + 1)
    nodes = np.tile(np.arange(num_nodes), rows)
    unpicked = np.full(rows * (num_slots + 1), num_nodes)
    for table in (row_start, nodes, unpicked):
        table.flags.writeable = False
    return row_start, nodes, unpicked


def standing_picks_one(picks: list[int], occupied: list[bool]) -> list[bool]:
    """:func:`standing_picks` of one joint action, in plain Python: the single simulator steps one joint
    action at a time, where a few list operations cost a fraction of the array version's NumPy calls.
    ``tests/env/test_actions.py`` checks that both give the same answer."""
    free = list(occupied)
    served = []
    for pick in picks:
        if pick > 0 and free[pick - 1]:
            free[pick - 1] = False
            served.append(True)
        else:
            served.append(False)
    return served


def standing_choices(choices: np.ndarray, occupied: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """With ``abandon=True``: boolean ``(..., M)`` masks of the node choices (0 idle, j serve slot j − 1, K + j
    abandon slot j − 1) that serve and of those that abandon.

    Picks and abandons both claim their slot (:func:`mara_env.abandon.slot_claims`) and claims resolve as
    :func:`standing_picks` resolves picks: the lowest-indexed node claiming an occupied slot gets it.
    """
    num_slots = np.shape(occupied)[-1]
    asked = np.asarray(choices) > num_slots
    stands = standing_picks(slot_claims(np.asarray(choices), num_slots), occupied)
    return stands & ~asked, stands & asked


def standing_choices_one(choices: list[int], occupied: list[bool]) -> tuple[list[bool], list[int]]:
    """:func:`standing_choices` of one joint action in plain Python: which choices serve, and the slots
    (0-based, in node order) that standing abandons give up."""
    num_slots = len(occupied)
    stands = standing_picks_one(slot_claims_one(choices, num_slots), occupied)
    serves = [stand and choice <= num_slots for choice, stand in zip(choices, stands)]
    dropped = [choice - num_slots - 1 for choice, stand in zip(choices, stands) if stand and choice > num_slots]
    return serves, dropped


# ---------------------------------------------------------------------------------------------- features
def progress_features(batches: np.ndarray, budget: np.ndarray, loss: np.ndarray, first: np.ndarray,
                      eps: np.ndarray, warmup_observations: int) -> tuple[np.ndarray, ...]:
    """The :data:`SERVED_FEATURES` of tasks after ``batches`` ≥ 1 batches, and their progress q (paper Eq. 13).

    ``loss`` is L(s) at s = ``batches`` and ``first`` is L(1); all arguments broadcast. Returns
    (batches_done, current_loss, initial_loss, log_loss_ratio, warmup, progress) in float64: the caller stores
    the features as float32, rounding each value once.
    """
    return (batches / budget, loss, first, np.log(np.maximum(loss, TINY) / eps),
            np.minimum(batches / warmup_observations, 1.0), log_progress(first, loss, eps))


def progress_table(loss: np.ndarray, budget: np.ndarray, eps: np.ndarray,
                   warmup_observations: int) -> tuple[np.ndarray, ...]:
    """:func:`progress_features` of tasks after every batch count s = 0 … W, as (n, W + 1) tables.

    ``loss`` (n, W + 1) holds L(s) at column s; ``budget`` and ``eps`` are (n,). Before the first batch
    (column 0) every feature and q are 0.
    """
    batches = np.arange(loss.shape[-1])
    values = progress_features(batches, budget[:, None], loss, loss[:, 1:2], eps[:, None], warmup_observations)
    seen = batches > 0
    return tuple(np.where(seen, value, 0.0) for value in values)


def queue_wait(t: np.ndarray | int, arrival: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """Feature ``queue_wait``: steps a task waited in the admission queue before time ``t`` (its admission), / B."""
    return (t - arrival) / budget


def remaining_time(deadline: np.ndarray, t: np.ndarray | int, budget: np.ndarray,
                   occupied: np.ndarray | None = None) -> np.ndarray:
    """Feature ``remaining_time``: (deadline − t) / B, and 0 where ``occupied`` (if given) is False."""
    if occupied is None:
        return (deadline - t) / budget
    return np.divide(deadline - t, budget, out=np.zeros(np.shape(occupied)), where=occupied)


def global_features(config: MARAConfig, active: np.ndarray | int, queued: np.ndarray | int,
                    t: np.ndarray | int) -> np.ndarray:
    """The ``global`` observation (..., 4) float32 by name (:data:`mara_env.features.GLOBAL_FEATURES`):
    nodes M / M_max, active tasks / K, queued tasks / K and time t / T. Each value is computed in float64 and
    rounded to float32 once."""
    named = {"nodes": config.num_nodes / config.max_nodes, "active": active / config.max_active,
             "queue": queued / config.max_active, "time": t / config.arrival_window}
    if not isinstance(active, np.ndarray):  # one episode: a list of four floats is the cheapest small array
        return np.array([named[name] for name in GLOBAL_FEATURES], dtype=np.float32)
    values = np.empty(np.shape(active) + (NUM_GLOBAL_FEATURES,), dtype=np.float32)
    for name, value in named.items():
        values[..., _G[name]] = value
    return values


# ---------------------------------------------------------------------------------------------- outcomes
def first_crossings(loss: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """Per task: the first batch count s ≥ 1 at which L(s) ≤ ε, or the table width + 1 when the replayed curve
    never gets there. ``loss`` (..., W + 1) holds L(s) at column s (column 0: no batch yet), ``eps`` (...)."""
    below = loss[..., 1:] <= np.asarray(eps)[..., None]
    return np.where(below.any(axis=-1), below.argmax(axis=-1) + 1, below.shape[-1] + 1)


def task_outcomes(status: np.ndarray) -> tuple[str, ...]:
    """Each task's status by name (:data:`STATUS_NAMES`), in the episode's task order."""
    return tuple(STATUS_NAMES[code] for code in status.tolist())


def episode_metrics(totals: Mapping[str, int], num_nodes: int, t: int, arrival: np.ndarray, left_at: np.ndarray,
                    ready_at: np.ndarray) -> dict[str, float]:
    """Per-episode metrics (paper §5.1, Table 4) from the :data:`TOTALS` counters and each task's arrival, the
    step it left (−1: not yet) and the step it had ``warmup_observations`` observations (−1: not yet);
    meaningful once the episode has terminated.

    ``success_rate``: successes / tasks; ``utilisation``: busy node-steps / (M · steps); ``queue_full``: share
    of steps that began with every slot taken; ``waiting``: mean tasks (active or queued) not served per
    step; ``ready``: mean steps from arrival to the warm-up observations (or to leaving, or to now).
    """
    n = arrival.size
    steps = max(totals["steps"], 1)
    end = np.where(left_at >= 0, left_at, t)
    ready = np.where(ready_at >= 0, ready_at, end) - arrival
    return {
        "tasks": float(n),
        "successes": float(totals["successes"]),
        "success_rate": totals["successes"] / n if n else float("nan"),
        "utilisation": totals["busy"] / (num_nodes * steps),
        "queue_full": totals["queue_full"] / steps,
        "waiting": totals["waiting"] / steps,
        "ready": float(ready.mean()) if n else float("nan"),
        "conflicts": float(totals["conflicts"]),
        "steps": float(totals["steps"]),
    }


def option_metrics(config: MARAConfig, totals: Mapping[str, int], table: CurveTable, curve_rows: np.ndarray,
                   status: np.ndarray, service: np.ndarray | None = None) -> dict[str, float]:
    """The episode metrics the options add to :func:`episode_metrics` (none with the defaults): ``setup``, the
    share of node-steps spent in setup, with a node option (``MARAConfig.node_options``); the fairness metrics
    of :mod:`mara_env.fairness` with ``fairness_metrics=True``; the abandon and wasted-node-step metrics of
    :func:`mara_env.abandon.abandon_metrics` with ``abandon=True``. ``curve_rows``, ``status`` and ``service``
    are the episode's tasks' rows in ``table``, their statuses and the node-steps that served each (read only
    with ``abandon=True``)."""
    extra: dict[str, float] = {}
    if config.node_options:
        extra["setup"] = totals["setup"] / (config.num_nodes * max(totals["steps"], 1))
    if config.fairness_metrics:
        extra.update(fairness_metrics(table.families, table.family[curve_rows], status == SUCCEEDED))
    if config.abandon:
        extra.update(abandon_metrics(totals, table.families, table.family[curve_rows], status == SUCCEEDED,
                                     service))
    return extra


# ---------------------------------------------------------------------------------------------- reward, info
def team_reward(config: MARAConfig, successes: np.ndarray | int, phi_before: np.ndarray | float,
                phi_after: np.ndarray | float) -> np.ndarray | float:
    """The step's team reward: the success count, plus β (Φ_{t+1} − Φ_t) with ``reward="shaped"`` (Eq. 14).
    Works elementwise on a batch of episodes."""
    if isinstance(successes, np.ndarray):
        reward: np.ndarray | float = successes.astype(np.float64)
    else:
        reward = float(successes)
    if config.reward == "shaped":
        return shaped_reward(reward, phi_before, phi_after, config.shaping_beta)
    return reward


def step_info(successes: Any, expirations: Any, conflicts: Any, repaired: Any = None,
              abandoned: Any = None) -> dict[str, Any]:
    """The step info's counters (:data:`INFO_KEYS`, ``repaired`` when the picks were repaired and ``abandoned``,
    the tasks abandoned in the step, with ``abandon=True``)."""
    info = {"successes": successes, "expirations": expirations, "conflicts": conflicts}
    if repaired is not None:
        info["repaired"] = repaired
    if abandoned is not None:
        info["abandoned"] = abandoned
    return info
