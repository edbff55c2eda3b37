"""What every front end shares: the bank, where episodes come from, the simulator and the reward, and the
checks that turn an action into the picks the simulator applies.

The Gymnasium and PettingZoo environments are thin adapters over :class:`Engine`; they differ only in how
actions arrive (one joint action, or one node at a time) and how observations are shaped. The native vector
env and the live env use the same checks (:func:`action_picks`, :func:`resolve_conflicts`,
:func:`reset_info`) and the same reward and info (:mod:`mara_env.dynamics`); the live backend steps its
simulator through :func:`advance`, as :class:`Engine` does.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from curves.bank import DEFAULT_BANK, CurveBank, load_bank
from mara_env.actions import repair_choices, repair_picks, scores_to_choices, scores_to_picks
from mara_env.config import MARAConfig
from mara_env.dynamics import INFO_KEYS, step_info, team_reward
from mara_env.simulator import Simulator, StepOutcome
from mara_env.tasksets import TASK_SETS
from mara_env.workload import Episode, Workload, load_workload

__all__ = ["INFO_KEYS", "Engine", "EpisodeSource", "action_picks", "advance", "check_picks", "check_scores",
           "load_sources", "reset_info", "resolve_conflicts"]
RESET_OPTIONS = ("episode",)


@lru_cache(maxsize=8)
def cached_bank(path: str) -> CurveBank:
    """Load each bank once per process: vector envs and evaluation workers create many environments."""
    return load_bank(path)


@lru_cache(maxsize=32)
def cached_workload(path: str, bank_path: str) -> Workload:
    """Load and check each workload file once per process."""
    return load_workload(path, cached_bank(bank_path))


class EpisodeSource:
    """Where one environment's episodes come from: a workload file replayed in turn (or by index), or fresh
    random draws from the configured task set."""

    def __init__(self, config: MARAConfig, bank: CurveBank, workload: Workload | None):
        self.config = config
        self.bank = bank
        self.workload = workload
        self._replayed = 0

    def next(self, rng: np.random.Generator, options: Mapping[str, Any] | None) -> Episode:
        """A workload episode (``options={"episode": i}``, else the next in turn), the given ``Episode``
        (``options={"episode": episode}``) or a fresh random one drawn with ``rng``.

        ``options`` must be ``None`` or a mapping (:func:`reset_episode_option`); an index needs a workload file
        and must lie in it, an ``Episode`` must use curves of this env's bank that cover its budgets.  Anything
        else raises ``TypeError``/``ValueError`` naming the option.
        """
        episode = reset_episode_option(options)
        if isinstance(episode, Episode):
            episode.check_against(self.bank, "reset(options={'episode': ...})")
            return episode
        if self.workload is not None:
            episodes = self.workload.episodes
            index = self._replayed % len(episodes) if episode is None else episode
            if not 0 <= index < len(episodes):
                raise ValueError(f"options['episode'] must be an index in [0, {len(episodes)}), got {index!r}")
            self._replayed = int(index) + 1
            return episodes[int(index)]
        if episode is not None:
            raise ValueError(f"options['episode'] = {episode!r} is an index into a workload file, but this env "
                             f"draws random episodes (pass workload=... or an Episode)")
        cfg = self.config
        return TASK_SETS[cfg.task_set].sample(self.bank, rng, cfg.arrival_prob, cfg.arrival_window,
                                              cfg.curve_splits)


def reset_episode_option(options: Mapping[str, Any] | None) -> Episode | int | None:
    """The ``"episode"`` entry of ``reset``'s options (``None`` when absent): an ``Episode`` or an integer
    index.  Options that are not a mapping or an entry of another kind raise ``TypeError`` naming it.

    A key other than ``"episode"`` is ignored with a warning that names it: PettingZoo's API tests reset
    with ``options={"options": 1}`` to check that any options are taken, so refusing them would fail those.
    """
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"reset options must be None or a dict such as {{'episode': 0}}, got {options!r}")
    unknown = sorted(map(repr, set(options) - set(RESET_OPTIONS)))
    if unknown:
        warnings.warn(f"reset options: ignoring unknown key(s) {', '.join(unknown)}; MARA reads only "
                      f"{', '.join(map(repr, RESET_OPTIONS))}", UserWarning, stacklevel=3)
    episode = options.get("episode")
    if episode is None or isinstance(episode, Episode):
        return episode
    if isinstance(episode, bool) or not isinstance(episode, (int, np.integer)):
        raise TypeError(f"options['episode'] must be an episode index (int) or an Episode, got {episode!r}")
    return int(episode)


def load_sources(config: MARAConfig) -> tuple[str, CurveBank, Workload | None]:
    """The bank path, the bank and the workload (or ``None``) a config names, each loaded once per process."""
    bank_path = str(config.bank or DEFAULT_BANK)
    workload = cached_workload(str(config.workload), bank_path) if config.workload else None
    return bank_path, cached_bank(bank_path), workload


class Engine:
    """Episode source + simulator + reward for one environment instance."""

    def __init__(self, config: MARAConfig):
        self.config = config
        self.bank_path, self.bank, self.workload = load_sources(config)
        self.source = EpisodeSource(config, self.bank, self.workload)
        self.sim = Simulator(config, self.bank)

    def reset(self, rng: np.random.Generator, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start an episode; returns the reset info (all step-info counters at zero)."""
        self.sim.load(self.source.next(rng, options))
        return reset_info(self.config, 0)

    def step(self, picks: list[int], repaired: int | None = None) -> tuple[float, bool, dict[str, Any]]:
        """Advance the simulator by the applied ``picks`` (``repaired``: how many :func:`resolve_conflicts`
        moved); returns (team reward, terminated, info).

        At termination the info also holds ``episode_metrics`` and ``task_outcomes`` (:func:`advance`).
        """
        return advance(self.sim, picks, repaired)

    def render_text(self) -> str:
        """An ASCII table of slots, queue and nodes (``render_mode="ansi"``)."""
        sim = self.sim
        lines = [f"t={sim.t}  queue={len(sim.queue)}  successes={sim.totals['successes']}  "
                 f"expirations={sim.totals['expirations']}",
                 f"{'slot':>4} {'curve':<32} {'batches':>9} {'left':>5} {'loss':>8} {'eps':>8}  nodes"]
        served = {slot: node for node, slot in enumerate(sim.last_served)}
        for row in sim.describe_slots():
            node = served.get(row["slot"])
            lines.append(f"{row['slot']:>4} {row['curve']:<32} {row['batches']:>4}/{row['budget']:<4} "
                         f"{row['left']:>5} {row['loss']:>8.4f} {row['eps']:>8.4f}  "
                         f"{'' if node is None else 'served'}")
        lines.append(f"busy nodes last step: {len(sim.last_served)}/{sim.num_nodes}")
        return "\n".join(lines) + "\n"


def advance(sim: Simulator, picks: list[int], repaired: int | None = None) -> tuple[float, bool, dict[str, Any]]:
    """Step ``sim`` by the applied ``picks`` and account for the step as every front end does: returns (team
    reward, terminated, info), ``repaired`` being how many picks :func:`resolve_conflicts` moved.

    At termination the info also holds ``episode_metrics`` (:func:`mara_env.dynamics.episode_metrics`) and
    ``task_outcomes`` (each task's status by name, in the episode's task order).
    """
    outcome: StepOutcome = sim.step(picks)
    reward = team_reward(sim.config, outcome.successes, outcome.potential_before, outcome.potential_after)
    info = step_info(outcome.successes, outcome.expirations, outcome.conflicts, repaired,
                     outcome.abandoned if sim.config.abandon else None)
    if outcome.terminated:
        info["episode_metrics"] = sim.metrics()
        info["task_outcomes"] = sim.task_outcomes()
    return reward, outcome.terminated, info


def check_picks(action: Any, shape: tuple[int, ...], num_slots: int, name: str = "action",
                what: str = "one choice per node", abandon: bool = False) -> np.ndarray:
    """``action`` as an int64 array of node choices after checking its shape, integrality and range
    ([0, K], or [0, 2K] with ``abandon``).

    A legal-shaped action is never rejected for conflicts (those become idle and are counted), but a wrong
    shape, a value that is not a whole number (a fraction, NaN, a bool, a string) or an out-of-range value is
    a programming error and raises a ``ValueError`` naming ``name``, the node and the value. ``shape`` may
    carry leading batch axes (the vector env's (N, M)); then the message names the sub-envs.
    """
    array = np.asarray(action)
    if array.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} — {what} — got shape {array.shape}: {action!r}")
    if array.dtype.kind not in "iu" and (array.dtype.kind != "f" or not np.all(np.mod(array, 1) == 0)):
        raise ValueError(f"{name} must hold integers, got {_first_non_integer(array)} (dtype {array.dtype})")
    picks = array.astype(np.int64)
    highest = 2 * num_slots if abandon else num_slots
    if picks.size and (picks.min() < 0 or picks.max() > highest):
        outside = (picks < 0) | (picks > highest)
        if picks.ndim == 1:
            node = int(np.flatnonzero(outside)[0])
            shown = f"{picks[node]} for node {node}: {picks.tolist()}"
        else:
            shown = f"out-of-range picks in sub-envs {np.flatnonzero(outside.any(axis=-1)).tolist()}"
        meaning = f"0 = idle, j = slot j-1{f', {num_slots}+j = abandon slot j-1' if abandon else ''}"
        raise ValueError(f"{name} values must lie in [0, {highest}] ({meaning}), got {shown}")
    return picks


def _first_non_integer(array: np.ndarray) -> str:
    """Where the first entry that is not a whole number is, and what it is (the error path of check_picks)."""
    if array.dtype.kind != "f":
        return f"{array.flat[0].item()!r}" if array.size else "nothing"
    index = np.unravel_index(int(np.flatnonzero(~(np.mod(array, 1) == 0))[0]), array.shape)
    where = f"node {index[-1]}" + (f" of sub-env {index[0]}" if array.ndim > 1 else "")
    return f"{array[index].item()!r} for {where}"


def action_picks(config: MARAConfig, action: Any, occupied: np.ndarray | None, batch: int | None = None,
                 name: str = "action") -> np.ndarray:
    """The node picks (…, M) int64 an action asks for, after the checks of its ``config.actions`` mode:
    ``picks`` are checked by :func:`check_picks`; ``scores`` by :func:`check_scores`, then ranked into a
    matching over the ``occupied`` slots (:func:`mara_env.actions.scores_to_picks`, or
    :func:`~mara_env.actions.scores_to_choices` with ``abandon=True``; only this mode reads ``occupied``; with
    ``node_speeds`` the highest-ranked slot goes to the fastest node, ties to the lower index). ``batch`` is the
    number of sub-envs of a vector env (``None``: one env)."""
    m, k = config.num_nodes, config.max_active
    lead = () if batch is None else (batch,)
    if config.actions == "scores":
        rank = scores_to_choices if config.abandon else scores_to_picks
        picks = rank(check_scores(action, lead + (config.node_choices - 1,), name), occupied, m)
        return picks if config.node_speeds is None else picks[..., _rank_of_node(config.speeds)]
    what = "one choice per node" if batch is None else "one choice per sub-env and node"
    return check_picks(action, lead + (m,), k, name, what, config.abandon)


@lru_cache(maxsize=32)
def _rank_of_node(speeds: tuple[int, ...]) -> np.ndarray:
    """Each node's place when the nodes are ordered fastest first (ties to the lower index)."""
    rank = np.argsort(np.argsort(-np.asarray(speeds), kind="stable"), kind="stable")
    rank.flags.writeable = False
    return rank


def resolve_conflicts(config: MARAConfig, picks: np.ndarray, occupied: np.ndarray) -> tuple[np.ndarray, Any]:
    """The picks the simulator applies, and how many were moved (…,) int64, ``None`` with ``conflicts="idle"``.

    ``conflicts="idle"`` applies the picks as they are (the simulator idles every conflicting node);
    ``"repair"`` moves each conflicting pick to a free occupied slot first (:func:`mara_env.actions.repair_picks`;
    with ``abandon=True`` :func:`~mara_env.actions.repair_choices`, which idles a conflicting abandon).
    """
    if config.conflicts != "repair":
        return picks, None
    applied = repair_choices(picks, occupied) if config.abandon else repair_picks(picks, occupied)
    return applied, np.count_nonzero(applied != picks, axis=-1).astype(np.int64)


def reset_info(config: MARAConfig, zero: Any) -> dict[str, Any]:
    """The reset info: every step-info counter (``repaired`` too with ``conflicts="repair"``, ``abandoned`` with
    ``abandon=True``) set to ``zero``."""
    return step_info(zero, zero, zero, zero if config.conflicts == "repair" else None,
                     zero if config.abandon else None)


def check_scores(action: Any, shape: tuple[int, ...], name: str = "action") -> np.ndarray:
    """``actions="scores"``: the slot scores (and abandon scores) as float64 after checking their shape,
    finiteness and range [-1, 1] (the action space); ``ValueError`` naming ``name`` otherwise. ``shape`` may
    carry batch axes."""
    array = np.asarray(action)
    scores = array.astype(np.float64) if array.dtype.kind in "iuf" else None
    if scores is None or scores.shape != tuple(shape) or not np.all(np.isfinite(scores)):
        raise ValueError(f"{name} must be {'x'.join(map(str, shape))} finite slot scores (actions='scores'), "
                         f"got {action!r}")
    if not np.all(np.abs(scores) <= 1.0):
        bad = np.unravel_index(int(np.flatnonzero(np.abs(scores) > 1.0)[0]), scores.shape)
        raise ValueError(f"{name} scores must lie in [-1, 1] (the action space), got {scores[bad].item()} "
                         f"for slot {bad[-1]}" + (f" of sub-env {bad[0]}" if scores.ndim > 1 else ""))
    return scores
