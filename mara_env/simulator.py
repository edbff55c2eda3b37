"""The simulator core: one pure-NumPy state machine behind both the Gymnasium and the PettingZoo env.

Step order, fixed and tested (tests/env/test_dynamics.py):

1. apply the joint action: every selected task executes one batch and its new cumulative-average loss is observed;
2. tasks with L ≤ ε succeed and leave;
3. tasks whose deadline is reached (t + 1 ≥ d) without success expire and leave, queued ones included;
4. t += 1;
5. arrivals of the new step join the FIFO admission queue;
6. the queue fills free slots, lowest slot index first;
7. observe.

Slot identity is stable while a task lives, so policies may track a task by its slot.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np

from curves.bank import CurveBank
from mara_env.config import MARAConfig
from mara_env.curve_table import curve_table
from mara_env.features import NUM_TASK_FEATURES
from mara_env.features import TASK_FEATURE_INDEX as _F
from mara_env.shaping import log_progress, potential
from mara_env.workload import Episode

FUTURE, QUEUED, ACTIVE, SUCCEEDED, EXPIRED = range(5)
_TINY = 1e-12


class StepOutcome(NamedTuple):
    """What one simulator step produced, before any reward shaping is applied by the front end."""

    successes: int
    expirations: int
    conflicts: int
    served_slots: tuple[int, ...]
    potential_before: float
    potential_after: float
    terminated: bool


class Simulator:
    """State of one episode; :meth:`load` starts an episode, :meth:`step` advances it by one time step."""

    def __init__(self, config: MARAConfig, bank: CurveBank):
        self.config = config
        self.bank = bank
        self.num_nodes = config.num_nodes
        self.num_slots = config.max_active
        self.history_width = bank.max_length
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
        self.loss_table = curves.loss[rows]
        self.arrival = episode.arrival
        self.budget = episode.budget
        self.deadline = episode.arrival + episode.budget
        self.eps = episode.eps
        first = self.loss_table[:, 1:2]
        eps = self.eps[:, None]
        batches = np.arange(width + 1)[None, :]
        seen = batches > 0
        self.progress_table = np.where(seen, log_progress(first, self.loss_table, eps), 0.0)
        # feature_table[k, s] = task k's feature row after s batches; remaining_time is filled per step and
        # queue_wait at admission.
        table = np.zeros((n, width + 1, NUM_TASK_FEATURES), dtype=np.float32)
        table[..., _F["present"]] = 1.0
        table[..., _F["batches_done"]] = batches / self.budget[:, None]
        table[..., _F["current_loss"]] = self.loss_table
        table[..., _F["initial_loss"]] = np.where(seen, first, 0.0)
        table[..., _F["target_loss"]] = eps
        table[..., _F["log_loss_ratio"]] = np.where(seen, np.log(np.maximum(self.loss_table, _TINY) / eps), 0.0)
        table[..., _F["warmup"]] = np.minimum(batches / warmup, 1.0)
        table[..., _F["log_batch_size"]] = curves.log_batch_size[rows, None]
        table[..., _F["log_lr"]] = curves.log_lr[rows, None]
        self.feature_table = table
        self.batches = np.zeros(n, dtype=np.int64)
        self.admitted_at = np.full(n, -1, dtype=np.int64)
        self.left_at = np.full(n, -1, dtype=np.int64)
        self.ready_at = np.full(n, -1, dtype=np.int64)
        self.status = np.full(n, FUTURE, dtype=np.int8)
        self.slot_task = np.full(self.num_slots, -1, dtype=np.int64)
        self.slot_deadline = np.full(self.num_slots, np.iinfo(np.int64).max, dtype=np.int64)
        self.history = np.zeros((self.num_slots, width), dtype=np.float32)
        self.queue: deque[int] = deque()
        self.active = 0
        self.next_arrival = 0
        self.t = 0
        self.totals = {"successes": 0, "expirations": 0, "conflicts": 0, "busy": 0, "queue_full": 0,
                       "waiting": 0, "steps": 0}
        self.last_served: tuple[int, ...] = ()
        self._arrive()
        self._admit()
        self.phi = self.potential()
        self.state_index += 1

    # ------------------------------------------------------------------ dynamics
    def step(self, picks: list[int]) -> StepOutcome:
        """Advance one step.  ``picks[i]`` is node i's choice (0 idle, j → slot j−1), already range-checked.

        Picking an empty slot or one an earlier node already picked turns the pick into idle and counts a
        conflict; nothing else is ever repaired.
        """
        occupied = (self.slot_task >= 0).tolist()
        self.totals["queue_full"] += self.active == self.num_slots
        taken = [False] * self.num_slots
        served: list[int] = []
        conflicts = 0
        for pick in picks:
            if pick == 0:
                continue
            slot = pick - 1
            if not occupied[slot] or taken[slot]:
                conflicts += 1
                continue
            taken[slot] = True
            served.append(slot)
        self.totals["waiting"] += self.active + len(self.queue) - len(served)
        self.totals["busy"] += len(served)
        self.totals["steps"] += 1
        self.totals["conflicts"] += conflicts
        self.last_served = tuple(served)

        successes = self._execute(np.asarray(served, dtype=np.int64)) if served else 0
        expirations = self._expire()
        self.t += 1
        self._arrive()
        self._admit()
        phi_before, self.phi = self.phi, self.potential()
        self.state_index += 1
        return StepOutcome(successes, expirations, conflicts, self.last_served, phi_before, self.phi,
                           self.terminated)

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
            self.feature_table[task, :, _F["queue_wait"]] = (self.t - self.arrival[task]) / self.budget[task]
            self.active += 1

    # ------------------------------------------------------------------ views
    @property
    def terminated(self) -> bool:
        """After the arrival window, once every task has arrived and left."""
        return (self.t >= self.config.arrival_window and self.next_arrival >= len(self.episode)
                and not self.queue and not (self.slot_task >= 0).any())

    def potential(self) -> float:
        """Φ over the tasks now in slots (queued tasks are not active and do not count)."""
        tasks = self.slot_task[self.slot_task >= 0]
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
        """(K + 1,) int8, new on each call: 1 for idle (index 0) and for every occupied slot, 0 for empty
        slots; one row of the observation's ``action_mask``."""
        return self._current_observation()["action_mask"][0].copy()

    def _current_observation(self) -> dict[str, np.ndarray]:
        if self._observed is None or self._observed[0] != self.state_index:
            self._observed = (self.state_index, self._build_observation())
        return self._observed[1]

    def _build_observation(self) -> dict[str, np.ndarray]:
        occupied = self.slot_task >= 0
        tasks = self.slot_task[occupied]
        batches = self.batches[tasks]
        features = np.zeros((self.num_slots, NUM_TASK_FEATURES), dtype=np.float32)
        rows = self.feature_table[tasks, batches]
        rows[:, _F["remaining_time"]] = (self.deadline[tasks] - self.t) / self.budget[tasks]
        features[occupied] = rows
        mask = np.empty((self.num_nodes, self.num_slots + 1), dtype=np.int8)
        mask[:, 0] = 1
        mask[:, 1:] = occupied
        history_len = np.zeros(self.num_slots, dtype=np.int64)
        history_len[occupied] = batches
        budget = np.zeros(self.num_slots, dtype=np.float32)
        budget[occupied] = self.budget[tasks]
        cfg = self.config
        glob = np.array([cfg.num_nodes / cfg.max_nodes, tasks.size / self.num_slots,
                         len(self.queue) / self.num_slots, self.t / cfg.arrival_window], dtype=np.float32)
        return {"action_mask": mask, "tasks": features, "history": self.history,
                "history_len": history_len, "budget": budget, "global": glob}

    def metrics(self) -> dict[str, float]:
        """Per-episode metrics (paper §5.1, Table 4); meaningful once the episode has terminated."""
        n = len(self.episode)
        steps = max(self.totals["steps"], 1)
        end = np.where(self.left_at >= 0, self.left_at, self.t)
        ready = np.where(self.ready_at >= 0, self.ready_at, end) - self.arrival
        return {
            "tasks": float(n),
            "successes": float(self.totals["successes"]),
            "success_rate": self.totals["successes"] / n if n else float("nan"),
            "utilisation": self.totals["busy"] / (self.num_nodes * steps),
            "queue_full": self.totals["queue_full"] / steps,
            "waiting": self.totals["waiting"] / steps,
            "ready": float(ready.mean()) if n else float("nan"),
            "conflicts": float(self.totals["conflicts"]),
            "steps": float(self.totals["steps"]),
        }

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


def oracle_successes(episode: Episode, bank: CurveBank) -> np.ndarray:
    """Independent feasibility (the Oracle bound): does each task's curve reach ε within B batches alone?"""
    return np.array([bool(np.any(bank.cumavg(cid)[:budget] <= eps))
                     for cid, eps, budget in zip(episode.curve, episode.eps.tolist(), episode.budget.tolist())],
                    dtype=bool)
