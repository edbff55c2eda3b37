"""Training reproduces what it trained before: the loop against the PPO recipe written out in one block (a
changed update, loss term, minibatch order or schedule moves the parameters), and the shipped policies'
recorded settings against the commands that trained them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from mara_agents.mat.checkpoint import load_policy_model
from mara_agents.training.config import MATTrainConfig, changed_run_settings, parse_config, upgrade_record
from mara_agents.mat.model import MATModel
from mara_agents.training.ppo import ValueNorm, gae
from mara_agents.training.rollout import VectorRollout
from mara_agents.mat.tokens import Tokens
from mara_agents.training.train import train
from mara_agents.predictors.demand import make_demand

from conftest import tiny_config

SHIPPED = Path(__file__).resolve().parents[2] / "mara_agents" / "checkpoints"


def ppo_written_out(config: MATTrainConfig) -> MATModel:
    """The paper recipe as one CleanRL-style block: collect, GAE, then epochs of shuffled minibatches of
    −L_clip + c_v·L_V − c_e·H (Eqs. 10–12, per-node ratios, team advantage normalised per minibatch, value
    targets in the normaliser's units), gradient-norm clipping and a linearly annealed learning rate."""
    ppo = config.ppo
    torch.manual_seed(config.seed)
    model = MATModel(config.hparams())
    optimizer = torch.optim.Adam(model.parameters(), lr=ppo.lr, eps=1e-5)
    value_norm, sampler = ValueNorm(), torch.Generator().manual_seed(config.seed)
    shuffler = torch.Generator().manual_seed(config.seed + 1)
    envs = VectorRollout(config.env, config.num_envs, make_demand(config.predictor), seed=(config.seed, 0),
                         device=torch.device("cpu"))
    for step in range(0, config.steps, config.num_envs * config.rollout_steps):
        for group in optimizer.param_groups:
            group["lr"] = ppo.lr * (1.0 - step / config.steps)
        played = envs.collect(model, value_norm, config.rollout_steps, sampler)
        advantages, returns = (x.flatten() for x in gae(played.rewards, played.values, played.dones,
                                                         played.last_value, ppo.gamma, ppo.gae_lambda))
        slots, glob, present, actions, old = (x.flatten(0, 1) for x in (played.slots, played.glob, played.present,
                                                                         played.actions, played.log_probs))
        value_norm.update(returns)
        size = len(actions) // ppo.minibatches
        for _ in range(ppo.epochs):
            order = torch.randperm(len(actions), generator=shuffler)
            for start in range(0, size * ppo.minibatches, size):
                rows = order[start:start + size]
                tokens = Tokens(slots[rows], glob[rows], present[rows])
                log_probs, entropy, values = model.evaluate(tokens, actions[rows])
                advantage = advantages[rows]
                advantage = ((advantage - advantage.mean()) / (advantage.std() + 1e-8))[:, None]
                ratio = torch.exp(log_probs - old[rows])
                l_clip = torch.min(ratio * advantage, ratio.clamp(1 - ppo.clip, 1 + ppo.clip) * advantage).mean()
                l_value = 0.5 * (values - value_norm.normalise(returns[rows])[:, None]).pow(2).mean()
                loss = -l_clip + ppo.value_coef * l_value - ppo.entropy_coef * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(list(model.parameters()), ppo.max_grad_norm)
                optimizer.step()
    return model


def test_training_is_the_ppo_recipe_written_out_bit_for_bit(bank_dir, tmp_path):
    config = tiny_config(bank_dir, tmp_path / "run", steps=60, validate_every=0)
    trained, _ = load_policy_model(train(config).checkpoint)
    expected = ppo_written_out(config).state_dict()
    assert trained.state_dict().keys() == expected.keys()
    assert all(torch.equal(value, expected[name]) for name, value in trained.state_dict().items())


OLD_MEMBER = Path(__file__).resolve().parent / "data" / "old_member_record.json"


def documented_member_command(member: int, init_from: str) -> MATTrainConfig:
    """The documented PPO stage of a ``mat-il-ens`` member (mara_agents/checkpoints/README.md)."""
    return parse_config(["--seed", str(member), "--init-from", init_from, "--slack-prior", "--critic-warmup", "10",
                         "--reference-kl", "1.0", "--entropy-coef", "0", "--lr", "1e-4"])


@pytest.mark.parametrize("member", range(3))
def test_a_shipped_ensemble_members_recorded_settings_are_its_documented_command(member):
    manifest = json.loads((SHIPPED / f"mat_il_ens_member{member}.json").read_text())
    record = upgrade_record(manifest["config"])
    command = documented_member_command(member, record["finetune"]["init_from"])
    assert command.method == manifest["method"] == "mat-il-ens"
    assert changed_run_settings(record, command) == []
    assert upgrade_record(command.record()) == command.record()


def test_a_record_written_before_the_fine_tuning_group_still_reads_as_its_documented_command():
    old = json.loads(OLD_MEMBER.read_text())
    assert "finetune" not in old["config"]
    command = documented_member_command(0, old["config"]["init_from"])
    assert command.method == old["method"] == "mat-il-ens"
    assert changed_run_settings(upgrade_record(old["config"]), command) == []


def test_an_old_record_of_fine_tuning_a_plain_student_reads_as_mat_il():
    record = json.loads(OLD_MEMBER.read_text())["config"]
    record["model"]["slack_prior"] = False
    assert upgrade_record(record)["finetune"]["method"] == "mat-il"
    record["init_from"] = ""
    assert upgrade_record(record)["finetune"] == {"init_from": "", "critic_warmup": 10, "reference_kl": 1.0,
                                                  "privileged_critic": False, "method": "mat-il-ens",
                                                  "start_candidate": False}
