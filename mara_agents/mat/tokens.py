"""Observation → MAT input tokens (paper §4.2: "every agent receives the same global observation").

One token per task slot, built only from the observation contract (``mara_env.features``) and the
predictor's remaining-batch estimates, plus one global token.  Features are scaled to O(1) here, once, so
the network needs no input normalisation and rollout, training and evaluation see identical inputs.
Works on single observations (K, ·) and on stacks (..., K, ·) alike.

**A task with fewer than 4 observations has no estimate.**  For such a task the predictor returns its cap
(about 2·B, :mod:`mara_agents.predictors.demand`), a placeholder rather than a forecast.  Shown as a demand,
the cap makes a newly admitted task look more hopeless than a task that truly cannot finish but whose curve FM
still extrapolates below its target, so a policy that ranks tasks by slack may never probe it.  So a slot's
:data:`ESTIMATE_FEATURES` are 0 until its task has ``MIN_OBSERVATIONS`` observations (the predictor's own
readiness rule), the usual encoding of a missing value beside its indicator (``warmup`` < 1);
``mara_agents/checkpoints/README.md`` ("Why a new task shows no demand estimate") has the episode that showed
it and the check behind the rule, on `val` curves only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from mara_agents.rules.nodes import SwitchCost
from mara_agents.predictors.base import MIN_OBSERVATIONS
from mara_agents.predictors.demand import Demand
from mara_agents.rules.hopeless import FITS_SHARE_THRESHOLD, dropped_slots, fits_share_score
from mara_agents.rules.slack import node_slack_action, slack_order
from mara_env.config import MARAConfig
from mara_env.features import NODE_FEATURE_INDEX, NUM_GLOBAL_FEATURES, SLOT_NODE_FEATURE_INDEX, TASK_FEATURE_INDEX

_F = TASK_FEATURE_INDEX
# Steps are divided by the env's default arrival window T, so deadlines and demands share one unit.  It is the
# window every shipped checkpoint was trained with, so it stays fixed when a user changes an env's window.
STEP_SCALE = float(MARAConfig.__dataclass_fields__["arrival_window"].default)
LOG_LR_CENTRE = float(np.log(1e-3))

SLOT_FEATURES: tuple[str, ...] = (
    "present",            # 1 occupied, 0 empty (the slot is masked anyway)
    "remaining_time",     # (deadline − t) / B
    "batches_done",       # s / B
    "log_loss_ratio",     # log(L / ε), clipped to [−5, 5]
    "warmup",             # min(observations / 4, 1); below 1 the four estimate features are 0
    "queue_wait",         # admission wait / B
    "steps_left",         # (deadline − t) / T: the remaining deadline in absolute steps
    "predicted",          # predicted remaining batches / T
    "predicted_frac",     # predicted remaining batches / B, clipped to [0, 2]
    "slack",              # (steps left − predicted) / B, clipped to [−2, 2]: negative = cannot finish alone
    "fits_alone",         # 1 if predicted ≤ steps left
    "log_batch_size",     # log batch size / 5
    "log_lr",             # log lr − log 1e-3
    "nodes",              # M / M_max   (global features, repeated on every slot)
    "active",             # active tasks / K
    "queue",              # queued tasks / K
    "time",               # t / T
)
NUM_SLOT_FEATURES = len(SLOT_FEATURES)
ESTIMATE_FEATURES: tuple[str, ...] = ("predicted", "predicted_frac", "slack", "fits_alone")  # 0 until 4 observations
NUM_GLOBAL_TOKEN_FEATURES = NUM_GLOBAL_FEATURES

# With the env's node options (``node_speeds``, ``switch_cost``) the observation carries ``nodes`` and
# ``slot_nodes``; the tokens then gain two slot columns and one token per node.
SLOT_NODE_TOKEN_FEATURES: tuple[str, ...] = (
    "setup_left",         # setup steps before the task runs if its last node serves it next, min(·, 10) / 10
    "served_last",        # 1 if a node served the task at the previous step
)
NODE_TOKEN_FEATURES: tuple[str, ...] = (
    "log_speed",          # log2 of the batches the node runs per step (0 at speed 1)
    "serving",            # 1 if the node served a task at the previous step
    "setup_left",         # setup steps that task still needs here, min(·, 10) / 10
)
"""Each node token's features; K more columns follow, the node's *stay* indicator over the slots (1 at the
slot whose task it served at the previous step), which the model adds to that node's pointer logits with a
learned weight: keeping a task on its node saves the setup a move would cost."""
NUM_NODE_TOKEN_FEATURES = len(NODE_TOKEN_FEATURES)
SETUP_SCALE = 10.0


class Tokens(NamedTuple):
    """MAT inputs: ``slots`` (..., K, NUM_SLOT_FEATURES), ``glob`` (..., G), ``present`` (..., K) bool, and
    with the env's node options ``nodes`` (..., M, NUM_NODE_TOKEN_FEATURES + K) (None without them); with the
    FM-slack prior, one more column each on ``slots`` (the rank) and ``nodes`` (the planned choice).

    The one type the model's ``act`` and ``evaluate``, the privileged critic and the training batches take:
    NumPy arrays as :func:`build_tokens` makes them, tensors after :meth:`to`.
    """

    slots: Any
    glob: Any
    present: Any
    nodes: Any = None

    def to(self, device: torch.device | str) -> Tokens:
        """The same tokens as tensors on ``device``."""
        return self.apply(lambda part: torch.as_tensor(part, device=device))

    def select(self, rows: Any) -> Tokens:
        """The tokens of the given rows (an index, a slice or a boolean mask over the leading axis)."""
        return self.apply(lambda part: part[rows])

    def apply(self, fn: Any) -> Tokens:
        """``fn`` applied to every part there is (``nodes`` stays None without node options)."""
        return Tokens(*(None if part is None else fn(part) for part in self))

    @staticmethod
    def join(many: Sequence[Tokens], fn: Any) -> Tokens:
        """One :class:`Tokens` whose every part is ``fn`` (e.g. ``torch.cat``) of the parts of ``many``."""
        return Tokens(*(None if parts[0] is None else fn(list(parts)) for parts in zip(*many)))


def _rows(observation: Mapping[str, np.ndarray], predicted: np.ndarray,
          keys: Sequence[str]) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """One observation or a stack of them as a list of single observations (only ``keys``) and their (R, K)
    estimates."""
    history_len = np.asarray(observation["history_len"])
    flat = {key: np.asarray(observation[key]).reshape(-1, *np.shape(observation[key])[history_len.ndim - 1:])
            for key in keys}
    estimates = np.asarray(predicted).reshape(-1, history_len.shape[-1])
    return [{key: value[row] for key, value in flat.items()} for row in range(len(estimates))], estimates


def slack_ranks(observation: Mapping[str, np.ndarray], predicted: np.ndarray) -> np.ndarray:
    """(..., K) float32: each slot's position in FM-slack's serving order (0 = served first,
    :func:`~mara_agents.rules.slack.slack_order`); empty slots read K."""
    rows, estimates = _rows(observation, predicted, ("tasks", "budget", "history_len"))
    ranks = np.full(estimates.shape, estimates.shape[1], dtype=np.float32)
    for row, (single, estimate) in enumerate(zip(rows, estimates)):
        order = slack_order(single, estimate)
        ranks[row, order] = np.arange(order.size)
    return ranks.reshape(np.shape(observation["history_len"]))


def slack_plans(observation: Mapping[str, np.ndarray], predicted: np.ndarray,
                switch_cost: int | None = None) -> np.ndarray:
    """(..., M) float32: the joint action of FM-slack on nodes (:func:`~mara_agents.rules.slack.node_slack_action`)
    for each observation with node features, each decided on its own, with c as ``switch_cost`` gives it (the
    setting a policy is trained and played in) or, when None, as that observation shows it, else unknown.  A
    known c matters: with c unknown a running task never moves, where FM-slack, which remembers c, moves the
    tightest task to a faster node when that pays."""
    rows, estimates = _rows(observation, predicted, ("tasks", "budget", "history_len", "nodes", "slot_nodes"))
    plans = [node_slack_action(single, estimate, SwitchCost(switch_cost).view(single))
             for single, estimate in zip(rows, estimates)]
    return np.asarray(plans, dtype=np.float32).reshape(np.shape(observation["nodes"])[:-1])


def abandon_plans(observation: Mapping[str, np.ndarray], samples: np.ndarray | None, num_nodes: int) -> np.ndarray:
    """(..., K) float32: 1 at the slots that FM-slack + abandon on ``num_nodes`` nodes (``slack-fm+abandon``: the
    share of FM's ``samples`` (..., K, S) that fit below :data:`~mara_agents.rules.hopeless.FITS_SHARE_THRESHOLD`,
    only to make room) gives up in each observation, else 0; all 0 when no row has samples."""
    shape = np.shape(observation["history_len"])
    if samples is None:
        return np.zeros(shape, dtype=np.float32)
    rows, _ = _rows(observation, np.zeros(shape), ("tasks", "budget", "history_len", "global"))
    drawn = np.asarray(samples).reshape(len(rows), shape[-1], -1)
    plans = np.zeros((len(rows), shape[-1]), dtype=np.float32)
    for row, (single, draws) in enumerate(zip(rows, drawn)):
        score = fits_share_score(single, draws, FITS_SHARE_THRESHOLD)
        plans[row, dropped_slots(single, score, True, num_nodes)] = 1.0
    return plans.reshape(shape)


def build_tokens(observation: Mapping[str, np.ndarray], predicted: np.ndarray, with_slack_ranks: bool = False,
                 switch_cost: int | None = None, abandon_plan: np.ndarray | None = None) -> Tokens:
    """Tokens for one observation or a stack of them; ``predicted`` is shaped like ``history_len``.

    ``with_slack_ranks`` appends one more column, :func:`slack_ranks`, for a MAT that puts FM-slack's ranking
    into its pointer logits (``MATHyperParameters.slack_prior``); the model reads it apart from the features.
    With node options it also appends one column to the node tokens, FM-slack's choice for each node
    (:func:`slack_plans`), so that the prior says *where* as well as *which*.  ``abandon_plan``
    (:func:`abandon_plans`), when given with ``with_slack_ranks``, is one more slot column after the rank, for
    the prior of a MAT with the abandon head (``MATModel.abandon_prior``).
    """
    tasks = np.asarray(observation["tasks"], dtype=np.float32)
    glob = np.asarray(observation["global"], dtype=np.float32)
    budget = np.maximum(np.asarray(observation["budget"], dtype=np.float32), 1.0)
    present = tasks[..., _F["present"]] > 0
    predicted = np.where(present, np.asarray(predicted, dtype=np.float32), 0.0)
    steps_left = tasks[..., _F["remaining_time"]] * budget
    # The predictor's own readiness rule: below it the "estimate" is the cap placeholder.
    estimated = (np.asarray(observation["history_len"]) >= MIN_OBSERVATIONS).astype(np.float32)
    columns = [
        tasks[..., _F["present"]],
        tasks[..., _F["remaining_time"]],
        tasks[..., _F["batches_done"]],
        np.clip(tasks[..., _F["log_loss_ratio"]], -5.0, 5.0),
        tasks[..., _F["warmup"]],
        tasks[..., _F["queue_wait"]],
        steps_left / STEP_SCALE,
        estimated * predicted / STEP_SCALE,
        estimated * np.clip(predicted / budget, 0.0, 2.0),
        estimated * np.clip((steps_left - predicted) / budget, -2.0, 2.0),
        estimated * (predicted <= steps_left).astype(np.float32),
        tasks[..., _F["log_batch_size"]] / 5.0,
        np.where(present, tasks[..., _F["log_lr"]] - LOG_LR_CENTRE, 0.0),
    ]
    slots = np.stack(columns, axis=-1)
    repeated = np.broadcast_to(glob[..., None, :], slots.shape[:-1] + (glob.shape[-1],))
    slots = np.concatenate([slots, repeated, *slot_node_columns(observation)], axis=-1) * present[..., None]
    if with_slack_ranks:
        slots = np.concatenate([slots, slack_ranks(observation, predicted)[..., None]], axis=-1)
        if abandon_plan is not None:
            slots = np.concatenate([slots, np.asarray(abandon_plan, dtype=np.float32)[..., None]], axis=-1)
    nodes = node_tokens(observation)
    if with_slack_ranks and nodes is not None:
        nodes = np.concatenate([nodes, slack_plans(observation, predicted, switch_cost)[..., None]], axis=-1)
    return Tokens(slots.astype(np.float32), glob, present, nodes)


def slot_node_columns(observation: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The :data:`SLOT_NODE_TOKEN_FEATURES` columns (..., K, 1) each, none without node options."""
    if "slot_nodes" not in observation:
        return []
    slot_nodes = np.asarray(observation["slot_nodes"], dtype=np.float32)
    setup = np.minimum(slot_nodes[..., SLOT_NODE_FEATURE_INDEX["setup_left"]], SETUP_SCALE) / SETUP_SCALE
    served = (slot_nodes[..., SLOT_NODE_FEATURE_INDEX["last_node"]] > 0).astype(np.float32)
    return [setup[..., None], served[..., None]]


def node_tokens(observation: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """(..., M, NUM_NODE_TOKEN_FEATURES + K) node tokens with each node's stay indicator, or None without node
    options."""
    if "nodes" not in observation:
        return None
    nodes = np.asarray(observation["nodes"], dtype=np.float32)
    num_slots = np.shape(observation["history_len"])[-1]
    last_pick = nodes[..., NODE_FEATURE_INDEX["last_pick"]].astype(np.int64)
    stays = (last_pick[..., None] == np.arange(1, num_slots + 1)).astype(np.float32)
    features = [np.log2(np.maximum(nodes[..., NODE_FEATURE_INDEX["speed"]], 1.0)), (last_pick > 0).astype(np.float32),
                np.minimum(nodes[..., NODE_FEATURE_INDEX["setup_left"]], SETUP_SCALE) / SETUP_SCALE]
    return np.concatenate([np.stack(features, axis=-1), stays], axis=-1)


def mat_inputs(observation: Mapping[str, np.ndarray], demand: Demand, with_slack_ranks: bool,
               device: torch.device | str, switch_cost: int | None = None, abandon_nodes: int = 0) -> Tokens:
    """MAT's inputs for a stack of N observations: the demand stage's estimates (one batched predictor call), the
    tokens, as tensors on ``device``.  The one path from observation to policy: evaluation, PPO rollouts and
    imitation all take it.  ``abandon_nodes`` (M, for a MAT with the abandon head; 0 without) with
    ``with_slack_ranks`` adds the abandon plan column (:func:`abandon_plans`), from the same predictor call's
    samples."""
    if abandon_nodes and with_slack_ranks:
        predicted, samples = demand.forecast(observation)
        plan = abandon_plans(observation, samples, abandon_nodes)
        return build_tokens(observation, predicted, True, switch_cost, plan).to(device)
    return build_tokens(observation, demand(observation), with_slack_ranks, switch_cost).to(device)
