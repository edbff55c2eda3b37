"""Exported MAT policies decoded as one ensemble (``mara_agents.mat.ensemble``): each node takes the legal slot
with the highest summed log-probability, checked here against the members' teacher-forced logits."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import mara_env  # noqa: F401  (registers MARA-v0)
from mara_agents import make_policy
from mara_agents.allocators.registry import CHECKPOINT_DIR, TRAINING_SEEDS, ensemble_members
from mara_agents.play.checkpoints import file_sha256
from mara_agents.mat.checkpoint import export_policy, load_policy_model
from benchmarks import decode_bench
from mara_agents.mat.ensemble import MATEnsemble, load_mat_ensemble
from mara_agents.mat.masks import teacher_forced_masks
from mara_agents.mat.decoding import masked
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.tokens import Tokens

from test_mat_model import is_matching, random_inputs


def members(count: int, **hparams: object) -> list[MATModel]:
    models = []
    for seed in range(count):
        torch.manual_seed(seed)
        models.append(MATModel(MATHyperParameters(**hparams)).eval())
    return models


def test_a_one_member_ensemble_decodes_exactly_as_its_member():
    model = members(1)[0]
    tokens = random_inputs(64, seed=1)
    alone = model.act(tokens)
    together = MATEnsemble([model]).act(tokens)
    assert torch.equal(together[0], alone[0])
    assert torch.allclose(together[1], alone[1], atol=1e-6) and torch.equal(together[2], alone[2])


@pytest.mark.parametrize("blocks,heads,prior", [(1, 1, False), (2, 4, False), (1, 1, True)],
                         ids=["paper", "deeper", "slack-prior"])
def test_each_node_takes_the_best_legal_slot_of_the_summed_log_probabilities(blocks, heads, prior):
    """The grouped decoder (all members per operation) against each member's own teacher-forced logits."""
    models = members(3, blocks=blocks, heads=heads, slack_prior=prior)
    slots, glob, present, _ = random_inputs(128, seed=2)
    if prior:  # the rank column: a random order of each row's slots
        ranks = torch.argsort(torch.rand(128, slots.shape[1], generator=torch.Generator().manual_seed(3)), dim=-1)
        slots = torch.cat([slots, ranks.float()[..., None]], dim=-1)
        for model in models:  # a weak prior, so that the members' own logits still disagree
            model.prior_scale.data.fill_(0.1)
    tokens = Tokens(slots, glob, present)
    actions, log_probs, _ = MATEnsemble(models).act(tokens)
    assert all(is_matching(a, p) for a, p in zip(actions.numpy(), present.numpy()))
    legal = teacher_forced_masks(present, actions)
    with torch.no_grad():
        total = sum(torch.log_softmax(masked(model.logits(model.encode(tokens), present, actions,
                                                          model.slack_prior(slots)), legal), -1) for model in models)
    slot_left = legal[..., 1:].any(-1)
    expected = torch.where(slot_left, total[..., 1:].argmax(-1) + 1, 0)
    assert torch.equal(actions, expected)
    product = torch.log_softmax(total, -1)  # the ensemble's policy: the members' normalised product
    assert torch.allclose(log_probs, product.gather(-1, actions[..., None])[..., 0], atol=1e-5, rtol=0)
    singles = [model.act(tokens)[0] for model in models]
    assert any(not torch.equal(actions, single) for single in singles)  # the members disagree somewhere


def test_members_of_different_shapes_and_sampling_are_refused():
    with pytest.raises(ValueError, match="share the architecture"):
        MATEnsemble([MATModel(MATHyperParameters()), MATModel(MATHyperParameters(dim=32))])
    with pytest.raises(ValueError, match="at least one member"):
        MATEnsemble([])
    with pytest.raises(ValueError, match="greedily only"):
        MATEnsemble(members(2)).act(random_inputs(4, seed=3), generator=torch.Generator())


def test_exported_members_load_as_one_policy_that_plays_an_episode(bank_dir, tmp_path):
    env = gym.make("MARA-v0", bank=str(bank_dir))
    paths = []
    for index, model in enumerate(members(2, num_nodes=env.unwrapped.config.num_nodes,
                                          num_slots=env.unwrapped.config.max_active)):
        paths.append(tmp_path / f"member{index}.pt")
        export_policy(paths[-1], model, "wls", {"method": "test"})
    policy = load_mat_ensemble("+".join(str(path) for path in paths))
    observation, _ = env.reset(seed=0)
    for _ in range(50):
        action = policy.act(observation)
        assert action.shape == (env.unwrapped.config.num_nodes,)
        assert np.all(observation["action_mask"][np.arange(action.size), action] == 1)
        observation, *_ = env.step(action)
    export_policy(tmp_path / "fm.pt", members(1)[0], "fm", {"method": "test"})
    with pytest.raises(ValueError, match="different predictors"):
        load_mat_ensemble([paths[0], tmp_path / "fm.pt"])


@pytest.mark.parametrize("seed", TRAINING_SEEDS)
def test_each_shipped_mat_il_ens_seed_decodes_its_own_three_members(seed):
    """The datasheet's promise: seed S is members 3S…3S+2, each trained with its own seed from its own
    ``--slack-prior`` student, and the registered policy decodes exactly those weights."""
    paths = ensemble_members("mat-il-ens", seed)
    member_seeds = [3 * seed, 3 * seed + 1, 3 * seed + 2]
    assert [path.name for path in paths] == [f"mat_il_ens_member{k}.pt" for k in member_seeds]
    policy = make_policy("mat-il-ens", seed=seed)
    assert isinstance(policy.model, MATEnsemble) and len(policy.model.members) == len(paths)
    for member_seed, path, member in zip(member_seeds, paths, policy.model.members):
        manifest = json.loads(path.with_suffix(".json").read_text())
        assert manifest["method"] == "mat-il-ens" and manifest["config"]["model"]["slack_prior"]
        assert manifest["config"]["seed"] == member_seed
        student = CHECKPOINT_DIR / "imitation" / f"mat_il_slack_seed{member_seed}.pt"
        assert manifest["initial_policy"]["checkpoint_sha256"] == file_sha256(student)
        shipped, _ = load_policy_model(path)
        for name, tensor in shipped.state_dict().items():
            assert torch.equal(member.state_dict()[name], tensor), (path, name)


def test_mat_il_ens_refuses_sampling_and_names_a_missing_member(tmp_path):
    with pytest.raises(ValueError, match="greedily only"):
        make_policy("mat-il-ens", sample=True)
    with pytest.raises(RuntimeError, match="not found"):
        make_policy("mat-il-ens", checkpoints=[tmp_path / "missing.pt"])


def test_the_decode_bench_prints_one_line_per_batch_and_refuses_bad_sizes(tmp_path, capsys):
    out = tmp_path / "decode.txt"
    assert decode_bench.main(["--batches", "1,3", "--calls", "2", "--repeats", "1", "--out", str(out)]) == 0
    rows = [line.split() for line in out.read_text().splitlines()[2:]]
    assert [row[0] for row in rows] == ["1", "3"]
    assert all(float(figure) > 0 for row in rows for figure in row[1:])
    assert decode_bench.main(["--batches", "0"]) == 2
    assert "--batches must be positive integers" in capsys.readouterr().err
