"""The privileged critic (``train.py mat --privileged-critic``): its inputs read the true remaining demand of
every sub-env, it alone moves in the critic-only warm-up, and it is trained and resumed but never exported."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch

import mara_agents.training.train as mat_train
from mara_agents.mat.checkpoint import load_policy_model
from mara_agents.training.critic import PRIVILEGED_FEATURES, PrivilegedCritic, privileged_features
from mara_agents.training.experts import vector_true_remaining
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.training.ppo import PPOSettings, ValueNorm, ppo_update
from mara_agents.training.rollout import VectorRollout, make_training_envs
from mara_agents.mat.tokens import Tokens
from mara_env.config import MARAConfig
from mara_env.features import TASK_FEATURE_INDEX

from conftest import tiny_config
from test_ppo import tiny_batch

SHORT = {"arrival_window": 20, "arrival_prob": 0.3}


def random_legal_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(N, M) picks, each uniform over the choices the action mask allows."""
    scores = rng.random(mask.shape) * mask
    return scores.argmax(axis=-1)


def test_the_native_vector_env_reads_the_same_true_remaining_as_single_envs(bank_dir):
    config = MARAConfig(bank=str(bank_dir), **SHORT)
    native, sync = (make_training_envs(config, 3, mode) for mode in ("vector_entry_point", "sync"))
    observations = [envs.reset(seed=[11, 12, 13])[0] for envs in (native, sync)]
    rng, seen = np.random.default_rng(0), []
    for _ in range(150):
        remaining = [vector_true_remaining(envs) for envs in (native, sync)]
        np.testing.assert_array_equal(*remaining)
        seen.append(remaining[0])
        actions = random_legal_actions(observations[0]["action_mask"], rng)
        results = [envs.step(actions) for envs in (native, sync)]
        observations, ended = [result[0] for result in results], results[0][2]
        if ended.any():
            observations = [envs.reset(options={"reset_mask": ended.copy()})[0] for envs in (native, sync)]
    seen = np.stack(seen)
    assert (seen > 0).any() and len({tuple(row.ravel()) for row in seen}) > 10  # it is read, and it changes


def test_the_sync_reading_is_the_single_env_reading():
    env = gym.make_vec("MARA-v0", num_envs=2, vectorization_mode="sync")
    env.reset(seed=[3, 4])
    expected = np.stack([e.unwrapped.privileged_true_remaining() for e in env.unwrapped.envs])
    np.testing.assert_array_equal(vector_true_remaining(env), expected)
    with pytest.raises(TypeError, match="MARA vector env"):
        vector_true_remaining(gym.make_vec("CartPole-v1", num_envs=1, vectorization_mode="sync"))


def test_privileged_features_are_scaled_and_zero_for_empty_slots():
    tasks = np.zeros((2, 3, len(TASK_FEATURE_INDEX)), dtype=np.float32)
    tasks[:, 0, TASK_FEATURE_INDEX["present"]] = 1.0
    tasks[:, 0, TASK_FEATURE_INDEX["remaining_time"]] = 0.5  # 100 steps left of a 200-step budget
    observation = {"tasks": tasks, "budget": np.array([[200.0, 0.0, 0.0]] * 2, dtype=np.float32)}
    remaining = np.array([[60.0, 9.0, 0.0], [150.0, 9.0, 0.0]])
    features = privileged_features(observation, remaining)
    assert features.shape == (2, 3, len(PRIVILEGED_FEATURES))
    np.testing.assert_allclose(features[0, 0], [60 / 500, 40 / 200, 1.0])
    np.testing.assert_allclose(features[1, 0], [150 / 500, -50 / 200, 0.0])
    assert not features[:, 1:].any()


def test_a_critic_only_update_moves_the_privileged_critic_and_nothing_of_the_actor():
    torch.manual_seed(0)
    model = MATModel(MATHyperParameters(dim=32))
    critic = PrivilegedCritic(model.hparams)
    batch = tiny_batch(model)
    batch = type(batch)(**{**batch.__dict__, "privileged": torch.rand(len(batch), 10, len(PRIVILEGED_FEATURES))})
    actor_before = {name: value.clone() for name, value in model.state_dict().items()}
    values_before = critic(Tokens(batch.slots, batch.glob, batch.present), batch.privileged).detach()
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
    ppo_update(model, optimizer, batch, ValueNorm(), PPOSettings(epochs=2, minibatches=1),
               torch.Generator().manual_seed(0), critic_only=True, critic=critic)
    assert all(torch.equal(value, actor_before[name]) for name, value in model.state_dict().items())
    values_after = critic(Tokens(batch.slots, batch.glob, batch.present), batch.privileged).detach()
    assert not torch.allclose(values_after, values_before)
    changed = critic(Tokens(batch.slots, batch.glob, batch.present), 1.0 - batch.privileged).detach()
    assert not torch.allclose(changed, values_after)  # the privileged inputs reach the value


def test_training_with_the_privileged_critic_resumes_it_and_exports_the_actor_alone(bank_dir, tmp_path):
    config = tiny_config(bank_dir, tmp_path / "run", steps=40, validate_every=0, privileged_critic=True,
                         critic_warmup=1)
    first = mat_train.train(config)
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=False)
    assert "privileged_critic" in state
    exported, _ = load_policy_model(first.checkpoint)
    assert exported.state_dict().keys() == MATModel(config.hparams()).state_dict().keys()
    config.steps = 60
    resumed = mat_train.train(config)
    after = torch.load(tmp_path / "run" / "last.pt", weights_only=False)
    assert resumed.global_step == 60
    assert any(not torch.equal(after["privileged_critic"][name], value)
               for name, value in state["privileged_critic"].items())


def test_privileged_training_gives_identical_parameters_through_both_vectorisations(bank_dir, tmp_path, monkeypatch):
    weights = {}
    for mode in ("vector_entry_point", "sync"):
        config = tiny_config(bank_dir, tmp_path / mode, steps=360, validate_every=0, num_envs=2, rollout_steps=30,
                             privileged_critic=True, **SHORT)
        monkeypatch.setattr(mat_train, "VectorRollout", functools.partial(VectorRollout, vectorization_mode=mode))
        weights[mode] = torch.load(mat_train.train(config).checkpoint, weights_only=True)["state_dict"]
        assert "privileged_critic" in torch.load(tmp_path / mode / "last.pt", weights_only=False)
    native, sync = weights["vector_entry_point"], weights["sync"]
    assert all(torch.equal(native[key], sync[key]) for key in native)
