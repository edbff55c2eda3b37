"""MAT reads node tokens when the env has node options (``node_speeds``, ``switch_cost``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents.mat.policy import load_mat_policy
from mara_agents.mat.model import MATModel
from mara_agents.mat.tokens import NUM_NODE_TOKEN_FEATURES, NUM_SLOT_FEATURES, build_tokens
from mara_agents.training.train import train
from mara_agents.play.lockstep import play_episode

from conftest import tiny_config

SPEEDS = (1, 1, 1, 2, 2, 2, 4)


def _observation(bank_dir, steps: int = 60, **options):
    env = gym.make("MARA-v0", bank=str(bank_dir), **options)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, *_ = env.step(rng.integers(0, 11, size=7))
    return obs


def test_node_tokens_carry_speed_setup_and_the_slot_each_node_served(bank_dir):
    obs = _observation(bank_dir, node_speeds=SPEEDS, switch_cost=2)
    tokens = build_tokens(obs, np.zeros(obs["history_len"].shape))
    assert tokens.slots.shape == (10, NUM_SLOT_FEATURES + 2)
    assert tokens.nodes.shape == (7, NUM_NODE_TOKEN_FEATURES + 10)
    np.testing.assert_allclose(tokens.nodes[:, 0], np.log2(SPEEDS))
    last_pick = obs["nodes"][:, 1].astype(int)
    stays = tokens.nodes[:, NUM_NODE_TOKEN_FEATURES:]
    for node, pick in enumerate(last_pick):  # one 1 at the slot the node served, none for a node that idled
        assert stays[node].sum() == (pick > 0) and (pick == 0 or stays[node, pick - 1] == 1)
    plain = build_tokens(_observation(bank_dir), np.zeros(10))
    assert plain.nodes is None and plain.slots.shape == (10, NUM_SLOT_FEATURES)


@pytest.fixture(scope="module")
def node_run(bank_dir, tmp_path_factory):
    return train(tiny_config(bank_dir, tmp_path_factory.mktemp("node_run"), node_speeds=SPEEDS, switch_cost=1,
                             steps=40))


def test_a_run_with_node_options_trains_a_node_token_model_that_plays_them(node_run, bank_dir, short_file):
    policy = load_mat_policy(node_run.checkpoint)
    assert policy.model.hparams.node_features == NUM_NODE_TOKEN_FEATURES
    metrics = play_episode(policy, 0, workload=str(short_file), bank=str(bank_dir), node_speeds=SPEEDS,
                           switch_cost=1, arrival_window=40)
    assert metrics["conflicts"] == 0 and 0.0 <= metrics["success_rate"] <= 1.0
    with pytest.raises(ValueError, match="switch_cost=1; the env it is asked to play has .*switch_cost=0"):
        play_episode(policy, 0, workload=str(short_file), bank=str(bank_dir), arrival_window=40)


def test_sequential_decoding_matches_teacher_forcing_with_node_tokens(node_run, bank_dir):
    model: MATModel = load_mat_policy(node_run.checkpoint).model
    with torch.no_grad():
        model.stay_weight.fill_(3.0)  # a strong preference to stay, so that the stay term matters
    obs = _observation(bank_dir, node_speeds=SPEEDS, switch_cost=1)
    tokens = build_tokens({k: v[None] for k, v in obs.items()}, np.zeros((1, 10))).to("cpu")
    actions, log_probs, _ = model.act(tokens, generator=torch.Generator().manual_seed(0))
    again, _, _ = model.evaluate(tokens, actions)
    torch.testing.assert_close(log_probs, again, atol=1e-5, rtol=0)
