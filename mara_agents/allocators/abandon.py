"""Hand-written allocators that stop what cannot finish: FM-slack, LARA and EDF with an abandon rule each, for
``MARA-v0``'s abandon action (``abandon=True``, ``docs/environment.md``, "Abandoning a task").

Every step, in this order:

1. the rule's own estimate marks **hopeless** tasks among those with at least 4 observations (a task in
   warm-up is never abandoned: nothing is known about it yet);
2. every hopeless task is abandoned, the most hopeless first, at most one per node — with ``make_room=True``
   only as many as tasks wait in the admission queue (abandoning then only ever makes room);
3. the base allocator decides on the observation *without* the abandoned tasks (as if their slots were
   empty), and the abandons take the nodes it leaves idle, else its last nodes (those that serve its
   lowest-ranked tasks).

The three rules, each from the estimate its allocator already has:

* ``slack-fm+abandon`` — FM's samples: a task is hopeless when the share of FM's sampled remaining demands
  that fit in its steps left (finishing on a free node every step) is below ``threshold``;
* ``lara+abandon`` — WLS's point estimate: hopeless when the predicted remaining batches exceed
  ``threshold`` × steps left and are below the generation cap 2·B − s (WLS answers the cap when its fit finds
  no descending power law: that is no estimate, not a hopeless one);
* ``edf+abandon`` — EDF has no predictor, so it extrapolates the task's own observed log-progress linearly:
  after s batches at progress q = log(L₁/L)/log(L₁/ε) it needs about s·(1 − q)/q more; hopeless when that
  exceeds ``threshold`` × steps left (or q ≤ 0).  Curves flatten, so linear extrapolation is optimistic and
  the rule errs on the side of keeping a task.

The thresholds are chosen on ``val`` workloads under the rule written in ``docs/research/abandon_rules.md`` before the
runs; the registry builds each with its chosen value.  None of these methods is in the default evaluation
(``evaluate.py abandon`` plays them), and the base allocators are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mara_agents.allocators.lara import LARAPolicy
from mara_agents.allocators.naive import EDFPolicy
from mara_agents.allocators.predictive import PredictiveAllocator
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.predictors.demand import GENERATION_CAP_FACTOR, Demand, make_demand, stack_observations
from mara_agents.rules.hopeless import (FITS_SHARE_THRESHOLD, demand_ratio_score, dropped_slots, fits_share_score,
                                       ready_and_left)
from mara_env.features import TASK_FEATURE_INDEX

_LOG_RATIO = TASK_FEATURE_INDEX["log_loss_ratio"]
_FIRST = TASK_FEATURE_INDEX["initial_loss"]
_TARGET = TASK_FEATURE_INDEX["target_loss"]

Hopelessness = Callable[[dict[str, np.ndarray]], np.ndarray]
"""A rule's score per slot of one observation (K,): a task is hopeless when its score is positive, and a
higher score is more hopeless."""


def _estimated(observation: dict[str, np.ndarray], remaining: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~mara_agents.rules.hopeless.ready_and_left`, less the slots whose estimate is the generation cap (the predictor's "no estimate")."""
    ready, left = ready_and_left(observation)
    cap = GENERATION_CAP_FACTOR * observation["budget"].astype(np.float64) - observation["history_len"]
    return ready & (remaining < cap), left


def extrapolated_need(observation: dict[str, np.ndarray]) -> np.ndarray:
    """EDF's estimate (K,): s·(1 − q)/q more batches for a slot at progress q after s batches, linear in the
    log-loss it has already covered; infinite where it has made no progress (q ≤ 0)."""
    tasks = observation["tasks"].astype(np.float64)
    span = np.log(np.maximum(tasks[:, _FIRST], 1e-12) / np.maximum(tasks[:, _TARGET], 1e-12))
    covered = span - tasks[:, _LOG_RATIO]
    batches = observation["history_len"].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(covered > 0, batches * (span - covered) / covered, np.inf)
    return np.where(span > 0, need, 0.0)  # a task whose first loss already meets ε needs nothing


def without_slots(observation: dict[str, np.ndarray], slots: np.ndarray) -> dict[str, np.ndarray]:
    """``observation`` as if ``slots`` were empty (what the base allocator decides on)."""
    if slots.size == 0:
        return observation
    view = {key: value.copy() for key, value in observation.items()}
    num_slots = view["tasks"].shape[0]
    for key in ("tasks", "history", "history_len", "budget"):
        view[key][slots] = 0
    mask = view["action_mask"]
    mask[:, slots + 1] = 0
    if mask.shape[-1] > num_slots + 1:
        mask[:, slots + num_slots + 1] = 0
    return view


def with_abandons(action: np.ndarray, slots: np.ndarray, num_slots: int) -> np.ndarray:
    """``action`` with one node abandoning each of ``slots`` (most hopeless first): the idle nodes first, then the
    last nodes of ``action``."""
    action = np.array(action, dtype=np.int64)
    nodes = np.concatenate([np.flatnonzero(action == 0), np.flatnonzero(action != 0)[::-1]])[: slots.size]
    action[nodes] = slots[: nodes.size] + num_slots + 1
    return action


class AbandoningPolicy:
    """A base allocator plus an abandon rule (module docstring): ``decide`` gives the base allocator's joint
    action on the observation without the hopeless tasks, and ``score`` says which are hopeless.  ``base`` and
    ``threshold`` are kept as attributes too, so that the evaluation's cache key (which hashes a policy's
    attributes, not its closures) changes with the base allocator's predictor and with the threshold."""

    abandons = True  # plays only with the abandon action (MARAConfig(abandon=True)); the live runners read it

    def __init__(self, decide: Callable[[list[dict[str, np.ndarray]]], np.ndarray],
                 score: Callable[[list[dict[str, np.ndarray]]], list[np.ndarray]], reset: Callable[[], None],
                 make_room: bool = False, base: object = None, threshold: float | None = None):
        self._decide = decide
        self._score = score
        self._reset = reset
        self.make_room = make_room
        self.base = base
        self.threshold = threshold

    def reset(self) -> None:
        self._reset()

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M): the abandons of each observation, then the base allocator's decision without them."""
        observations = list(observations)
        num_slots, choices = observations[0]["tasks"].shape[0], observations[0]["action_mask"].shape[-1]
        if choices != 2 * num_slots + 1:
            raise ValueError("an abandoning allocator plays MARA-v0 with abandon=True (2K + 1 choices per node); "
                             f"this observation's action mask has {choices} for K = {num_slots}")
        num_nodes = observations[0]["action_mask"].shape[0]
        dropped = [dropped_slots(observation, score, self.make_room, num_nodes)
                   for observation, score in zip(observations, self._score(observations))]
        actions = self._decide([without_slots(obs, slots) for obs, slots in zip(observations, dropped)])
        return np.stack([with_abandons(action, slots, num_slots) for action, slots in zip(actions, dropped)])


def predictive_abandoning(base: PredictiveAllocator, threshold: float, samples: bool,
                          make_room: bool = False) -> AbandoningPolicy:
    """FM-slack (``samples=True``: the share of FM's samples that fit; a task without samples is never
    hopeless) or LARA (the point estimate against ``threshold`` × steps left) with its abandon rule; one
    predictor call per step for all observations."""
    demand: Demand = base.demand
    estimates: dict[str, np.ndarray] = {}

    def score(observations: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
        remaining, drawn = demand.forecast(stack_observations(observations))
        estimates["remaining"] = remaining
        if samples:
            if drawn is None:  # no row has samples (every task in warm-up, or a predictor that does not sample)
                drawn = np.full((*np.shape(remaining), 0), np.nan)
            return [fits_share_score(obs, rows, threshold) for obs, rows in zip(observations, drawn)]
        return [demand_ratio_score(*_estimated(obs, row), row.astype(np.float64), threshold)
                for obs, row in zip(observations, remaining)]

    def decide(views: list[dict[str, np.ndarray]]) -> np.ndarray:
        return np.stack([base.decide(view, row) for view, row in zip(views, estimates["remaining"])])

    return AbandoningPolicy(decide, score, base.reset, make_room, base, threshold)


def edf_abandoning(threshold: float, make_room: bool = False) -> AbandoningPolicy:
    """EDF with its abandon rule: the task's own log-progress extrapolated linearly against ``threshold`` ×
    steps left."""
    base = EDFPolicy()

    def score(observations: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
        return [demand_ratio_score(*ready_and_left(obs), extrapolated_need(obs), threshold) for obs in observations]

    def decide(views: list[dict[str, np.ndarray]]) -> np.ndarray:
        return np.stack([base.act(view) for view in views])

    return AbandoningPolicy(decide, score, base.reset, make_room, base, threshold)


# name → (base allocator, predictor, the candidate thresholds of docs/research/abandon_rules.md, the threshold and the
# make_room setting chosen on val)
ABANDONING = {
    "slack-fm+abandon": ("slack", "fm", (0.05, 0.125, 0.25), FITS_SHARE_THRESHOLD, True),
    "lara+abandon": ("lara", "wls", (2.0, 1.5, 1.0), 2.0, True),
    # LARA's ranking over FM with FM-slack's rule (the share of FM's samples that fit), at FM-slack's val
    # choice: not chosen for LARA-FM itself (docs/research/jobs_twin.md plays it on users' jobs)
    "lara-fm+abandon": ("lara", "fm", (0.05, 0.125, 0.25), 0.05, True),
    "edf+abandon": ("edf", None, (2.0, 1.5, 1.0), 2.0, True),
}
"""The abandoning allocators by name. Candidates are listed most conservative first (abandoning least). Each is
registered in :data:`mara_agents.allocators.registry.POLICIES` with ``abandon=True``, which keeps it out of the
envs without the abandon action (the default evaluation, the live env)."""


def make_abandoning_policy(name: str, threshold: float | None = None, make_room: bool | None = None,
                           fm_checkpoint: str = "", device: str = "cpu", verify: bool = True) -> AbandoningPolicy:
    """An abandoning allocator of :data:`ABANDONING` by name, with its chosen ``threshold`` and ``make_room``
    unless given; ``ValueError`` naming an unknown name or a threshold that is not a positive number."""
    if name not in ABANDONING:
        raise ValueError(f"unknown abandoning allocator {name!r}; choose one of {sorted(ABANDONING)}")
    allocator, predictor, _, chosen, room = ABANDONING[name]
    value = chosen if threshold is None else threshold
    room = room if make_room is None else bool(make_room)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"threshold must be a positive number, got {value!r}")
    if predictor is None:
        return edf_abandoning(float(value), room)
    base = {"lara": LARAPolicy, "slack": SlackPolicy}[allocator](make_demand(predictor, fm_checkpoint, device, verify))
    return predictive_abandoning(base, float(value), predictor == "fm", room)
