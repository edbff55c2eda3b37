"""Greedy MAT evaluation is deterministic: batched and sequential play give identical rows."""

from __future__ import annotations

from mara_agents import make_policy
from mara_agents.mat.batch_eval import evaluate_workload_batched
from mara_agents.runner import evaluate_workload

from conftest import SHORT_WINDOW


def test_batched_and_sequential_greedy_evaluation_agree(trained, bank_dir, short_file):
    policy = make_policy("mara-wls", checkpoint=trained.checkpoint)
    sequential = evaluate_workload(policy, short_file, bank=bank_dir, episodes=[1], arrival_window=SHORT_WINDOW)
    batched = evaluate_workload_batched(policy, short_file, bank=bank_dir, episodes=[1], arrival_window=SHORT_WINDOW)
    assert batched == sequential
    assert len(batched) == 1 and batched[0]["steps"] > 0
