"""N episodes of the simulator advanced together in NumPy arrays: the core of the native vector env.

The dynamics are those of :class:`mara_env.simulator.Simulator`, step order included (execute → success →
expiry → advance → arrivals → admit → observe), written over arrays with a leading episode axis:

* per-slot arrays ``(N, K)`` (task index, batches executed, deadline, …), the ``tasks`` feature block
  ``(N, K, F)`` and the loss ``history`` ``(N, K, H_max)``, updated in place as slots are served, freed and
  filled;
* per-task arrays ``(N, C)`` padded to the largest episode held so far (arrival, deadline, status, …);
  padding tasks never arrive and count as already ended.

A step is a fixed sequence of array operations whatever N is; Python loops only run over the few
episodes that start or end in a step. The rules (conflicts, features, metrics, outcomes) are the functions of
:mod:`mara_env.dynamics` that the single simulator calls too, so observations, rewards and metrics agree bit
for bit. With a node option (``MARAConfig.node_options``) phase 1 follows :mod:`mara_env.service`, as in the
single simulator.
"""

from __future__ import annotations

import numpy as np

from curves.bank import CurveBank
from mara_env.abandon import feasible_alone
from mara_env.config import MARAConfig
from mara_env.curve_table import curve_table
from mara_env.dynamics import (ABANDONED, ACTIVE, EXPIRED, FUTURE, QUEUED, SERVED_FEATURES, SUCCEEDED, TOTALS,
                                episode_metrics, first_crossings, global_features, option_metrics, progress_features,
                                queue_wait, remaining_time, standing_choices, standing_picks, task_outcomes)
from mara_env.features import NUM_TASK_FEATURES
from mara_env.features import TASK_FEATURE_INDEX as _F
from mara_env.history_copies import HistoryCopies
from mara_env.service import became_ready, history_writes, loss_window, node_views, run_batches, setup_steps
from mara_env.shaping import potential_batch
from mara_env.workload import Episode

PADDING = ABANDONED + 1  # status of the unused task columns: never arrives, counts as ended
_NEVER = np.iinfo(np.int64).max
# Feature columns written when a slot's task runs a batch, and when a task is admitted to a slot.
_SERVED_COLUMNS = np.array([_F[name] for name in SERVED_FEATURES])
_ADMITTED_COLUMNS = np.array([_F[name] for name in ("present", "target_loss", "log_batch_size", "log_lr",
                                                   "queue_wait")])
_TASK_ARRAYS = {"arrival": (np.int64, _NEVER), "deadline": (np.int64, _NEVER), "budget": (np.int64, 1),
                "eps": (np.float64, 1.0), "curve": (np.int64, 0), "status": (np.int8, PADDING),
                "left_at": (np.int64, -1), "ready_at": (np.int64, -1), "service": (np.int64, 0)}


class BatchSimulator:
    """State of ``num_envs`` episodes; :meth:`load` (re)starts some of them, :meth:`step` advances all."""

    def __init__(self, config: MARAConfig, bank: CurveBank, num_envs: int):
        self.config = config
        self.table = curve_table(bank)
        self.bank = bank
        n, k = num_envs, config.max_active
        self.num_envs, self.num_nodes, self.num_slots = n, config.num_nodes, k
        self.history_width = bank.max_length
        self._losses = self.table.loss.reshape(-1)
        self.slot_task = np.full((n, k), -1, dtype=np.int64)
        self.slot_batches = np.zeros((n, k), dtype=np.int64)
        self.slot_deadline = np.full((n, k), _NEVER, dtype=np.int64)
        self.slot_budget = np.zeros((n, k), dtype=np.int64)
        self.slot_curve = np.zeros((n, k), dtype=np.int64)  # where the task's curve starts in the flat table
        self.slot_eps = np.ones((n, k), dtype=np.float64)
        self.slot_progress = np.zeros((n, k), dtype=np.float64)
        self.features = np.zeros((n, k, NUM_TASK_FEATURES), dtype=np.float32)
        self.history = np.zeros((n, k, self.history_width), dtype=np.float32)
        self.copies = HistoryCopies(self.history)  # told of every write to ``history``, below
        self.t = np.zeros(n, dtype=np.int64)
        self.num_tasks = np.zeros(n, dtype=np.int64)
        self.totals = {name: np.zeros(n, dtype=np.int64) for name in TOTALS}
        self.phi = np.zeros(n, dtype=np.float64)
        # Which slots hold a task, and how many, as of the last step or load (what the next step and the
        # observation read; nothing else changes the slots in between).
        self.occupied = np.zeros((n, k), dtype=bool)
        self.active = np.zeros(n, dtype=np.int64)
        self.queue_length = np.zeros(n, dtype=np.int64)
        self.tasks: dict[str, np.ndarray] = {}
        self._grow(1)
        self._env_of_cell = np.repeat(np.arange(n), k)  # episode of each flat slot index
        self._env_of_pick = np.repeat(np.arange(n), self.num_nodes)  # episode of each flat (episode, node) index
        self.node_options = config.node_options
        self.abandon = config.abandon
        self.speeds = np.array(config.speeds, dtype=np.int64)
        self.slot_service = np.zeros((n, k), dtype=np.int64)  # node-steps that served each slot's task (abandon)
        # Per slot, with a node option: the node that served its task at the previous step (-1: none), and the
        # task's setup steps left after that step.
        self.slot_served_by = np.full((n, k), -1, dtype=np.int64)
        self.slot_setup = np.zeros((n, k), dtype=np.int64)

    def _grow(self, capacity: int) -> None:
        """Widen the per-task arrays to ``capacity`` columns, keeping what they hold."""
        grown = {}
        for name, (dtype, fill) in _TASK_ARRAYS.items():
            grown[name] = np.full((self.num_envs, capacity), fill, dtype=dtype)
            if name in self.tasks:
                grown[name][:, : self.tasks[name].shape[1]] = self.tasks[name]
        self.tasks = grown

    # ------------------------------------------------------------------ episode start
    def load(self, rows: list[int], episodes: list[Episode]) -> None:
        """Restart episode slots ``rows`` at time 0 of ``episodes`` (tasks arriving at 0 are admitted at once)."""
        for episode in episodes:
            episode.check_against(self.bank, "episode")
        capacity = max([len(episode) for episode in episodes] + [1])
        if capacity > self.tasks["status"].shape[1]:
            self._grow(capacity)
        tasks = self.tasks
        for row, episode in zip(rows, episodes):
            n = len(episode)
            for name, (_, fill) in _TASK_ARRAYS.items():
                tasks[name][row] = fill
            tasks["arrival"][row, :n] = episode.arrival
            tasks["deadline"][row, :n] = episode.arrival + episode.budget
            tasks["budget"][row, :n] = episode.budget
            tasks["eps"][row, :n] = episode.eps
            tasks["curve"][row, :n] = self.table.rows(episode.curve)
            tasks["status"][row, :n] = FUTURE
            self.num_tasks[row] = n
        index = np.asarray(rows, dtype=np.int64)
        self.slot_task[index] = -1
        self.slot_batches[index] = 0
        self.slot_deadline[index] = _NEVER
        self.slot_budget[index] = 0
        self.slot_progress[index] = 0.0
        self.features[index] = 0.0
        self.history[index] = 0.0
        self.slot_served_by[index] = -1
        self.slot_service[index] = 0
        self.copies.rewrote_rows((index[:, None] * self.num_slots + np.arange(self.num_slots)).reshape(-1))
        self.t[index] = 0
        for total in self.totals.values():
            total[index] = 0
        self._admit(self._arrive())
        occupied = self.slot_task[index] >= 0
        self.occupied[index], self.active[index] = occupied, occupied.sum(axis=1)
        self.phi[index] = potential_batch(self.slot_progress[index], occupied)

    # ------------------------------------------------------------------ dynamics
    def step(self, picks: np.ndarray) -> dict[str, np.ndarray]:
        """Advance every episode one step; ``picks`` (N, M) are range-checked node choices (0 idle, j slot j−1,
        and with ``abandon=True`` K + j abandon slot j−1).

        A pick of an empty slot, or of a slot a lower-indexed node already took, idles and counts a conflict
        (:func:`mara_env.dynamics.standing_picks`; abandons claim slots alike,
        :func:`mara_env.dynamics.standing_choices`). Returns per-episode ``successes``, ``expirations``,
        ``conflicts``, ``phi_before``, ``phi_after``, ``terminated`` and, with ``abandon=True``, ``abandoned``.
        """
        occupied, active = self.occupied, self.active
        if self.abandon:
            serves, abandons = standing_choices(picks, occupied)
            dropped = abandons.sum(axis=1)
        else:
            serves, dropped = standing_picks(picks, occupied), 0
        served = serves.sum(axis=1)
        conflicts = (picks > 0).sum(axis=1) - served - dropped  # the choices that name a slot but claim nothing
        totals = self.totals
        totals["queue_full"] += active == self.num_slots
        totals["waiting"] += active + self.queue_length - served - dropped
        totals["busy"] += served
        totals["steps"] += 1
        totals["conflicts"] += conflicts

        served_at = serves.reshape(-1).nonzero()[0]  # (env, node) pairs as flat indices
        env = self._env_of_pick[served_at]
        cell = env * self.num_slots + picks.reshape(-1)[served_at] - 1
        if self.abandon:
            self._abandon(abandons, picks)
            self.slot_service.reshape(-1)[cell] += 1
        successes = self._serve_nodes(cell, served_at % self.num_nodes) if self.node_options else self._execute(cell)
        expirations = self._expire()
        self.t += 1
        self._admit(self._arrive())
        self.occupied = self.slot_task >= 0
        self.active = self.occupied.sum(axis=1)
        phi_before, self.phi = self.phi, potential_batch(self.slot_progress, self.occupied)
        outcome = {"successes": successes, "expirations": expirations, "conflicts": conflicts,
                   "phi_before": phi_before, "phi_after": self.phi, "terminated": self.terminated()}
        if self.abandon:
            outcome["abandoned"] = dropped
        return outcome

    def _abandon(self, abandons: np.ndarray, choices: np.ndarray) -> None:
        """Phase 0 (``abandon=True``): the tasks that the standing abandons (``abandons``, (N, M)) name in
        ``choices`` leave as abandoned before any batch runs; counts those
        :func:`mara_env.abandon.feasible_alone` says could still have succeeded."""
        at = abandons.reshape(-1).nonzero()[0]
        if at.size == 0:
            return
        env = self._env_of_pick[at]
        cell = env * self.num_slots + choices.reshape(-1)[at] - self.num_slots - 1
        loss = self.table.loss
        crossing = first_crossings(loss[self.slot_curve.reshape(-1)[cell] // loss.shape[1]],
                                   self.slot_eps.reshape(-1)[cell])
        feasible = feasible_alone(crossing, self.slot_batches.reshape(-1)[cell],
                                  self.slot_deadline.reshape(-1)[cell] - self.t[env], self.config)
        self.totals["abandoned"] += np.bincount(env, minlength=self.num_envs)
        self.totals["abandoned_feasible"] += np.bincount(env[feasible], minlength=self.num_envs)
        self._leave(cell, ABANDONED)

    def _execute(self, cell: np.ndarray) -> np.ndarray:
        """Phases 1–2: one batch for each served task, then successes leave.

        ``cell`` lists the served slots as flat indices ``env · K + slot`` into the (N, K) slot arrays, which
        index much faster than (env, slot) pairs.
        """
        batches = self.slot_batches.reshape(-1)
        done = batches[cell] + 1
        batches[cell] = done
        start = self.slot_curve.reshape(-1)[cell]
        loss = self._losses[start + done]
        first = self._losses[start + 1]
        eps = self.slot_eps.reshape(-1)[cell]
        *features, progress = progress_features(done, self.slot_budget.reshape(-1)[cell], loss, first, eps,
                                                self.config.warmup_observations)
        written = cell * self.history_width + done - 1
        self.history.reshape(-1)[written] = loss
        self.copies.wrote(written)
        ready = cell[done == self.config.warmup_observations]
        if ready.size:
            env = self._env_of_cell[ready]
            self.tasks["ready_at"][env, self.slot_task.reshape(-1)[ready]] = self.t[env] + 1
        self._write_features(cell, _SERVED_COLUMNS, *features)
        self.slot_progress.reshape(-1)[cell] = progress
        return self._succeed(cell[loss <= eps])

    def _succeed(self, won: np.ndarray) -> np.ndarray:
        """The tasks in slots ``won`` (flat indices) succeed and leave; returns the successes per episode."""
        self._leave(won, SUCCEEDED)
        counts = np.bincount(self._env_of_cell[won], minlength=self.num_envs)
        self.totals["successes"] += counts
        return counts

    def _serve_nodes(self, cell: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Phases 1–2 with a node option: each served slot's task (``cell``, flat indices, served by ``node``)
        spends the step in setup or runs its node's batches (:mod:`mara_env.service`), then successes leave."""
        served_by, setup = self.slot_served_by.reshape(-1), self.slot_setup.reshape(-1)
        left, runs = setup_steps(served_by[cell] == node, setup[cell], self.config.switch_cost)
        served_by.fill(-1)
        served_by[cell] = node
        setup[cell] = left
        self.totals["setup"] += np.bincount(self._env_of_cell[cell[~runs]], minlength=self.num_envs)
        return self._run_batches(cell[runs], self.speeds[node[runs]])

    def _run_batches(self, cell: np.ndarray, speed: np.ndarray) -> np.ndarray:
        """Up to ``speed`` batches of each listed slot's task, every loss observed, stopping at its first
        success; then successes leave (:meth:`_execute` with the node options)."""
        batches = self.slot_batches.reshape(-1)
        start, row = batches[cell], self.slot_curve.reshape(-1)[cell]
        width = self.table.loss.shape[1] - 1
        window = loss_window(self._losses, row, start, width, int(speed.max(initial=1)))
        eps = self.slot_eps.reshape(-1)[cell]
        end, won = run_batches(window, start, speed, self.table.length[row // (width + 1)], eps)
        ran = end > start
        cell, row, start, end, window, eps = cell[ran], row[ran], start[ran], end[ran], window[ran], eps[ran]
        batches[cell] = end
        loss = window[np.arange(cell.size), end - start - 1]
        *features, progress = progress_features(end, self.slot_budget.reshape(-1)[cell], loss, self._losses[row + 1],
                                                eps, self.config.warmup_observations)
        written, losses = history_writes(cell * self.history_width, start, end, window)
        self.history.reshape(-1)[written] = losses
        self.copies.wrote(written)
        ready = cell[became_ready(start, end, self.config.warmup_observations)]
        if ready.size:
            env = self._env_of_cell[ready]
            self.tasks["ready_at"][env, self.slot_task.reshape(-1)[ready]] = self.t[env] + 1
        self._write_features(cell, _SERVED_COLUMNS, *features)
        self.slot_progress.reshape(-1)[cell] = progress
        return self._succeed(cell[won[ran]])

    def _expire(self) -> np.ndarray:
        """Phase 3: active or queued tasks whose deadline is reached without success leave."""
        limit = self.t + 1
        late = self.slot_deadline <= limit[:, None]
        self._leave(late.reshape(-1).nonzero()[0], EXPIRED)
        counts = late.sum(axis=1)
        if self.queue_length.any():  # the tasks queued now are those the last admission left waiting
            status = self.tasks["status"]
            waited_out = (status == QUEUED) & (self.tasks["deadline"] <= limit[:, None])
            if waited_out.any():
                status[waited_out] = EXPIRED
                self.tasks["left_at"][waited_out] = np.broadcast_to(limit[:, None], waited_out.shape)[waited_out]
                counts += waited_out.sum(axis=1)
        self.totals["expirations"] += counts
        return counts

    def _leave(self, cell: np.ndarray, status: int) -> None:
        """Tasks in slots ``cell`` (flat indices) end with ``status``; their slots are cleared."""
        if cell.size == 0:
            return
        env = self._env_of_cell[cell]
        task = self.slot_task.reshape(-1)[cell]
        self.tasks["status"][env, task] = status
        self.tasks["left_at"][env, task] = self.t[env] + 1
        if self.abandon:
            self.tasks["service"][env, task] = self.slot_service.reshape(-1)[cell]
            self.slot_service.reshape(-1)[cell] = 0
        self.slot_task.reshape(-1)[cell] = -1
        self.slot_batches.reshape(-1)[cell] = 0
        self.slot_deadline.reshape(-1)[cell] = _NEVER
        self.slot_budget.reshape(-1)[cell] = 0
        self.slot_progress.reshape(-1)[cell] = 0.0
        self.features.reshape(-1, NUM_TASK_FEATURES)[cell] = 0.0
        self.history.reshape(-1, self.history_width)[cell] = 0.0
        self.copies.rewrote_rows(cell)
        if self.node_options:
            self.slot_served_by.reshape(-1)[cell] = -1

    def _arrive(self) -> np.ndarray:
        """Phase 5: tasks whose arrival step has come join the queue (the queue is in task order).

        Returns the (N, C) mask of queued tasks.
        """
        status = self.tasks["status"]
        status[(status == FUTURE) & (self.tasks["arrival"] <= self.t[:, None])] = QUEUED
        return status == QUEUED

    def _admit(self, queued: np.ndarray) -> None:
        """Phase 6: fill free slots from the queue head, lowest slot index first; sets ``queue_length``."""
        free = self.slot_task < 0
        free_count = free.sum(axis=1)
        self.queue_length = queued.sum(axis=1)
        rows = ((free_count > 0) & (self.queue_length > 0)).nonzero()[0]
        if rows.size == 0:
            return
        free, queued = free[rows], queued[rows]
        rank = np.cumsum(queued, axis=1)
        admitted = queued & (rank <= free_count[rows, None])
        free_slots = np.argsort(~free, axis=1, kind="stable")  # free slots first, in slot order
        pair, task = np.nonzero(admitted)
        env = rows[pair]
        self.queue_length -= np.bincount(env, minlength=self.num_envs)
        cell = env * self.num_slots + free_slots[pair, rank[pair, task] - 1]
        entry = env * self.tasks["status"].shape[1] + task  # flat index into the (N, C) task arrays
        budget, curve, eps = (self.tasks[name].reshape(-1)[entry] for name in ("budget", "curve", "eps"))
        self.tasks["status"].reshape(-1)[entry] = ACTIVE
        self.slot_task.reshape(-1)[cell] = task
        self.slot_deadline.reshape(-1)[cell] = self.tasks["deadline"].reshape(-1)[entry]
        self.slot_budget.reshape(-1)[cell] = budget
        self.slot_curve.reshape(-1)[cell] = curve * self.table.loss.shape[1]
        self.slot_eps.reshape(-1)[cell] = eps
        self._write_features(cell, _ADMITTED_COLUMNS, 1.0, eps, self.table.log_batch_size[curve],
                             self.table.log_lr[curve], queue_wait(self.t[env], self.tasks["arrival"].reshape(-1)[entry],
                                                                  budget))

    def _write_features(self, cell: np.ndarray, columns: np.ndarray, *values: np.ndarray | float) -> None:
        """Set feature ``columns[i]`` of the slots ``cell`` (flat indices) to ``values[i]``; the values are
        gathered in float64, so each is rounded to float32 once."""
        block = np.empty((cell.size, len(columns)))
        for i, value in enumerate(values):
            block[:, i] = value
        self.features.reshape(-1)[(cell * NUM_TASK_FEATURES)[:, None] + columns] = block

    # ------------------------------------------------------------------ views
    def terminated(self) -> np.ndarray:
        """(N,) bool: past the arrival window with every task arrived and ended."""
        due = self.t >= self.config.arrival_window
        if not due.any():
            return due
        return due & (self.tasks["status"] >= SUCCEEDED).all(axis=1)

    def observation(self, copy: bool = True) -> dict[str, np.ndarray]:
        """The batched Gymnasium observation: each entry stacks the single env's along a leading N axis.

        Every array is new, except ``history`` with ``copy=False``: then it is the simulator's own buffer,
        valid until the next step (it is the largest array by far, N·K·H_max floats). With ``copy=True`` it is
        a copy that no later step changes, recycled from an earlier observation that nothing references any
        more when there is one (:mod:`mara_env.history_copies`).
        """
        occupied = self.occupied
        mask = np.empty((self.num_envs, self.num_nodes, self.config.node_choices), dtype=np.int8)
        mask[:, :, 0] = 1
        mask[:, :, 1:self.num_slots + 1] = occupied[:, None, :]
        if self.abandon:
            mask[:, :, self.num_slots + 1:] = occupied[:, None, :]
        tasks = self.features.copy()
        tasks[:, :, _F["remaining_time"]] = remaining_time(self.slot_deadline, self.t[:, None], self.slot_budget,
                                                           occupied)
        glob = global_features(self.config, self.active, self.queue_length, self.t)
        observation = {"action_mask": mask, "tasks": tasks, "history": self.copies.copy() if copy else self.history,
                       "history_len": self.slot_batches.copy(), "budget": self.slot_budget.astype(np.float32),
                       "global": glob}
        if self.node_options:
            observation["nodes"], observation["slot_nodes"] = node_views(
                self.slot_served_by, self.slot_setup, occupied, self.config.speeds, self.config.switch_cost)
        return observation

    def metrics(self, row: int) -> dict[str, float]:
        """Episode ``row``'s metrics (:func:`mara_env.dynamics.episode_metrics`)."""
        n = int(self.num_tasks[row])
        totals = {name: int(value[row]) for name, value in self.totals.items()}
        metrics = episode_metrics(totals, self.num_nodes, int(self.t[row]), self.tasks["arrival"][row, :n],
                                  self.tasks["left_at"][row, :n], self.tasks["ready_at"][row, :n])
        metrics.update(option_metrics(self.config, totals, self.table, self.tasks["curve"][row, :n],
                                      self.tasks["status"][row, :n], self.tasks["service"][row, :n]))
        return metrics

    def task_outcomes(self, row: int) -> tuple[str, ...]:
        """Episode ``row``'s task statuses by name, in its task order (:meth:`Simulator.task_outcomes`)."""
        return task_outcomes(self.tasks["status"][row, :int(self.num_tasks[row])])

    def true_remaining(self) -> np.ndarray:
        """Privileged, for training-time experts only: (N, K) float32, :meth:`Simulator.true_remaining` of every
        episode (0 for empty slots). A policy never observes this."""
        remaining = np.zeros(self.slot_task.shape, dtype=np.float32)
        occupied = self.occupied
        if occupied.any():
            loss = self.table.loss
            crossings = first_crossings(loss[self.slot_curve[occupied] // loss.shape[1]], self.slot_eps[occupied])
            remaining[occupied] = crossings - self.slot_batches[occupied]
        return remaining
