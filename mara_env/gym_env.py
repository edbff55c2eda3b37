"""The Gymnasium front end: ``gym.make("MARA-v0")``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mara_env.config import MARAConfig, resolve_config
from mara_env.engine import action_picks
from mara_env.features import NODE_FEATURE_INDEX, NUM_GLOBAL_FEATURES, NUM_TASK_FEATURES, SLOT_NODE_FEATURE_INDEX, \
    SlotFeatures
from mara_env.flat import VALUE_BOUND, extra_space, flat_space, format_observation
from mara_env.frontend import RENDER_FPS, RENDER_MODES, FrontEnd
from mara_env.workload import Episode


def observation_spaces(num_slots: int, history_width: int) -> dict[str, spaces.Space]:
    """The observation entries shared by the Gymnasium and PettingZoo envs (all but the action mask)."""
    return {
        "tasks": spaces.Box(-VALUE_BOUND, VALUE_BOUND, (num_slots, NUM_TASK_FEATURES), np.float32),
        "history": spaces.Box(0.0, VALUE_BOUND, (num_slots, history_width), np.float32),
        "history_len": spaces.Box(0, history_width, (num_slots,), np.int64),
        "budget": spaces.Box(0.0, VALUE_BOUND, (num_slots,), np.float32),
        "global": spaces.Box(0.0, VALUE_BOUND, (NUM_GLOBAL_FEATURES,), np.float32),
    }


def node_spaces(config: MARAConfig) -> dict[str, spaces.Space]:
    """The ``nodes`` (M, 3) and ``slot_nodes`` (K, 2) entries the node options add (``mara_env.service``),
    each feature bounded by what it can hold (setup by max(c, 1), so that no bound is empty); none with the
    defaults."""
    if not config.node_options:
        return {}
    m, k, cost = config.num_nodes, config.max_active, max(config.switch_cost, 1)
    node_high = np.zeros(len(NODE_FEATURE_INDEX), dtype=np.float32)
    node_high[[NODE_FEATURE_INDEX[name] for name in ("speed", "last_pick", "setup_left")]] = (max(config.speeds), k,
                                                                                              cost)
    slot_high = np.zeros(len(SLOT_NODE_FEATURE_INDEX), dtype=np.float32)
    slot_high[[SLOT_NODE_FEATURE_INDEX[name] for name in ("setup_left", "last_node")]] = (cost, m)
    return {"nodes": spaces.Box(np.zeros((m, node_high.size), np.float32), np.tile(node_high, (m, 1))),
            "slot_nodes": spaces.Box(np.zeros((k, slot_high.size), np.float32), np.tile(slot_high, (k, 1)))}


def gym_action_space(config: MARAConfig) -> spaces.Space:
    """``MultiDiscrete([K + 1] * M)`` for ``actions="picks"``, ``Box(-1, 1, (K,))`` slot scores for ``"scores"``;
    with ``abandon=True`` ``MultiDiscrete([2K + 1] * M)`` and ``Box(-1, 1, (2K,))`` (slot, then abandon scores)."""
    choices = config.node_choices
    if config.actions == "picks":
        return spaces.MultiDiscrete([choices] * config.num_nodes)
    return spaces.Box(-1.0, 1.0, (choices - 1,), np.float32)


def node_mask(config: MARAConfig, occupied: np.ndarray) -> np.ndarray:
    """(…, K + 1) bool ((…, 2K + 1) with ``abandon=True``): one node's legal choices before any other node has
    chosen — idle, and serving (and abandoning) each occupied slot."""
    occupied = np.asarray(occupied, dtype=bool)
    parts = [np.ones(occupied.shape[:-1] + (1,), dtype=bool), occupied] + ([occupied] if config.abandon else [])
    return np.concatenate(parts, axis=-1)


def gym_observation_space(config: MARAConfig, history_width: int, extra: SlotFeatures | None = None) -> spaces.Space:
    """The Gymnasium env's observation space in ``config.observation``'s format, with ``extra`` slot features."""
    m, k, choices = config.num_nodes, config.max_active, config.node_choices
    flat = flat_space(k, config.flat_history, extra=extra, nodes=m if config.node_options else 0)
    if config.observation == "flat":
        return flat
    if config.observation == "rllib":
        return spaces.Dict({"observations": flat, "action_mask": spaces.Box(0, 1, (m * choices,), np.int8)})
    entries = {"action_mask": spaces.Box(0, 1, (m, choices), np.int8), **observation_spaces(k, history_width),
               **node_spaces(config)}
    if extra is not None:
        entries[extra.key] = extra_space(extra, k)
    return spaces.Dict(entries)


class MARAEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Allocate M compute nodes among training tasks that must reach a target loss before a deadline.

    ## Description
    Training tasks arrive over time (Bernoulli(p) per step during a window of T = 500 steps). Each follows a
    real, pre-recorded training-loss curve from the curve bank, has a target loss ε and an available time B
    (deadline d = arrival + B). At most K tasks are *active* in numbered slots; the rest wait in a FIFO
    admission queue (their deadline runs while they wait). Each step every node serves one active task or
    idles; a served task executes one optimisation batch and reveals its new cumulative-average loss. A task
    succeeds when that loss reaches ε, and expires at its deadline. The curve ahead of a task is never
    observed. This is the environment of Zhao et al. (2026), *MARA: Flow-Matching-Guided Multi-Agent
    Resource Allocation for Computational Resource Efficient Learning*.

    ## Action Space
    ``MultiDiscrete([K + 1] * M)``: entry i is node i's choice, 0 = idle, j = slot j − 1. With
    ``conflicts="idle"`` (default, the paper's) a node that picks an empty slot or a slot that a
    lower-indexed node already picked idles and ``info["conflicts"]`` counts it. With ``conflicts="repair"``
    such a node gets the next free occupied slot after its pick (or idles if none is left), so every action
    is a matching; ``info["repaired"]`` counts the moved picks. Wrong shapes, non-integers or out-of-range
    values raise ``ValueError`` naming the node and the value. ``action_masks()`` returns the flattened
    per-node mask for sb3-contrib's ``MaskablePPO``. With ``actions="scores"`` the action is instead a
    ``Box(-1, 1, (K,))`` of slot scores: the env serves the occupied slots with a positive score, highest
    first, at most M (a ranking, so every action is a matching; libraries with continuous actions use it); a
    NaN or a score outside [-1, 1] raises ``ValueError`` (clip a Gaussian policy's sample, as
    Stable-Baselines3 does). With ``abandon=True`` each node has 2K + 1 choices (``MultiDiscrete([2K + 1] * M)``):
    K + j abandons slot j − 1 — the task leaves as ``abandoned`` before any batch runs and the queue refills its
    slot in the same step; abandons claim slots as picks do, so conflicts resolve alike (a conflicting abandon
    idles, also with ``conflicts="repair"``). The scores action is then ``Box(-1, 1, (2K,))``, K slot scores
    followed by K abandon scores (``mara_env.abandon``, ``docs/environment.md``).

    ## Observation Space
    ``observation="dict"`` (default): a ``Dict``; all arrays are new on every call.

    | key           | shape         | dtype   | meaning                                                          |
    |---------------|---------------|---------|------------------------------------------------------------------|
    | action_mask   | (M, K + 1)    | int8    | per node: idle (column 0, always 1) and occupied slots           |
    | tasks         | (K, 11)       | float32 | per slot, see ``mara_env.features.TASK_FEATURES`` (0 when empty) |
    | history       | (K, H_max)    | float32 | cumulative-average losses observed so far, zero padded           |
    | history_len   | (K,)          | int64   | observations so far (= batches executed)                         |
    | budget        | (K,)          | float32 | available time B of the slot's task (0 when empty)               |
    | global        | (4,)          | float32 | M / M_max, active / K, queued / K, t / T                         |

    With ``node_speeds`` or ``switch_cost`` set, the dict also holds ``nodes`` (M, 3) (speed, last pick,
    setup left) and ``slot_nodes`` (K, 2) (setup left, last node), float32, and the flat vector carries them
    after the global features (``mara_env.features.NODE_FEATURES``, ``mara_env.service``).

    H_max is the length of the longest curve in the bank. ``observation="flat"``: one float32 ``Box`` of
    K · (11 + H) + 4 values, the last H = ``flat_history`` losses as log-ratios to the current one (see
    ``mara_env.flat``); the mask comes from ``action_masks()``. ``observation="rllib"``:
    ``{"observations": <flat>, "action_mask": int8 (M · (K + 1),)}``, the keys RLlib's action-masking
    module reads.

    ## Rewards
    ``reward="shaped"`` (default): r_t = (tasks that succeed in step t) + β (Φ_{t+1} − Φ_t), β = 0.1, with the
    log-progress potential Φ of paper Eq. 13 summed over active tasks. Φ is zero at both episode ends, so the
    undiscounted return equals the number of successful tasks exactly. ``reward="sparse"``: the success
    count only.

    ## Starting State
    Time 0 of an episode drawn from ``task_set`` with ``reset(seed=...)``'s generator, or the next episode
    of the ``workload`` file (``reset(options={"episode": i})`` picks one).

    ## Episode End
    Terminates once the arrival window has passed and every task has succeeded or expired (episodes with no
    task end at T). There is no truncation: every episode is finite (at most T + max B steps); wrap with
    ``gymnasium.wrappers.TimeLimit`` if you want one. At termination ``info["episode_metrics"]`` holds the
    success rate, utilisation, queue-full fraction, mean waiting tasks and mean steps to 4 observations, and
    ``info["task_outcomes"]`` each task's outcome (``succeeded``, ``expired`` or, with ``abandon=True``,
    ``abandoned``) in the episode's task order (also :meth:`task_outcomes`, at any time). With ``abandon=True``
    every info also counts ``abandoned`` tasks, and the episode metrics add ``abandoned``,
    ``abandoned_feasible`` and the wasted node-steps (``mara_env.abandon.abandon_metrics``).
    A ``step`` after termination (or before the first ``reset``) raises ``RuntimeError``.

    ## Arguments
    ``gym.make("MARA-v0", render_mode=None, slot_features=None, **fields)`` where fields are those of
    :class:`mara_env.config.MARAConfig` (``num_nodes=7, max_active=10, arrival_prob=0.04,
    arrival_window=500, task_set="id", reward="shaped", shaping_beta=0.1, bank=None, workload=None,
    conflicts="idle", observation="dict", flat_history=16, node_speeds=None, switch_cost=0,
    fairness_metrics=False, abandon=False, ...``), or ``config=MARAConfig(...)``.
    ``render_mode="ansi"`` returns a text table of slots, queue and nodes; ``"rgb_array"`` a Gantt chart of
    the episode so far (nodes × time above, task windows with successes and expiries below) as an RGB
    array; ``"human"`` shows that chart in a matplotlib window after every step. ``slot_features`` (a
    :class:`mara_env.features.SlotFeatures`) appends per-slot features to every observation format
    (``MARA-Forecast-v0`` of ``mara_agents`` passes a predictor's forecast).

    ## Version History
    * v0: initial release; the opt-in ``abandon`` action leaves the default dynamics as they were.
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": RENDER_FPS}

    def __init__(self, render_mode: str | None = None, config: MARAConfig | None = None,
                 slot_features: SlotFeatures | None = None, **overrides: Any):
        self.config = resolve_config(config, overrides)
        self.frontend = FrontEnd(self.config, render_mode)
        self.render_mode = render_mode
        self.engine = self.frontend.engine
        self.slot_features = slot_features
        self.action_space = gym_action_space(self.config)
        self.observation_space = gym_observation_space(self.config, self.engine.sim.history_width, slot_features)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        info = self.frontend.reset(self.np_random, options)
        if self.render_mode == "human":
            self.render()
        return self._observe(), info

    def step(self, action: Any):
        self.frontend.check_can_step()
        occupied = self.engine.sim.occupied if self.config.actions == "scores" else None
        picks = action_picks(self.config, action, occupied).tolist()
        reward, terminated, info = self.frontend.step(picks)
        if self.render_mode == "human":
            self.render()
        return self._observe(), reward, terminated, False, info

    def _observe(self) -> Any:
        observation = self.engine.sim.observation()
        values = None if self.slot_features is None else self.slot_features(observation)
        return format_observation(observation, self.config.observation, self.config.flat_history,
                                  self.slot_features, values)

    def action_masks(self) -> np.ndarray:
        """Flattened (M · (K + 1),) boolean mask (M · (2K + 1) with ``abandon=True``), the format sb3-contrib's
        MaskablePPO expects."""
        if not self.frontend.started:
            raise RuntimeError("call reset() before action_masks()")
        return np.tile(node_mask(self.config, self.engine.sim.occupied), self.config.num_nodes)

    @property
    def episode(self) -> Episode:
        """The episode being played (its tasks' arrivals, curves, targets and budgets, as a workload holds them)."""
        if not self.frontend.started:
            raise RuntimeError("call reset() before reading the episode")
        return self.engine.sim.episode

    def task_outcomes(self) -> tuple[str, ...]:
        """Each task's status by name (``succeeded``, ``expired``, ``running``, ``queued`` or ``not arrived``),
        in the episode's task order; at termination ``info["task_outcomes"]`` holds the same."""
        if not self.frontend.started:
            raise RuntimeError("call reset() before task_outcomes()")
        return self.engine.sim.task_outcomes()

    def privileged_true_remaining(self) -> np.ndarray:
        """Privileged, for training-time experts and critics only (never a deployed policy's input): (K,)
        float32, the batches each occupied slot's task still needs before its loss reaches ε on the curve the
        simulator replays, 0 for empty slots. The curve ahead of a task is never part of the observation;
        imitation experts (``mara_agents.training.experts``) read it here."""
        if not self.frontend.started:
            raise RuntimeError("call reset() before privileged_true_remaining()")
        return self.engine.sim.true_remaining()

    def render(self) -> str | np.ndarray | None:
        return self.frontend.render()

    def close(self) -> None:
        self.frontend.close()
