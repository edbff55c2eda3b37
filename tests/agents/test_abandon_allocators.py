"""The abandoning allocators (FM-slack, LARA, EDF + their abandon rules): the pieces, hand-built episodes in the
``abandon=True`` env, and clear errors."""

import gymnasium as gym
import numpy as np
import pytest

import mara_env  # noqa: F401
from mara_agents.allocators.abandon import (edf_abandoning, extrapolated_need, fits_share_score,
                                            make_abandoning_policy, predictive_abandoning, with_abandons,
                                            without_slots)
from mara_agents.allocators.lara import LARAPolicy
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.predictors.base import Prediction
from mara_env.features import TASK_FEATURE_INDEX as F
from mara_env.workload import Episode

CURVE = "toy_fast/test/000"  # L(1) … L(5) = 1.937, 2.027, 1.939, 1.806, 1.734
OTHER = "toy_slow/test/001"  # L(1) … L(8) = 2.405, 2.102, 1.920, 1.651, 1.492, 1.387, 1.333, 1.274


class FixedPredictor:
    """Every task needs ``need`` more batches, in every one of 8 samples."""

    def __init__(self, need: float):
        self.need = need

    def predict(self, query) -> Prediction:
        n = query.length.size
        ready = query.length >= 4
        samples = np.where(ready[:, None], self.need, np.nan) * np.ones((n, 8))
        return Prediction(np.full(n, self.need), samples=samples)


def play(policy, bank_dir, episode, **settings):
    env = gym.make("MARA-v0", bank=str(bank_dir), abandon=True, arrival_window=1, disable_env_checker=True,
                   **settings)
    obs, _ = env.reset(options={"episode": episode})
    policy.reset()
    while True:
        obs, _, terminated, _, info = env.step(policy.act(obs))
        if terminated:
            return info


def test_abandons_take_the_idle_nodes_first_then_the_last_ones():
    assert with_abandons(np.array([2, 0, 3, 0]), np.array([4, 1]), 5).tolist() == [2, 10, 3, 7]
    assert with_abandons(np.array([2, 0, 3, 0]), np.array([4, 1, 0]), 5).tolist() == [2, 10, 6, 7]


def test_the_base_allocator_sees_abandoned_slots_as_empty():
    observation = {"tasks": np.ones((3, 11), np.float32), "history": np.ones((3, 5), np.float32),
                   "history_len": np.array([4, 5, 6]), "budget": np.ones(3, np.float32),
                   "global": np.zeros(4, np.float32), "action_mask": np.ones((2, 7), np.int8)}
    view = without_slots(observation, np.array([1]))
    assert view["tasks"][1].sum() == 0 and view["history_len"].tolist() == [4, 0, 6]
    assert view["action_mask"][0].tolist() == [1, 1, 0, 1, 1, 0, 1]
    assert observation["history_len"][1] == 5  # the policy's own observation is left alone


def test_edf_extrapolates_the_covered_log_loss_linearly():
    tasks = np.zeros((3, 11), np.float32)
    tasks[:, F["target_loss"]] = 1.0
    tasks[:, F["initial_loss"]] = np.exp(2.0)  # log(L1 / eps) = 2
    tasks[:, F["log_loss_ratio"]] = [1.0, 2.5, 0.0]  # covered 1, less than none (the loss rose), all of it
    need = extrapolated_need({"tasks": tasks, "history_len": np.array([4, 4, 4])})
    assert need[0] == pytest.approx(4.0, rel=1e-6) and need[1] == np.inf and need[2] == pytest.approx(0.0, abs=1e-6)


def test_the_fm_rule_counts_the_samples_that_fit():
    tasks = np.zeros((2, 11), np.float32)
    tasks[:, F["present"]] = 1.0
    tasks[:, F["remaining_time"]] = 0.5
    observation = {"tasks": tasks, "budget": np.array([20.0, 20.0], np.float32), "history_len": np.array([4, 3])}
    samples = np.array([[5.0, 9.0, 11.0, 30.0], [np.nan] * 4])  # 10 steps left: 2 of 4 fit; slot 1 warms up
    score = fits_share_score(observation, samples, 0.6)
    assert score[0] == pytest.approx(0.1) and score[1] == -np.inf
    assert fits_share_score(observation, samples, 0.5)[0] <= 0


def test_edf_abandons_a_hopeless_task_and_serves_the_one_queued_behind_it(bank_dir):
    episode = Episode.from_lists([0, 0], [CURVE, OTHER], [1e-6, 1.3], [50, 50])
    info = play(edf_abandoning(2.0), bank_dir, episode, num_nodes=1, max_active=1)
    assert info["task_outcomes"] == ("abandoned", "succeeded")
    metrics = info["episode_metrics"]
    assert metrics["wasted_node_steps"] == 4 and metrics["abandoned_feasible"] == 0  # 4 warm-up batches lost


def test_making_room_abandons_only_for_a_task_that_waits(bank_dir):
    alone = play(edf_abandoning(2.0, make_room=True), bank_dir, Episode.from_lists([0], [CURVE], [1e-6], [20]),
                 num_nodes=1, max_active=1)
    assert alone["task_outcomes"] == ("expired",)  # nothing waits for its slot: it is kept to its deadline
    queued = Episode.from_lists([0, 0], [CURVE, OTHER], [1e-6, 1.3], [50, 50])
    info = play(edf_abandoning(2.0, make_room=True), bank_dir, queued, num_nodes=1, max_active=1)
    assert info["task_outcomes"] == ("abandoned", "succeeded")


def test_edf_keeps_a_task_on_course(bank_dir):
    info = play(edf_abandoning(2.0), bank_dir, Episode.from_lists([0], [OTHER], [1.3], [50]), num_nodes=1)
    assert info["task_outcomes"] == ("succeeded",) and info["episode_metrics"]["abandoned"] == 0


@pytest.mark.parametrize("base", [SlackPolicy, LARAPolicy])
@pytest.mark.parametrize(("need", "outcome"), [(60.0, "abandoned"), (1.0, "succeeded")])
def test_predictive_rules_abandon_what_their_estimate_says_cannot_finish(bank_dir, base, need, outcome):
    policy = predictive_abandoning(base(FixedPredictor(need)), 0.5 if base is SlackPolicy else 1.0,
                                   samples=base is SlackPolicy)
    info = play(policy, bank_dir, Episode.from_lists([0], [OTHER], [1.3], [50]), num_nodes=2)
    assert info["task_outcomes"] == (outcome,)


def test_lara_reads_a_cap_answer_as_no_estimate(bank_dir):
    """WLS answers the generation cap 2·B − s when it has no fit; LARA's rule then keeps the task."""
    policy = predictive_abandoning(LARAPolicy(FixedPredictor(100.0)), 1.0, samples=False)
    info = play(policy, bank_dir, Episode.from_lists([0], [OTHER], [1.3], [50]), num_nodes=2)
    assert info["task_outcomes"] == ("succeeded",)


def test_an_abandoning_allocator_refuses_the_default_env(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), disable_env_checker=True)
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="abandon=True"):
        edf_abandoning(2.0).act(obs)


def test_unknown_names_and_bad_thresholds_are_refused():
    with pytest.raises(ValueError, match="unknown abandoning allocator"):
        make_abandoning_policy("fifo+abandon")
    with pytest.raises(ValueError, match="threshold"):
        make_abandoning_policy("edf+abandon", threshold=-1.0)
