"""``MARAScheduler``: a Ray Tune trial scheduler whose decisions come from a MARA allocator (FM-slack by default).

Tune's trials are MARA's tasks and the scheduler's node budget M is how many trials train at once.  Each trial
brings a target ε on its reported metric (the running average of its reports by default, as in the
benchmark; see ``target_metric``) and a deadline in training iterations; optionally ``batch_size`` and ``lr``
in its config, the recipe features the predictors read.

**The clock.**  Time runs in rounds: a round ends once every trial that trains in it has reported one
iteration (one ``train()`` call: one ``tune.report`` of a function trainable, one ``step`` of a class
trainable).  A trial's deadline is its arrival round (the round in which Tune added it) plus its deadline,
so a trial that trains in every round has exactly ``deadline`` iterations, as a MARA task served at every
step has B batches.  The bookkeeping is the live simulator's (:class:`mara_env.live.LiveSimulator`), advanced
round by round by the live step every live front end takes (:func:`mara_env.live.step.live_step`) and read
through its public API (``observation``, ``task_outcome(s)``, ``slot_tasks``, ``deadline_of``, ``per_batch``):
slots, queue, deadlines, successes, expiries and the observation every registered allocator reads.

**The decisions.**  When a round ends, the allocator picks the trials the M nodes serve in the next round.
A trial whose tracked metric reaches ε is stopped at once (``STOP``: it succeeded); so is one whose deadline
has come (it expired), one whose reported metric is not finite, and one that ends or errors by itself.  A
trial the allocator does not serve is paused (``PAUSE``: Tune checkpoints it, so a trainable that saves and
restores its state resumes where it stopped); :meth:`choose_trial_to_run` starts or resumes the served ones.
Tune reports asynchronously, so a trial that reports before the round ends follows the previous round's
allocation: a preemption takes effect at its next report, one iteration later than in the lock-step
simulator.  Tune's clock is the trials' reports, so while trials wait the scheduler never leaves every node
idle: if the allocator serves none, it serves the first waiting trial.

**Abandoning.**  Under an abandoning allocator (``slack-fm+abandon``, ``edf+abandon``, ...) the bookkeeping has
the abandon action (``MARAConfig(abandon=True)``): a trial the allocator abandons is stopped (``STOP`` at its next
report, or at once if it waits) and its abandon takes a node's choice in the next round, as in ``MARA-v0``; its
outcome is ``abandoned``.  If nothing else could train meanwhile, the abandon closes a round of its own.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from mara_common import checks
from curves.bank import FamilySpec
from mara_agents.live.jobs.schedule import abandons, build_policy
from mara_agents.play.policy import Policy
from mara_env.config import MARAConfig
from mara_env.live.simulator import LiveSimulator
from mara_env.live.step import live_step
from mara_env.live.tasks import METRICS, LiveEpisode, LiveTask, tracked

ENDED = ("succeeded", "expired", "abandoned")  # the outcomes of a trial that has left MARA's slots and queue

HISTORY_WIDTH = 700  # the shipped bank's H_max: the observation width the MAT checkpoints were trained on


def _target(name: str, value: object) -> float:
    """A target ε: a positive finite number (``name`` says where it came from in the error)."""
    return checks.number(name, value, low=0.0, low_open=True)


def _deadline(name: str, value: object) -> int:
    """A deadline: a whole number of iterations, at least 1 (a search space may give ``10.0`` for 10)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return checks.integer(name, value, low=1)


@dataclass
class _Round:
    """One finished round: each reporting trial's value, and the joint action that served them."""

    reports: dict[int, float]
    picks: list[int]


class MARAScheduler(TrialScheduler):
    """Runs at most ``nodes`` trials at once, chosen by the allocator ``policy`` (a registered name or a
    policy object); stops trials that reach their target or deadline (see the module docstring).

    ``target`` (ε > 0) and ``deadline`` (iterations ≥ 1) apply to every trial unless its config has
    ``target_key`` / ``deadline_key``; every argument is checked here, a trial's own values when it is added.
    ``metric`` is the reported value to minimise (Tune's ``TuneConfig(metric=...)`` sets it too).
    ``fm_checkpoint`` is the FM a registered policy that reads FM uses (``""``: the shipped one).
    """

    def __init__(self, policy: str | Policy = "slack-fm", nodes: int = 4, *, metric: str | None = None,
                 mode: str = "min", target: float | None = None, deadline: int | None = None,
                 target_key: str = "target", deadline_key: str = "deadline", target_metric: str = "cumulative_mean",
                 ema_decay: float = 0.9, max_active: int = 10, fm_checkpoint: str = ""):
        super().__init__()
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ValueError(f"nodes must be a positive integer, got {nodes!r}")
        if mode != "min":
            raise ValueError(f"mode must be 'min' (the metric is a loss to bring below its target), got {mode!r}")
        if target_metric not in METRICS:
            raise ValueError(f"target_metric must be one of {METRICS}, got {target_metric!r}")
        checks.number("ema_decay", ema_decay, low=0.0)
        if ema_decay >= 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {ema_decay!r}")
        target = None if target is None else _target("target", target)
        deadline = None if deadline is None else _deadline("deadline", deadline)
        self.label, self.policy = build_policy(policy, nodes, fm_checkpoint)
        self.nodes, self._metric, self.defaults = nodes, metric, {"target": target, "deadline": deadline}
        self.keys = {"target": target_key, "deadline": deadline_key}
        self.target_metric, self.ema_decay = target_metric, ema_decay
        self.config = MARAConfig(num_nodes=nodes, max_active=max_active, max_nodes=max(16, nodes),
                                 abandon=abandons(self.policy))
        self.trials: list[Trial] = []
        self.index: dict[str, int] = {}
        self.tasks: list[LiveTask] = []
        self.rounds: list[_Round] = []
        self.reports: dict[int, list[float]] = {}  # per trial, its values not yet in a finished round
        self.serving: set[int] = set()        # trials training in this round
        self.chosen: list[int] = []           # trials the allocator serves, in its order
        self.dropping: list[int] = []         # trials the allocator abandoned, whose abandon the next round applies
        self.max_running = 0
        self.decisions: Counter[str] = Counter()  # CONTINUE / PAUSE / STOP, as returned
        self.iterations: Counter[str] = Counter()  # per trial id, the results it reported
        self.simulator: LiveSimulator | None = None  # MARA's account of the trials, replayed round by round

    # ------------------------------------------------------------------ Tune's hooks
    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if mode not in (None, "min") or (metric and self._metric and metric != self._metric):
            return False
        self._metric = metric or self._metric
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """A new trial arrives in the current round and waits in MARA's queue."""
        fields = {name: trial.config.get(self.keys[name], self.defaults[name]) for name in ("target", "deadline")}
        for name, value in fields.items():
            if value is None:
                raise ValueError(f"trial {trial.trial_id}: no {name}; pass MARAScheduler({name}=...) or put "
                                 f"{self.keys[name]!r} in its config")
        if self.keys["target"] in trial.config:
            _target(f"trial {trial.trial_id}: config[{self.keys['target']!r}]", fields["target"])
        if self.keys["deadline"] in trial.config:
            _deadline(f"trial {trial.trial_id}: config[{self.keys['deadline']!r}]", fields["deadline"])
        batch_size, lr = int(trial.config.get("batch_size", 1)), float(trial.config.get("lr", 1e-3))
        arrival = len(self.rounds)
        self.index[trial.trial_id] = len(self.trials)
        self.trials.append(trial)
        self.tasks.append(LiveTask(arrival, trial.trial_id, len(self.tasks), 0, batch_size, lr,
                                   float(fields["target"]), int(fields["deadline"]), self.target_metric,
                                   self.ema_decay))
        self._rebuild()

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        """Record the trial's value; stop it if it succeeded, expired or reported a non-finite value, else
        continue or pause it as the allocator says (closing the round if this was its last report)."""
        decision = self._decide(trial, result)
        self.decisions[decision] += 1
        self.iterations[trial.trial_id] += 1
        return decision

    def _decide(self, trial: Trial, result: dict[str, Any]) -> str:
        self.max_running = max(self.max_running, sum(t.status == Trial.RUNNING for t in self.trials))
        k = self.index[trial.trial_id]
        if self._abandoned(k):  # a value reported after the abandon: the trial is stopped, the value unused
            self.serving.discard(k)
            self._maybe_close_round()
            return TrialScheduler.STOP
        value = float(result[self._metric])
        pending = self.reports.setdefault(k, [])
        pending.append(value)
        simulator, task = self.simulator, self.tasks[k]
        series = tracked(simulator.per_batch[k] + pending, task.metric, task.ema_decay)
        finished = (not math.isfinite(value) or series[-1] <= task.eps
                    or len(self.rounds) + len(pending) >= simulator.deadline_of(k))
        self.serving.add(k)
        if finished:
            self.serving.discard(k)
        self._maybe_close_round()
        if finished or self._abandoned(k):
            self.serving.discard(k)
            return TrialScheduler.STOP
        if k in self.chosen:
            return TrialScheduler.CONTINUE
        self.serving.discard(k)
        return TrialScheduler.PAUSE

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> None:
        """A trial that ended (stopped by this scheduler, or its trainable returned) leaves its node."""
        self._leave(self.index[trial.trial_id])

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self._leave(self.index[trial.trial_id])

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self._leave(self.index[trial.trial_id])

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """The first waiting trial the allocator serves, while fewer than M trials train.  Waiting trials that
        expired meanwhile are stopped here."""
        for k, trial in enumerate(self.trials):
            if trial.status in (Trial.PENDING, Trial.PAUSED) and (self.simulator.task_outcome(k) in ENDED
                                                                  or k in self.dropping):
                tune_controller.stop_trial(trial)
        if len(self.serving) >= self.nodes - len(self.dropping):
            return None
        for k in self.chosen:
            trial = self.trials[k]
            if trial.status in (Trial.PENDING, Trial.PAUSED) and k not in self.serving:
                self.serving.add(k)
                return trial
        return None

    def debug_string(self) -> str:
        counts = Counter(self.outcomes().values())
        return (f"MARAScheduler ({self.label}, {self.nodes} nodes): round {len(self.rounds)}, "
                f"{len(self.serving)} training, {counts['succeeded']} succeeded, {counts['expired']} expired, "
                f"{counts['abandoned']} abandoned, {self.decisions['PAUSE']} pauses")

    # ------------------------------------------------------------------ bookkeeping
    def outcomes(self) -> dict[str, str]:
        """Per trial id: ``succeeded``, ``expired``, ``abandoned``, ``running``, ``queued`` (MARA's view of the
        trial)."""
        if self.simulator is None:
            return {}
        return {trial.trial_id: outcome for trial, outcome in zip(self.trials, self.simulator.task_outcomes())}

    def _rebuild(self) -> None:
        """The simulator over every trial added so far, replayed through the finished rounds (a trial added now
        arrives in the current round, after them, so the replay is the history as it happened)."""
        self.simulator = LiveSimulator(self.config, max(HISTORY_WIDTH, *(task.budget for task in self.tasks)))
        episode = LiveEpisode(tuple(self.tasks), preset="tune")
        self.simulator.load_live(episode, {task.family: FamilySpec(task.family, "ood", "tune", "tune", "tune")
                                     for task in self.tasks})
        for past in self.rounds:
            self._advance(past)
        self._allocate()

    def _advance(self, done: _Round) -> None:
        """The live step of a finished round: a running trial's finite value is its batch's loss, any other
        value fails it."""
        running = {k: value for k, value in done.reports.items() if self.simulator.task_outcome(k) == "running"}
        live_step(self.simulator, done.picks, {k: value for k, value in running.items() if math.isfinite(value)},
                  [k for k, value in running.items() if not math.isfinite(value)])

    def _maybe_close_round(self) -> None:
        """End the round once every trial training in it has a value, then let the allocator choose.  The round
        consumes one pending value of up to M trials that hold a slot (a trial that left without reporting
        counts as failed: NaN); the values of trials still queued wait for their slot."""
        while self.reports and all(self.reports.get(k) for k in self.serving):
            slot_of = {task: slot for slot, task in enumerate(self.simulator.slot_tasks()) if task >= 0}
            ready = [k for k, pending in self.reports.items()
                     if pending and k in slot_of][:self.nodes - len(self.dropping)]
            if not ready:
                return
            values = {k: self.reports[k].pop(0) for k in ready}
            self.reports = {k: pending for k, pending in self.reports.items() if pending}
            served = [slot_of[k] + 1 for k, value in values.items() if math.isfinite(value)]
            self._close(_Round(values, self._with_abandons(served, slot_of)))

    def _abandoned(self, k: int) -> bool:
        """Whether the allocator abandoned trial ``k`` (its abandon applied, or waiting for the next round)."""
        return k in self.dropping or self.simulator.task_outcome(k) == "abandoned"

    def _close(self, done: _Round) -> None:
        """Take a finished round's live step, then let the allocator choose the next."""
        self.rounds.append(done)
        self._advance(done)
        self._allocate()

    def _with_abandons(self, served: list[int], slot_of: dict[int, int]) -> list[int]:
        """A round's joint action: the served picks, then the abandons (K + slot + 1) of the trials being dropped
        (the served ones leave nodes for them), then idle nodes."""
        dropped = [self.config.max_active + slot_of[k] + 1 for k in self.dropping]
        return served + dropped + [0] * (self.nodes - len(served) - len(dropped))

    def _allocate(self) -> None:
        """The allocator's choice for the next round (or the first waiting trial if it chooses none), and the
        trials it abandons.  The abandons take nodes in the next round, as the allocator's action says; where
        they leave no node to train or the allocator serves nothing, they close a round of their own now."""
        slot_tasks = self.simulator.slot_tasks()
        action = [int(pick) for pick in self.policy.act(self.simulator.observation())]
        num_slots = len(slot_tasks)
        self.dropping = [slot_tasks[pick - num_slots - 1] for pick in action
                         if pick > num_slots and slot_tasks[pick - num_slots - 1] >= 0]
        for k in self.dropping:
            self.reports.pop(k, None)
        chosen = [slot_tasks[pick - 1] for pick in action if 0 < pick <= num_slots and slot_tasks[pick - 1] >= 0]
        if self.dropping and (not chosen or len(self.dropping) >= self.nodes):
            slot_of = {task: slot for slot, task in enumerate(slot_tasks) if task >= 0}
            self._close(_Round({}, self._with_abandons([], slot_of)))
            return
        waiting = [task for task in slot_tasks if task >= 0]
        self.chosen = list(dict.fromkeys(chosen)) or waiting[:1]

    def _leave(self, k: int) -> None:
        """Trial ``k`` left on its own (or was stopped): it expires at the end of this round if still active."""
        self.serving.discard(k)
        if (self.simulator is not None and self.simulator.task_outcome(k) not in ENDED and k not in self.dropping
                and not self.reports.get(k)):
            self.reports[k] = [math.nan]
        self._maybe_close_round()
