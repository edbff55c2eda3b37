"""``act_batch`` (greedy MAT, LARA) gives every observation the action ``act`` gives it alone, which is what
lets the evaluation harness play a workload file's episodes in lock-step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mara_agents import make_policy

from conftest import SHORT_WINDOW


@pytest.mark.parametrize("method", ["mara-wls", "lara"])
def test_batched_actions_equal_one_at_a_time(method, trained, bank_dir, short_file):
    policy = make_policy(method, checkpoint=trained.checkpoint) if method == "mara-wls" else make_policy(method)
    env = gym.make("MARA-v0", workload=str(short_file), bank=str(bank_dir), arrival_window=SHORT_WINDOW)
    observations = []
    for episode in (0, 1):  # states from both episodes and many times: a mixed batch, as in the harness
        observation, _ = env.reset(options={"episode": episode})
        for _ in range(30):
            observations.append(observation)
            observation, *_ = env.step(policy.act(observation))
    env.close()
    batched = policy.act_batch(observations)
    single = np.stack([policy.act(observation) for observation in observations])
    assert batched.shape == (len(observations), single.shape[1])
    np.testing.assert_array_equal(batched, single)
    assert (single > 0).any(), "the policy should serve at least once (0 is idle), or the check is vacuous"
