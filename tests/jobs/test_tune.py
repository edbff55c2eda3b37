"""``mara_agents.live.tune.MARAScheduler`` drives a real ``tune.Tuner`` of small trials on a local Ray with 2 CPUs."""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Tune tests need the [ray] extra")

from ray import tune  # noqa: E402
from ray.tune.schedulers import TrialScheduler  # noqa: E402

from mara_agents.live.tune import MARAScheduler  # noqa: E402

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)


class Fit(tune.Trainable):
    """Least squares by minibatch gradient descent; its checkpoint holds the weights and the RNG, so a paused
    trial resumes exactly where it stopped."""

    def setup(self, config):
        rng = np.random.default_rng(config["seed"])
        self.x = rng.normal(size=(256, 4))
        self.y = self.x @ rng.normal(size=4)
        self.w, self.rng, self.lr = np.zeros(4), rng, config.get("rate", 0.1)

    def step(self):
        rows = self.rng.integers(0, 256, 16)
        error = self.x[rows] @ self.w - self.y[rows]
        self.w -= self.lr * self.x[rows].T @ error / len(rows)
        return {"loss": float(np.mean(error**2))}

    def save_checkpoint(self, folder):
        with open(os.path.join(folder, "state.pkl"), "wb") as handle:
            pickle.dump((self.w, self.rng), handle)

    def load_checkpoint(self, folder):
        with open(os.path.join(folder, "state.pkl"), "rb") as handle:
            self.w, self.rng = pickle.load(handle)


DEADLINES = {1: 60, 2: 60, 3: 25, 4: 30, 5: 12}  # EDF serves 5, 3 and 4 first: 1 and 2 wait or are paused
# Offline, the running mean of the losses reaches 0.5 after 14 (seed 1), 38 (2), 20 (3) and 25 (5) iterations,
# and never for seed 4.  Under EDF, 5 trains every round until its deadline and expires, 3 succeeds before its
# deadline, 4 expires, and of the two late trials only 1 (the faster) succeeds; serving trials in arrival order
# instead would let 1 and 2 succeed and 3 expire.
EDF_OUTCOMES = {1: "succeeded", 2: "expired", 3: "succeeded", 4: "expired", 5: "expired"}


def offline(seed: int, steps: int) -> list[float]:
    trainable = Fit.__new__(Fit)
    trainable.setup({"seed": seed})
    return [trainable.step()["loss"] for _ in range(steps)]


def tune_fits(scheduler: MARAScheduler, space: dict, folder) -> tune.ResultGrid:
    """``Fit`` trials over ``space`` under ``scheduler``, on a local Ray with 2 CPUs that is shut down after."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import a test file
    try:
        tuner = tune.Tuner(tune.with_resources(Fit, {"cpu": 1}), param_space=space,
                           tune_config=tune.TuneConfig(scheduler=scheduler, metric="loss", mode="min"),
                           run_config=tune.RunConfig(storage_path=str(folder), verbose=0))
        return tuner.fit()
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    scheduler = MARAScheduler("edf", nodes=2, target=0.5)
    space = {"seed": tune.grid_search(list(DEADLINES)),
             "deadline": tune.sample_from(lambda config: DEADLINES[config["seed"]])}
    return scheduler, tune_fits(scheduler, space, tmp_path_factory.mktemp("tune"))


def outcome_by_seed(scheduler: MARAScheduler) -> dict[int, str]:
    seed_of = {trial.trial_id: trial.config["seed"] for trial in scheduler.trials}
    return {seed_of[trial_id]: outcome for trial_id, outcome in scheduler.outcomes().items()}


def test_the_tuner_serves_trials_in_edf_order_to_success_or_expiry(tuned):
    scheduler, results = tuned
    assert len(results) == 5 and not results.errors
    assert outcome_by_seed(scheduler) == EDF_OUTCOMES
    trial_of = {trial.config["seed"]: trial.trial_id for trial in scheduler.trials}
    assert scheduler.iterations[trial_of[5]] == DEADLINES[5]  # the earliest deadline trains in every round
    assert scheduler.max_running <= 2
    assert scheduler.decisions["PAUSE"] >= 1 and scheduler.decisions["STOP"] == sum(bool(r.metrics) for r in results)


def test_each_trial_stops_at_its_target_or_deadline_with_the_offline_losses(tuned):
    scheduler, results = tuned
    outcomes = outcome_by_seed(scheduler)
    for result in results:
        outcome = outcomes[result.config["seed"]]
        losses = [] if result.metrics_dataframe is None else result.metrics_dataframe["loss"].tolist()
        assert 1 <= len(losses) <= result.config["deadline"]  # every trial of this grid is served at least once
        np.testing.assert_array_equal(losses, offline(result.config["seed"], len(losses)))
        means = np.cumsum(losses) / np.arange(1, len(losses) + 1)
        if outcome == "succeeded":
            assert means[-1] <= 0.5 and (means[:-1] > 0.5).all()
        else:
            assert outcome == "expired" and (means > 0.5).all()


def test_an_abandoning_allocator_stops_a_hopeless_trial_of_a_real_tuner(tmp_path):
    """One node, EDF + abandon (abandoning whenever its rule says so): seed 2 is due first, and its negative
    learning rate makes its loss grow, so after four iterations the rule abandons it; seed 1 then trains alone
    and meets its target (offline, after 14 iterations)."""
    from mara_agents import make_policy

    scheduler = MARAScheduler(make_policy("edf+abandon", make_room=False), nodes=1, target=0.5)
    settings = {1: (0.1, 60), 2: (-0.5, 20)}  # seed: (learning rate, deadline)
    space = {"seed": tune.grid_search(list(settings)), "rate": tune.sample_from(lambda c: settings[c["seed"]][0]),
             "deadline": tune.sample_from(lambda c: settings[c["seed"]][1])}
    results = tune_fits(scheduler, space, tmp_path)
    assert not results.errors and outcome_by_seed(scheduler) == {1: "succeeded", 2: "abandoned"}
    trial_of = {trial.config["seed"]: trial.trial_id for trial in scheduler.trials}
    assert 4 <= scheduler.iterations[trial_of[2]] <= 5  # a report already on its way when it was abandoned
    assert scheduler.iterations[trial_of[1]] >= 14


def test_each_finished_round_is_one_live_step(monkeypatch):
    """Without Tune running: a round's finite value is revealed and a NaN fails its trial, both in the live
    step every live front end takes."""
    from types import SimpleNamespace

    from ray.tune.experiment import Trial

    import mara_agents.live.tune as scheduler_module
    from mara_env.live.step import live_step

    taken = []

    def recorded(sim, picks, losses, failed, repaired=None):
        taken.append((list(picks), dict(losses), list(failed)))
        return live_step(sim, picks, losses, failed, repaired)

    monkeypatch.setattr(scheduler_module, "live_step", recorded)
    scheduler = MARAScheduler("fifo", nodes=1, metric="loss", target=0.5, deadline=5)
    trials = [SimpleNamespace(trial_id=f"t{k}", config={}, status=Trial.RUNNING) for k in range(2)]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    assert scheduler.on_trial_result(None, trials[0], {"loss": 1.0}) == TrialScheduler.CONTINUE
    assert scheduler.on_trial_result(None, trials[0], {"loss": float("nan")}) == TrialScheduler.STOP
    assert taken == [([1], {0: 1.0}, []), ([0], {}, [0])]
    assert scheduler.outcomes()["t0"] == "expired" and scheduler.simulator.per_batch[0] == [1.0]


def test_an_abandoning_allocator_stops_the_trial_it_abandons_in_the_next_round():
    """Without Tune running: EDF + abandon (abandoning whenever its rule says so) serves the earlier deadline
    first; that trial's value never falls, so after four values the rule abandons it: it is stopped, and its
    abandon takes the one node in a round of its own, as ``MARA-v0``'s abandon choice K + 1 does."""
    from types import SimpleNamespace

    from ray.tune.experiment import Trial

    from mara_agents import make_policy

    scheduler = MARAScheduler(make_policy("edf+abandon", make_room=False), nodes=1, metric="loss", target=0.5)
    trials = [SimpleNamespace(trial_id=f"t{k}", config={"deadline": 20 + 10 * k}, status=Trial.RUNNING)
              for k in range(2)]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    decisions = [scheduler.on_trial_result(None, trials[0], {"loss": 2.0}) for _ in range(4)]
    assert decisions == [TrialScheduler.CONTINUE] * 3 + [TrialScheduler.STOP]
    assert scheduler.outcomes() == {"t0": "abandoned", "t1": "running"}
    assert [done.picks for done in scheduler.rounds] == [[1]] * 4 + [[scheduler.config.max_active + 1]]
    scheduler.on_trial_complete(None, trials[0], {})
    assert scheduler.chosen == [1] and scheduler.outcomes()["t0"] == "abandoned"
    assert "1 abandoned" in scheduler.debug_string()
    assert scheduler.on_trial_result(None, trials[1], {"loss": 0.1}) == TrialScheduler.STOP
    assert scheduler.outcomes()["t1"] == "succeeded"


@pytest.mark.parametrize("arguments, message", [
    ({"ema_decay": 1.5}, r"ema_decay must be in \[0, 1\), got 1.5"),
    ({"ema_decay": -0.1}, "ema_decay must be ≥ 0.0, got -0.1"),
    ({"ema_decay": "high"}, "ema_decay must be a number, got 'high'"),
    ({"target": -1}, "target must be greater than 0.0, got -1"),
    ({"target": float("nan")}, "target must be a finite number"),
    ({"deadline": 0}, "deadline must be ≥ 1, got 0"),
    ({"deadline": 2.5}, "deadline must be an integer, got 2.5"),
])
def test_a_bad_argument_is_refused_at_construction_naming_it(arguments, message):
    with pytest.raises((ValueError, TypeError), match=message):
        MARAScheduler("edf", nodes=2, **arguments)


def test_a_trials_own_bad_target_is_refused_naming_the_trial_and_its_key():
    class Added:
        trial_id, config = "t0", {"goal": -1.0}

    scheduler = MARAScheduler("edf", nodes=2, deadline=10, target_key="goal")
    with pytest.raises(ValueError, match=r"trial t0: config\['goal'\] must be greater than 0.0, got -1.0"):
        scheduler.on_trial_add(None, Added())
