"""The simulator core: one pure-NumPy state machine behind both the Gymnasium and the PettingZoo env.

Step order, fixed and tested (tests/env/test_dynamics.py; phase 0 in tests/env/test_abandon.py):

0. with ``abandon=True``: the tasks that standing abandon choices name leave as abandoned (they run no batch);
1. apply the joint action: every selected task executes one batch and its new cumulative-average loss is observed;
2. tasks with L ≤ ε succeed and leave;
3. tasks whose deadline is reached (t + 1 ≥ d) without success expire and leave, queued ones included;
4. t += 1;
5. arrivals of the new step join the FIFO admission queue;
6. the queue fills free slots, lowest slot index first;
7. observe.

With a node option (``node_speeds``, ``switch_cost``; ``MARAConfig.node_options``) phase 1 follows
:mod:`mara_env.service` instead: a served task spends the step in setup or runs up to its node's speed in
batches, stopping at its first success.

Slot identity is stable while a task lives, so policies may track a task by its slot.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from curves.bank import CurveBank
from mara_env.abandon import feasible_alone
from mara_env.config import MARAConfig
from mara_env.curve_table import curve_table
from mara_env.dynamics import (ABANDONED, ACTIVE, EXPIRED, FUTURE, QUEUED, SERVED_FEATURES, STATUS_NAMES, SUCCEEDED,
                                TOTALS, episode_metrics, first_crossings, global_features, option_metrics,
                                progress_table, queue_wait, remaining_time, standing_choices_one, standing_picks_one,
                                task_outcomes)
from mara_env.features import NUM_TASK_FEATURES
from mara_env.features import TASK_FEATURE_INDEX as _F
from mara_env.service import (batch_allowance, became_ready, history_writes, loss_window, node_views, run_batches,
                              setup_steps)
from mara_env.shaping import potential
from mara_env.workload import Episode

__all__ = ["FUTURE", "QUEUED", "ACTIVE", "SUCCEEDED", "EXPIRED", "ABANDONED", "Simulator", "StepOutcome",
           "batch_allowance", "oracle_successes"]


class StepOutcome(NamedTuple):
    """What one simulator step produced, before any reward shaping is applied by the front end."""

    successes: int
    expirations: int
    conflicts: int
    potential_before: float
    potential_after: float
    terminated: bool
    abandoned: int = 0


class Simulator:
    """State of one episode; :meth:`load` starts an episode, :meth:`step` advances it by one time step."""

    def __init__(self, config: MARAConfig, bank: CurveBank):
        self.config = config
        self.bank = bank
        self.num_nodes = config.num_nodes
        self.num_slots = config.max_active
        self.history_width = bank.max_length
        self.node_options = config.node_options
        self.abandon = config.abandon
        self.speeds = np.array(config.speeds, dtype=np.int64)
        # Counts the states this simulator has been in: each load and each step starts a new one. What is
        # derived from a state (the observation here, the PettingZoo envs' flat vector) is keyed on it.
        self.state_index = 0
        self._observed: tuple[int, dict[str, np.ndarray]] | None = None  # (state index, observation)

    # ------------------------------------------------------------------ episode start
    def load(self, episode: Episode) -> None:
        """Reset to time 0 of ``episode``: tasks arriving at 0 are queued and admitted at once.

        Everything a task can show after s batches is tabulated here, once per episode, as arrays indexed by
        (task, s); a step then only gathers rows, which keeps the simulator fast in pure NumPy.
        """
        episode.check_against(self.bank, "episode")
        self.episode = episode
        n, width = len(episode), self.history_width
        warmup = self.config.warmup_observations
        # loss[k, s] = L_k(s) for s = 1..length (column 0, "no batch yet", stays 0).
        curves = curve_table(self.bank)
        rows = curves.rows(episode.curve)
        self.curves, self.curve_rows = curves, rows
        self.loss_table = curves.loss[rows]
        self.arrival = episode.arrival
        self.budget = episode.budget
        self.deadline = episode.arrival + episode.budget
        self.eps = episode.eps
        *served, self.progress_table = progress_table(self.loss_table, self.budget, self.eps, warmup)
        # feature_table[k, s] = task k's feature row after s batches; remaining_time is filled per step and
        # queue_wait at admission.
        table = np.zeros((n, width + 1, NUM_TASK_FEATURES), dtype=np.float32)
        table[..., _F["present"]] = 1.0
        for name, values in zip(SERVED_FEATURES, served):
            table[..., _F[name]] = values
        table[..., _F["target_loss"]] = self.eps[:, None]
        table[..., _F["log_batch_size"]] = curves.log_batch_size[rows, None]
        table[..., _F["log_lr"]] = curves.log_lr[rows, None]
        self.feature_table = table
        self.batches = np.zeros(n, dtype=np.int64)
        self.admitted_at = np.full(n, -1, dtype=np.int64)
        self.left_at = np.full(n, -1, dtype=np.int64)
        self.ready_at = np.full(n, -1, dtype=np.int64)
        self.service = np.zeros(n, dtype=np.int64)  # node-steps that served each task (kept with abandon=True)
        self.status = np.full(n, FUTURE, dtype=np.int8)
        self.slot_task = np.full(self.num_slots, -1, dtype=np.int64)
        self.slot_deadline = np.full(self.num_slots, np.iinfo(np.int64).max, dtype=np.int64)
        self.history = np.zeros((self.num_slots, width), dtype=np.float32)
        self.queue: deque[int] = deque()
        self.active = 0
        self.next_arrival = 0
        self.t = 0
        self.totals = dict.fromkeys(TOTALS, 0)
        self._crossings: np.ndarray | None = None  # first_crossings of the episode, computed on first use
        self.last_served: tuple[int, ...] = ()
        if self.node_options:  # per task: the node that served it at the previous step (-1: none), its setup left
            self.served_by = np.full(n, -1, dtype=np.int64)
            self.setup_left = np.zeros(n, dtype=np.int64)
        self._arrive()
        self._admit()
        # Which slots hold a task as of this state (what the next step, Φ and the observation read; the
        # slots change only inside load and step).
        self.occupied = self.slot_task >= 0
        self.phi = self.potential()
        self.state_index += 1

    # ------------------------------------------------------------------ dynamics
    def step(self, picks: list[int]) -> StepOutcome:
        """Advance one step.  ``picks[i]`` is node i's choice (0 idle, j → slot j−1, and with ``abandon=True``
        K + j → abandon slot j−1), already range-checked.

        Picking an empty slot or one an earlier node already picked turns the pick into idle and counts a
        conflict (:func:`mara_env.dynamics.standing_picks_one`; abandons claim slots alike,
        :func:`mara_env.dynamics.standing_choices_one`); nothing else is ever repaired. Standing abandons take
        effect before any batch runs.
        """
        dropped: list[int] = []
        if self.abandon:
            stands, dropped = standing_choices_one(picks, self.occupied.tolist())
        else:
            stands = standing_picks_one(picks, self.occupied.tolist())
        served = [pick - 1 for pick, stand in zip(picks, stands) if stand]
        conflicts = len(picks) - picks.count(0) - len(served) - len(dropped)
        self.totals["queue_full"] += self.active == self.num_slots
        self.totals["waiting"] += self.active + len(self.queue) - len(served) - len(dropped)
        self.totals["busy"] += len(served)
        self.totals["steps"] += 1
        self.totals["conflicts"] += conflicts
        self.last_served = tuple(served)

        if self.abandon:
            self._abandon(np.asarray(dropped, dtype=np.int64))
            self.service[self.slot_task[served]] += 1
        if self.node_options:
            successes = self._serve_nodes(stands, served)
        else:
            successes = self._execute(np.asarray(served, dtype=np.int64)) if served else 0
        expirations = self._expire()
        self.t += 1
        self._arrive()
        self._admit()
        self.occupied = self.slot_task >= 0
        phi_before, self.phi = self.phi, self.potential()
        self.state_index += 1
        return StepOutcome(successes, expirations, conflicts, phi_before, self.phi, self.terminated, len(dropped))

    def _abandon(self, slots: np.ndarray) -> None:
        """Phase 0 (``abandon=True``): the tasks in ``slots`` leave as abandoned before any batch runs; counts
        those :func:`mara_env.abandon.feasible_alone` says could still have succeeded."""
        if slots.size == 0:
            return
        tasks = self.slot_task[slots]
        crossing = first_crossings(self.loss_table[tasks], self.eps[tasks])
        feasible = feasible_alone(crossing, self.batches[tasks], self.deadline[tasks] - self.t, self.config)
        self.totals["abandoned"] += slots.size
        self.totals["abandoned_feasible"] += int(feasible.sum())
        self._leave(slots, tasks, ABANDONED)

    def _execute(self, slots: np.ndarray) -> int:
        """Phases 1–2: one batch for each served task, then successes leave."""
        tasks = self.slot_task[slots]
        done = self.batches[tasks] + 1
        self.batches[tasks] = done
        new_loss = self.loss_table[tasks, done]
        self.history[slots, done - 1] = new_loss
        ready = done == self.config.warmup_observations
        if ready.any():
            self.ready_at[tasks[ready]] = self.t + 1
        won = new_loss <= self.eps[tasks]
        count = int(won.sum())
        if count:
            self._leave(slots[won], tasks[won], SUCCEEDED)
            self.totals["successes"] += count
        return count

    def _serve_nodes(self, stands: list[bool], served: list[int]) -> int:
        """Phases 1–2 with a node option: each served task spends the step in setup or runs its node's batches
        (:mod:`mara_env.service`), then successes leave."""
        nodes = np.flatnonzero(stands)
        slots = np.asarray(served, dtype=np.int64)
        tasks = self.slot_task[slots]
        left, runs = setup_steps(self.served_by[tasks] == nodes, self.setup_left[tasks], self.config.switch_cost)
        self.served_by.fill(-1)
        self.served_by[tasks] = nodes
        self.setup_left[tasks] = left
        self.totals["setup"] += int(runs.size - np.count_nonzero(runs))
        return self._run_batches(slots[runs], tasks[runs], self.speeds[nodes[runs]]) if runs.any() else 0

    def _run_batches(self, slots: np.ndarray, tasks: np.ndarray, speed: np.ndarray) -> int:
        """Up to ``speed`` batches of each listed task, every loss observed, stopping at its first success."""
        width = self.loss_table.shape[1] - 1
        start = self.batches[tasks]
        window = loss_window(self.loss_table.reshape(-1), tasks * (width + 1), start, width, int(speed.max()))
        end, won = run_batches(window, start, speed, self.curves.length[self.curve_rows[tasks]], self.eps[tasks])
        self.batches[tasks] = end
        written, losses = history_writes(slots * self.history.shape[1], start, end, window)
        self.history.reshape(-1)[written] = losses
        self.ready_at[tasks[became_ready(start, end, self.config.warmup_observations)]] = self.t + 1
        count = int(won.sum())
        if count:
            self._leave(slots[won], tasks[won], SUCCEEDED)
            self.totals["successes"] += count
        return count

    def _expire(self) -> int:
        """Phase 3: active or queued tasks whose deadline is reached without success leave."""
        limit = self.t + 1
        late = (self.slot_deadline <= limit).nonzero()[0]
        if late.size:
            self._leave(late, self.slot_task[late], EXPIRED)
        count = int(late.size)
        if self.queue and any(self.deadline[task] <= limit for task in self.queue):
            keep: deque[int] = deque()
            for task in self.queue:
                if self.deadline[task] <= limit:
                    self.status[task] = EXPIRED
                    self.left_at[task] = limit
                    count += 1
                else:
                    keep.append(task)
            self.queue = keep
        self.totals["expirations"] += count
        return count

    def _leave(self, slots: np.ndarray, tasks: np.ndarray, status: int) -> None:
        self.status[tasks] = status
        self.left_at[tasks] = self.t + 1
        self.slot_task[slots] = -1
        self.slot_deadline[slots] = np.iinfo(np.int64).max
        self.history[slots] = 0.0
        self.active -= slots.size

    def _arrive(self) -> None:
        """Phase 5: tasks whose arrival step has come join the queue in listed order."""
        arrival, n = self.arrival, len(self.episode)
        while self.next_arrival < n and arrival[self.next_arrival] <= self.t:
            self.queue.append(self.next_arrival)
            self.status[self.next_arrival] = QUEUED
            self.next_arrival += 1

    def _admit(self) -> None:
        """Phase 6: fill free slots from the queue head, lowest slot index first."""
        if not self.queue or self.active == self.num_slots:
            return
        for slot in np.flatnonzero(self.slot_task < 0).tolist():
            if not self.queue:
                break
            task = self.queue.popleft()
            self.slot_task[slot] = task
            self.slot_deadline[slot] = self.deadline[task]
            self.status[task] = ACTIVE
            self.admitted_at[task] = self.t
            self.feature_table[task, :, _F["queue_wait"]] = queue_wait(self.t, self.arrival[task], self.budget[task])
            self.active += 1

    # ------------------------------------------------------------------ views
    @property
    def terminated(self) -> bool:
        """After the arrival window, once every task has arrived and left."""
        return (self.t >= self.config.arrival_window and self.next_arrival >= len(self.episode)
                and not self.queue and not self.occupied.any())

    def potential(self) -> float:
        """Φ over the tasks now in slots (queued tasks are not active and do not count)."""
        tasks = self.slot_task[self.occupied]
        return potential(self.progress_table[tasks, self.batches[tasks]])

    def observation(self, *, action_mask: bool = True) -> dict[str, np.ndarray]:
        """The Gymnasium observation (without its ``action_mask`` when the caller builds its own, as the AEC
        env does per node); every array is new, so callers may keep or modify it.

        It is built once per simulator state (each ``load`` and ``step`` starts a new one) and copied on
        each call: the AEC env asks for it once per node turn.
        """
        return {key: value.copy() for key, value in self._current_observation().items()
                if action_mask or key != "action_mask"}

    def slot_mask(self) -> np.ndarray:
        """(K + 1,) int8 ((2K + 1,) with ``abandon=True``), new on each call: 1 for idle (index 0) and for every
        occupied slot (to serve, and to abandon), 0 for empty slots; one row of the observation's
        ``action_mask``."""
        return self._current_observation()["action_mask"][0].copy()

    def _current_observation(self) -> dict[str, np.ndarray]:
        if self._observed is None or self._observed[0] != self.state_index:
            self._observed = (self.state_index, self._build_observation())
        return self._observed[1]

    def _build_observation(self) -> dict[str, np.ndarray]:
        occupied = self.occupied
        tasks = self.slot_task[occupied]
        batches = self.batches[tasks]
        features = np.zeros((self.num_slots, NUM_TASK_FEATURES), dtype=np.float32)
        rows = self.feature_table[tasks, batches]
        rows[:, _F["remaining_time"]] = remaining_time(self.deadline[tasks], self.t, self.budget[tasks])
        features[occupied] = rows
        mask = np.empty((self.num_nodes, self.config.node_choices), dtype=np.int8)
        mask[:, 0] = 1
        mask[:, 1:self.num_slots + 1] = occupied
        if self.abandon:
            mask[:, self.num_slots + 1:] = occupied
        history_len = np.zeros(self.num_slots, dtype=np.int64)
        history_len[occupied] = batches
        budget = np.zeros(self.num_slots, dtype=np.float32)
        budget[occupied] = self.budget[tasks]
        glob = global_features(self.config, tasks.size, len(self.queue), self.t)
        observation = {"action_mask": mask, "tasks": features, "history": self.history,
                       "history_len": history_len, "budget": budget, "global": glob}
        if self.node_options:
            served_by = np.full(self.num_slots, -1, dtype=np.int64)
            setup_left = np.zeros(self.num_slots, dtype=np.int64)
            served_by[occupied], setup_left[occupied] = self.served_by[tasks], self.setup_left[tasks]
            observation["nodes"], observation["slot_nodes"] = node_views(
                served_by, setup_left, occupied, self.config.speeds, self.config.switch_cost)
        return observation

    def metrics(self) -> dict[str, float]:
        """Per-episode metrics (:func:`mara_env.dynamics.episode_metrics`); meaningful once the episode has
        terminated."""
        metrics = episode_metrics(self.totals, self.num_nodes, self.t, self.arrival, self.left_at, self.ready_at)
        metrics.update(option_metrics(self.config, self.totals, self.curves, self.curve_rows, self.status,
                                      self.service))
        return metrics

    def task_outcomes(self) -> tuple[str, ...]:
        """Each task's status by name (``succeeded``, ``expired``, ``abandoned``, ``running``, ``queued`` or
        ``not arrived``), in the episode's task order."""
        return task_outcomes(self.status)

    def task_outcome(self, task: int) -> str:
        """Task ``task``'s status by name (one entry of :meth:`task_outcomes`)."""
        return STATUS_NAMES[self.status[task]]

    def slot_tasks(self) -> list[int]:
        """The task (its index in the episode) in each slot, −1 for an empty slot."""
        return self.slot_task.tolist()

    def true_remaining(self) -> np.ndarray:
        """Privileged, for training-time experts only: (K,) float32, the batches each occupied slot's task still
        needs before its loss reaches ε on the curve it replays (0 for empty slots; a curve that never gets
        there reads as more than its remaining length). A policy never observes this."""
        if self._crossings is None:
            self._crossings = first_crossings(self.loss_table, self.eps)
        tasks = self.slot_task
        occupied = tasks >= 0
        remaining = np.zeros(tasks.shape, dtype=np.float32)
        remaining[occupied] = self._crossings[tasks[occupied]] - self.batches[tasks[occupied]]
        return remaining

    def describe_slots(self) -> list[dict[str, Any]]:
        """Human-readable state of each occupied slot (used by ``render``)."""
        rows = []
        for slot, task in enumerate(self.slot_task.tolist()):
            if task < 0:
                continue
            rows.append({"slot": slot, "curve": self.episode.curve[task], "batches": int(self.batches[task]),
                         "budget": int(self.budget[task]), "left": int(self.deadline[task] - self.t),
                         "loss": float(self.loss_table[task, self.batches[task]]), "eps": float(self.eps[task])})
        return rows


def oracle_successes(episode: Episode, bank: CurveBank, node_speeds: Sequence[int] | None = None,
                     switch_cost: int = 0) -> np.ndarray:
    """Independent feasibility (the Oracle bound): does each task's curve reach ε alone, within the batches of
    :func:`batch_allowance` (B batches with the default options; with the env options ``node_speeds`` and
    ``switch_cost``, alone on the fastest node after one setup)?  No schedule can do better for a task: it
    runs at most max(speeds) batches per step and none before a first setup of c steps."""
    allowance = batch_allowance(episode.budget, node_speeds, switch_cost).tolist()
    return np.array([bool(np.any(bank.cumavg(cid)[:limit] <= eps))
                     for cid, eps, limit in zip(episode.curve, episode.eps.tolist(), allowance)], dtype=bool)
