"""``mara_agents.tune.MARAScheduler`` drives a real ``tune.Tuner`` of small trials on a local Ray with 2 CPUs."""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Tune tests need the [ray] extra")

from ray import tune  # noqa: E402
from ray.tune.schedulers import TrialScheduler  # noqa: E402

from mara_agents.tune import MARAScheduler  # noqa: E402


class Fit(tune.Trainable):
    """Least squares by minibatch gradient descent; its checkpoint holds the weights and the RNG, so a paused
    trial resumes exactly where it stopped."""

    def setup(self, config):
        rng = np.random.default_rng(config["seed"])
        self.x = rng.normal(size=(256, 4))
        self.y = self.x @ rng.normal(size=4)
        self.w, self.rng = np.zeros(4), rng

    def step(self):
        rows = self.rng.integers(0, 256, 16)
        error = self.x[rows] @ self.w - self.y[rows]
        self.w -= 0.1 * self.x[rows].T @ error / len(rows)
        return {"loss": float(np.mean(error**2))}

    def save_checkpoint(self, folder):
        with open(os.path.join(folder, "state.pkl"), "wb") as handle:
            pickle.dump((self.w, self.rng), handle)

    def load_checkpoint(self, folder):
        with open(os.path.join(folder, "state.pkl"), "rb") as handle:
            self.w, self.rng = pickle.load(handle)


DEADLINES = {1: 60, 2: 60, 3: 25, 4: 30, 5: 12}  # EDF serves 5, 3 and 4 first: 1 and 2 wait or are paused


def offline(seed: int, steps: int) -> list[float]:
    trainable = Fit.__new__(Fit)
    trainable.setup({"seed": seed})
    return [trainable.step()["loss"] for _ in range(steps)]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import a test file
    try:
        scheduler = MARAScheduler("edf", nodes=2, target=0.5)
        space = {"seed": tune.grid_search(list(DEADLINES)),
                 "deadline": tune.sample_from(lambda config: DEADLINES[config["seed"]])}
        tuner = tune.Tuner(tune.with_resources(Fit, {"cpu": 1}), param_space=space,
                           tune_config=tune.TuneConfig(scheduler=scheduler, metric="loss", mode="min"),
                           run_config=tune.RunConfig(storage_path=str(tmp_path_factory.mktemp("tune")), verbose=0))
        results = tuner.fit()
    finally:
        ray.shutdown()
    return scheduler, results


def test_the_tuner_runs_every_trial_to_success_or_expiry(tuned):
    scheduler, results = tuned
    assert len(results) == 5 and not results.errors
    assert sorted(scheduler.outcomes().values()) in (["expired"] * k + ["succeeded"] * (5 - k) for k in range(6))
    assert "succeeded" in scheduler.outcomes().values()
    assert scheduler.max_running <= 2
    assert scheduler.decisions["PAUSE"] >= 1 and scheduler.decisions["STOP"] == sum(bool(r.metrics) for r in results)


def test_each_trial_stops_at_its_target_or_deadline_with_the_offline_losses(tuned):
    scheduler, results = tuned
    for result in results:
        outcome = scheduler.outcomes()[result.metrics["trial_id"]] if result.metrics else "expired"
        losses = [] if result.metrics_dataframe is None else result.metrics_dataframe["loss"].tolist()
        assert len(losses) <= result.config["deadline"]
        np.testing.assert_array_equal(losses, offline(result.config["seed"], len(losses)))
        means = np.cumsum(losses) / np.arange(1, len(losses) + 1)
        if outcome == "succeeded":
            assert means[-1] <= 0.5 and (means[:-1] > 0.5).all()
        else:
            assert (means > 0.5).all()


def test_each_finished_round_is_one_live_step(monkeypatch):
    """Without Tune running: a round's finite value is revealed and a NaN fails its trial, both in the live
    step every live front end takes."""
    from types import SimpleNamespace

    from ray.tune.experiment import Trial

    import mara_agents.tune as scheduler_module
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
