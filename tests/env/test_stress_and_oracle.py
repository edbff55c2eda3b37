"""The stress task set separates naive from demand-aware policies; the Oracle bounds every policy."""

import numpy as np
import pytest

from curves.bank import load_bank
from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy, RandomPolicy
from mara_agents.rules.slots import present_slots, serve_in_order, steps_to_deadline
from mara_agents.training.experts import vector_true_remaining
from mara_agents.play.lockstep import Lockstep, evaluate_workload, make_vector_env, sub_observation
from mara_env.fixed_workloads import build_workload
from mara_env.workload import load_workload, save_workload


def true_demand_action(observation: dict[str, np.ndarray], remaining: np.ndarray) -> np.ndarray:
    """Told the true remaining demand: serve, earliest deadline first, only tasks that can still finish."""
    slots = present_slots(observation)
    left = steps_to_deadline(observation, slots)
    feasible = remaining[slots] <= left
    order = slots[feasible][np.argsort(left[feasible], kind="stable")]
    return serve_in_order(order, observation["action_mask"].shape[0])


@pytest.fixture(scope="module")
def stress_file(bank_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("stress") / "stress.json"
    save_workload(path, build_workload(load_bank(bank_dir), "stress", 0.0, roots=2, episodes=2))
    return path


@pytest.mark.parametrize("policy", [FIFOPolicy(), EDFPolicy()], ids=["fifo", "edf"])
def test_fifo_and_edf_complete_nothing_on_stress(bank_dir, stress_file, policy):
    rows = evaluate_workload(policy, stress_file, bank=bank_dir)
    assert all(row["successes"] == 0 for row in rows)
    assert all(row["oracle_successes"] == 13 and row["tasks"] == 20 for row in rows)


def test_true_demand_policy_completes_all_13(bank_dir, stress_file):
    episodes = len(load_workload(stress_file, load_bank(bank_dir)).episodes)
    env = make_vector_env(episodes, bank=str(bank_dir), workload=str(stress_file))
    loop = Lockstep(env, options={"episode": list(range(episodes))})
    played = loop.play(lambda observation, rows: np.stack([
        true_demand_action(sub_observation(observation, row), vector_true_remaining(env)[row]) for row in rows]))
    assert [record["successes"] for _, record in sorted(played.ended, key=lambda ended: ended[0])] == [13] * episodes


@pytest.mark.parametrize("policy", [FIFOPolicy(), EDFPolicy(), RandomPolicy(seed=0)], ids=["fifo", "edf", "random"])
def test_oracle_bounds_every_policy_per_episode(bank_dir, tmp_path, policy):
    path = tmp_path / "w.json"
    save_workload(path, build_workload(load_bank(bank_dir), "id", 0.07, roots=2, episodes=2))
    for row in evaluate_workload(policy, path, bank=bank_dir):
        assert row["oracle_successes"] >= row["successes"]
