"""PPO from an exported policy: a critic-only warm-up that leaves the policy alone, and a KL penalty toward
the starting policy (``train.py mat --init-from P --critic-warmup N --reference-kl C``)."""

from __future__ import annotations

import json

import pytest
import torch

from mara_agents.play.checkpoints import load_run_state
from mara_agents.mat.checkpoint import load_policy_model
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.training.ppo import PPOSettings, Rollout, ValueNorm, ppo_loss, ppo_update
from mara_agents.mat.tokens import Tokens
from mara_agents.training.train import train

from conftest import tiny_config
from test_ppo import tiny_batch


def policy_logits(model: MATModel, batch: Rollout) -> torch.Tensor:
    with torch.no_grad():
        return model.evaluate(Tokens(batch.slots, batch.glob, batch.present), batch.actions)[0]


def test_a_critic_only_update_moves_the_values_and_not_the_policy():
    torch.manual_seed(0)
    model = MATModel(MATHyperParameters(dim=32))
    batch, norm = tiny_batch(model), ValueNorm()
    before_policy, before_values = policy_logits(model, batch), model.values(model.encode(
        Tokens(batch.slots, batch.glob, batch.present))).detach()
    critic = torch.optim.Adam(model.value_head.parameters(), lr=1e-2)
    ppo_update(model, critic, batch, norm, PPOSettings(epochs=2, minibatches=1), torch.Generator().manual_seed(0),
               critic_only=True)
    assert torch.equal(policy_logits(model, batch), before_policy)
    after_values = model.values(model.encode(Tokens(batch.slots, batch.glob, batch.present))).detach()
    assert not torch.allclose(after_values, before_values)


def critic_only_update(epochs: int) -> tuple[MATModel, dict[str, float]]:
    """A critic-only update of a fresh model at a tiny learning rate (so every step's gradients are alike)."""
    torch.manual_seed(0)
    model = MATModel(MATHyperParameters(dim=32))
    critic = torch.optim.Adam(model.value_head.parameters(), lr=1e-7)
    stats = ppo_update(model, critic, tiny_batch(model), ValueNorm(),
                       PPOSettings(epochs=epochs, minibatches=1, max_grad_norm=1e9), torch.Generator().manual_seed(0),
                       critic_only=True)
    return model, stats


def test_a_critic_only_update_clips_over_the_value_head_alone_and_piles_up_no_gradient():
    model, stats = critic_only_update(epochs=1)
    head = torch.cat([parameter.grad.reshape(-1) for parameter in model.value_head.parameters()])
    assert stats["grad_norm"] == pytest.approx(head.norm().item(), rel=1e-5)
    encoder_grad = model.slot_in[0].weight.grad.norm().item()
    assert encoder_grad > 0  # the value loss does reach the encoder
    piled, _ = critic_only_update(epochs=4)
    assert piled.slot_in[0].weight.grad.norm().item() == pytest.approx(encoder_grad, rel=0.05)


def test_the_reference_kl_is_zero_at_the_reference_and_grows_as_the_policy_leaves_it():
    torch.manual_seed(0)
    model = MATModel(MATHyperParameters(dim=32))
    batch, norm = tiny_batch(model), ValueNorm()
    norm.update(batch.returns)
    settings = PPOSettings()
    _, at_reference = ppo_loss(model, batch, norm, settings, kl_weight=1.0)
    assert at_reference["reference_kl"] == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():
        model.pointer_query.weight.mul_(3.0)
    _, moved = ppo_loss(model, batch, norm, settings, kl_weight=1.0)
    assert moved["reference_kl"] > 1e-3
    _, without = ppo_loss(model, batch, norm, PPOSettings())
    assert "reference_kl" not in without


def test_training_from_an_exported_policy_starts_from_its_weights_and_records_it(bank_dir, tmp_path):
    first = train(tiny_config(bank_dir, tmp_path / "first", steps=20, validate_every=0))
    start, _ = load_policy_model(first.checkpoint)
    config = tiny_config(bank_dir, tmp_path / "tuned", steps=20, validate_every=0, init_from=str(first.checkpoint),
                         method="mat-il", critic_warmup=1)
    tuned = train(config)
    after, _ = load_policy_model(tuned.checkpoint)
    moved = {name for name, value in after.state_dict().items() if not torch.equal(value, start.state_dict()[name])}
    assert moved and all(name.startswith("value_head.") for name in moved)  # one update, critic only
    manifest = json.loads(tuned.checkpoint.with_suffix(".json").read_text())
    assert manifest["method"] == "mat-il"
    assert manifest["initial_policy"]["checkpoint_sha256"] == json.loads(
        first.checkpoint.with_suffix(".json").read_text())["checkpoint_sha256"]


def test_a_start_candidate_run_scores_its_start_first_and_keeps_it_when_nothing_beats_it(bank_dir, tmp_path):
    first = train(tiny_config(bank_dir, tmp_path / "first", steps=20, validate_every=0))
    start, _ = load_policy_model(first.checkpoint)
    tuned = train(tiny_config(bank_dir, tmp_path / "tuned", steps=40, validate_every=20, method="mat-il",
                              init_from=str(first.checkpoint), critic_warmup=2, start_candidate=True))  # the policy never moves
    validation = load_run_state(tmp_path / "tuned" / "last.pt")["validation"]
    assert [step for step, _ in validation] == [0, 20, 40]
    assert len({score for _, score in validation}) == 1  # equal scores: the first, the start, is kept
    assert json.loads(tuned.checkpoint.with_suffix(".json").read_text())["step"] == 0
    kept, _ = load_policy_model(tuned.checkpoint)
    assert all(torch.equal(value, start.state_dict()[name]) for name, value in kept.state_dict().items())


def test_a_starting_policy_of_another_shape_or_a_kl_without_one_is_refused(bank_dir, tmp_path):
    first = train(tiny_config(bank_dir, tmp_path / "first", steps=20, validate_every=0))
    wider = tiny_config(bank_dir, tmp_path / "wider", steps=20, validate_every=0, init_from=str(first.checkpoint),
                        method="mat-il")
    wider.model = MATHyperParameters(dim=32)
    with pytest.raises(ValueError, match="init-from"):
        train(wider)
    with pytest.raises(ValueError, match="start_candidate needs init_from"):
        tiny_config(bank_dir, tmp_path / "start", start_candidate=True)
    with pytest.raises(ValueError, match="reference_kl needs init_from"):
        tiny_config(bank_dir, tmp_path / "kl", reference_kl=0.1)
    with pytest.raises(ValueError, match="mat-il-ens.*--slack-prior"):  # the ensemble's members have the prior
        tiny_config(bank_dir, tmp_path / "member", init_from=str(first.checkpoint))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("privileged_critic", [False, True])
def test_fine_tuning_from_an_exported_policy_runs_on_cuda(bank_dir, tmp_path, privileged_critic):
    first = train(tiny_config(bank_dir, tmp_path / "first", steps=20, validate_every=0, device="cuda"))
    tuned = train(tiny_config(bank_dir, tmp_path / "tuned", steps=40, validate_every=20, device="cuda",
                              init_from=str(first.checkpoint), method="mat-il", critic_warmup=1, reference_kl=1.0,
                              privileged_critic=privileged_critic))
    manifest = json.loads(tuned.checkpoint.with_suffix(".json").read_text())
    assert manifest["config"]["device"] == "cuda" and manifest["method"] == "mat-il"
    assert tuned.global_step == 40
