"""The stress task set separates naive from demand-aware policies; the Oracle bounds every policy."""

import numpy as np
import pytest

from curves.bank import load_bank
from mara_agents.allocators.naive import EDFPolicy, FIFOPolicy, RandomPolicy, serve_in_order
from mara_agents.runner import evaluate_workload
from mara_env.fixed_workloads import build_workload
from mara_env.workload import save_workload


class TrueDemandPolicy:
    """Told the true remaining demand: serve, earliest deadline first, only tasks that can still finish."""

    def __init__(self):
        self.env = None

    def reset(self):
        pass

    def act(self, observation):
        sim = self.env.unwrapped.engine.sim
        slots = np.flatnonzero(sim.slot_task >= 0)
        tasks = sim.slot_task[slots]
        crossing = np.array([np.argmax(np.append(sim.loss_table[k, 1:] <= sim.eps[k], True)) + 1 for k in tasks])
        left = sim.deadline[tasks] - sim.t
        feasible = crossing - sim.batches[tasks] <= left
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
    policy = TrueDemandPolicy()
    rows = evaluate_workload(policy, stress_file, bank=bank_dir,
                             wrap=lambda env: setattr(policy, "env", env) or env)
    assert [row["successes"] for row in rows] == [13] * len(rows)


@pytest.mark.parametrize("policy", [FIFOPolicy(), EDFPolicy(), RandomPolicy(seed=0)], ids=["fifo", "edf", "random"])
def test_oracle_bounds_every_policy_per_episode(bank_dir, tmp_path, policy):
    path = tmp_path / "w.json"
    save_workload(path, build_workload(load_bank(bank_dir), "id", 0.07, roots=2, episodes=2))
    for row in evaluate_workload(policy, path, bank=bank_dir):
        assert row["oracle_successes"] >= row["successes"]
