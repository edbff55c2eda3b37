"""PPO + GAE pieces: advantages, value normalisation, and that an update lowers the loss."""

from __future__ import annotations

import numpy as np
import torch

from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.training.ppo import PPOSettings, Rollout, ValueNorm, gae, ppo_loss, ppo_update
from mara_agents.mat.tokens import NUM_SLOT_FEATURES, Tokens


def test_gae_with_lambda_one_and_gamma_one_is_reward_to_go_minus_value():
    rewards = torch.tensor([[1.0], [0.0], [2.0], [0.5]])
    values = torch.tensor([[0.3], [0.1], [0.2], [0.4]])
    dones = torch.tensor([[0.0], [1.0], [0.0], [0.0]])  # the first episode ends after step 1
    last = torch.tensor([5.0])
    advantages, returns = gae(rewards, values, dones, last, gamma=1.0, lam=1.0)
    expected_returns = torch.tensor([[1.0], [0.0], [7.5], [5.5]])
    assert torch.allclose(returns, expected_returns)
    assert torch.allclose(advantages, expected_returns - values)


def test_value_norm_tracks_the_mean_and_variance_of_everything_seen():
    norm = ValueNorm()
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=n) for n in (10, 50, 7)]
    for chunk in chunks:
        norm.update(torch.tensor(chunk))
    seen = np.concatenate(chunks)
    assert abs(norm.mean.item() - seen.mean()) < 1e-9 and abs(norm.var.item() - seen.var()) < 1e-9
    x = torch.tensor([1.0, 4.0], dtype=torch.float64)
    assert torch.allclose(norm.denormalise(norm.normalise(x)), x)


def tiny_batch(model: MATModel, n: int = 64) -> Rollout:
    """A flattened rollout of ``n`` random transitions played by ``model``, its own reference policy."""
    g = torch.Generator().manual_seed(0)
    present = torch.rand(n, 10, generator=g) < 0.6
    slots = torch.randn(n, 10, NUM_SLOT_FEATURES, generator=g) * present[..., None]
    glob = torch.rand(n, 4, generator=g)
    actions, log_probs, _ = model.act(Tokens(slots, glob, present), generator=torch.Generator().manual_seed(1))
    return Rollout(slots, glob, present, actions, log_probs, values=torch.zeros(n), rewards=torch.zeros(n),
                   dones=torch.zeros(n), advantages=torch.randn(n, generator=g),
                   returns=torch.randn(n, generator=g) * 3 + 1, reference_log_probs=log_probs.clone())


def test_ppo_update_lowers_the_loss_on_a_fixed_batch():
    torch.manual_seed(0)
    model = MATModel(MATHyperParameters(dim=32))
    batch, norm, settings = tiny_batch(model), ValueNorm(), PPOSettings(epochs=1, minibatches=1)
    norm.update(batch.returns)
    before, _ = ppo_loss(model, batch, norm, settings)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(15):
        stats = ppo_update(model, optimizer, batch, norm, settings, torch.Generator().manual_seed(0))
    after, _ = ppo_loss(model, batch, norm, settings)
    assert after.item() < before.item() - 0.1
    assert np.isfinite(stats["grad_norm"])


def test_the_first_ppo_step_starts_at_ratio_one():
    model = MATModel(MATHyperParameters(dim=32))
    batch, norm = tiny_batch(model), ValueNorm()
    _, stats = ppo_loss(model, batch, norm, PPOSettings())
    assert abs(stats["approx_kl"]) < 1e-6 and stats["clip_fraction"] == 0.0
