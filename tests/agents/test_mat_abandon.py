"""MAT with the abandon action (``MATHyperParameters.abandon``, ``train.py mat --abandon``): the head's masks, its
decoding, the FM-slack + abandon prior, the abandoning expert, checkpoints and the env it refuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.allocators.abandon import make_abandoning_policy
from mara_agents.mat.checkpoint import export_policy, load_policy
from mara_agents.mat.ensemble import MATEnsemble
from mara_agents.mat.masks import node_mask, teacher_forced_masks
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.policy import MATPolicy, load_mat_policy
from mara_agents.mat.tokens import NUM_SLOT_FEATURES, Tokens
from mara_agents.play.checkpoints import atomic_torch_save
from mara_agents.play.lockstep import evaluate_workload
from mara_agents.predictors.demand import make_demand
from mara_agents.training.config import MATILConfig, parse_config
from mara_agents.training.experts import TRUE_REMAINING, PrivilegedAbandoningExpert, abandons_first
from mara_agents.training.il_train import train_il
from mara_agents.training.imitation import ImitationSettings
from mara_agents.training.train import train
from mara_env.config import MARAConfig
from mara_env.features import GLOBAL_FEATURE_INDEX

from conftest import SHORT_WINDOW, fifo_observations, hand_observation, tiny_config

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

M, K = 4, 5
ABANDON = MATHyperParameters(num_nodes=M, num_slots=K, dim=8, abandon=True)


def random_tokens(batch: int, seed: int, columns: int = NUM_SLOT_FEATURES) -> Tokens:
    g = torch.Generator().manual_seed(seed)
    present = torch.rand(batch, K, generator=g) < 0.8
    slots = torch.randn(batch, K, columns, generator=g) * present[..., None]
    return Tokens(slots, torch.rand(batch, 4, generator=g), present)


def claims(actions: np.ndarray) -> np.ndarray:
    """The slot (1-based) each choice claims, 0 for idle."""
    return np.where(actions > K, actions - K, actions)


def test_an_abandon_claims_its_slot_for_every_later_node():
    present = torch.tensor([[True, True, False, True, True]])
    actions = torch.tensor([[K + 2, 1, 0, 4]])  # node 0 abandons slot 1, node 1 serves slot 0, node 3 serves slot 3
    masks = teacher_forced_masks(present, actions, abandon=True)
    assert masks.shape == (1, M, 2 * K + 1)
    assert masks[0, 0, 2] and masks[0, 0, K + 2]
    assert not masks[0, 1:, 2].any() and not masks[0, 1:, K + 2].any()  # neither served nor abandoned again
    assert not masks[0, 2:, 1].any() and not masks[0, 2:, K + 1].any()
    assert not masks[0, :, 3].any() and not masks[0, :, K + 3].any()  # slot 2 is empty
    assert torch.equal(node_mask(present, torch.zeros_like(present), abandon=True)[0, 1:K + 1],
                       node_mask(present, torch.zeros_like(present), abandon=True)[0, K + 1:])


class FixedLogits(MATModel):
    """A MAT with the abandon head whose decoder outputs whatever (1, M, 2K + 1) logits the test sets, in both
    decoding paths."""

    fixed: torch.Tensor
    calls = 0

    def with_abandon_logits(self, logits, h, abandon_keys, prior=None):
        if h.shape[1] == M:
            return self.fixed
        node = self.calls % M
        self.calls += 1
        return self.fixed[:, node:node + 1]


FIXED = FixedLogits(ABANDON)


@settings(max_examples=60, deadline=None)
@given(logits=st.lists(st.floats(-1e30, 1e30), min_size=M * (2 * K + 1), max_size=M * (2 * K + 1)),
       present=st.lists(st.booleans(), min_size=K, max_size=K), greedy=st.booleans())
def test_decoding_never_claims_an_empty_or_claimed_slot_whatever_the_logits(logits, present, greedy):
    FIXED.fixed = torch.tensor(logits, dtype=torch.float32).view(1, M, 2 * K + 1)
    tokens = Tokens(torch.zeros(1, K, NUM_SLOT_FEATURES), torch.zeros(1, 4), torch.tensor([present]))
    actions, log_probs, _ = FIXED.act(tokens, generator=None if greedy else torch.Generator().manual_seed(0))
    claimed = claims(actions[0].numpy())
    claimed = claimed[claimed > 0] - 1
    assert len(set(claimed.tolist())) == claimed.size and all(present[slot] for slot in claimed)
    assert torch.isfinite(log_probs).all()


def test_sampled_choices_and_their_log_probs_match_teacher_forcing():
    torch.manual_seed(0)
    model = MATModel(ABANDON)
    tokens = random_tokens(64, seed=1)
    actions, log_probs, _ = model.act(tokens, generator=torch.Generator().manual_seed(2))
    assert (actions > K).any(), "an untrained head without the prior samples some abandons"
    masks = teacher_forced_masks(tokens.present, actions, abandon=True)
    assert masks.gather(-1, actions[..., None]).all()  # every sampled choice was legal
    forced, entropy, _ = model.evaluate(tokens, actions)
    assert torch.allclose(forced, log_probs, atol=1e-5) and (entropy >= 0).all()


def test_the_abandoned_marker_tells_an_abandon_from_a_serve_of_the_same_slot():
    model = MATModel(ABANDON)
    memory = model.encode(random_tokens(1, seed=3))
    served, abandoned = model.choice_embedding(memory, torch.tensor([[2, K + 2]]))[0]
    assert torch.allclose(abandoned - served, model.abandoned)


def busy_abandon_observations(bank_dir, steps: int = 150) -> list[dict[str, np.ndarray]]:
    """Observations of a busy 3-node episode in the abandon env played by FIFO."""
    return fifo_observations(MARAConfig(bank=str(bank_dir), arrival_prob=0.3, num_nodes=3, abandon=True), steps)


def test_an_untrained_student_with_the_prior_plays_as_fm_slack_plus_abandon(bank_dir, fm_checkpoint):
    torch.manual_seed(0)
    hparams = MATHyperParameters(num_nodes=3, slack_prior=True, abandon=True, slot_features=NUM_SLOT_FEATURES)
    student = MATPolicy(MATModel(hparams), make_demand("fm", str(fm_checkpoint), verify=False))
    rule = make_abandoning_policy("slack-fm+abandon", fm_checkpoint=str(fm_checkpoint), verify=False)
    contended = abandoned = 0
    for observation in busy_abandon_observations(bank_dir):
        if (observation["tasks"][:, 0] > 0).sum() <= 3:
            continue
        contended += 1
        ours, theirs = student.act(observation), rule.act(observation)
        assert sorted(ours.tolist()) == sorted(theirs.tolist())
        abandoned += int((theirs > observation["tasks"].shape[0]).sum())
    assert contended >= 30 and abandoned > 0


def test_the_expert_abandons_a_hopeless_task_only_to_make_room_and_lists_it_first():
    observation = hand_observation([10, 10, 10, 2], [40, 40, 40, 40], nodes=2)
    observation["action_mask"] = np.ones((2, 2 * 4 + 1), dtype=np.int8)
    observation[TRUE_REMAINING] = np.array([5.0, 60.0, 30.0, 80.0], dtype=np.float32)  # slot 1 cannot finish
    expert = PrivilegedAbandoningExpert()
    assert not (expert.act(observation) > 4).any()  # nothing waits: nothing is abandoned
    observation["global"][GLOBAL_FEATURE_INDEX["queue"]] = 2 / 4  # two tasks wait; slot 3 is in warm-up
    action = expert.act(observation)
    assert action[0] == 4 + 2 and action[1] in (1, 3, 4)
    assert abandons_first(np.array([[3, 0, 7, 1]]), 5).tolist() == [[7, 3, 1, 0]]


def test_a_policy_refuses_an_env_whose_mask_width_does_not_match(bank_dir):
    default = busy_abandon_observations(bank_dir, steps=1)[0]
    plain = {**default, "action_mask": default["action_mask"][:, :11]}
    with_head = MATPolicy(MATModel(dataclasses.replace(ABANDON, num_nodes=3, num_slots=10)), make_demand("wls"))
    without = MATPolicy(MATModel(MATHyperParameters(num_nodes=3, dim=8)), make_demand("wls"))
    with pytest.raises(ValueError, match="trained with the abandon action .* has 11: play it in MARA-v0 with "
                                         "abandon=True"):
        with_head.act(plain)
    with pytest.raises(ValueError, match="trained without the abandon action .* has 21"):
        without.act(default)
    with pytest.raises(ValueError, match="an ensemble decodes MATs without the abandon head"):
        MATEnsemble([MATModel(ABANDON), MATModel(ABANDON)])


def test_the_head_round_trips_through_a_checkpoint_and_old_files_keep_k_plus_one_choices(tmp_path):
    torch.manual_seed(0)
    model = MATModel(ABANDON)
    path = tmp_path / "abandon.pt"
    export_policy(path, model, "wls", {"method": "test"})
    loaded = load_policy(path).model
    assert loaded.hparams.abandon
    tokens = random_tokens(8, seed=4)
    actions, _, _ = model.act(tokens, generator=torch.Generator().manual_seed(5))
    assert torch.equal(model.evaluate(tokens, actions)[0], loaded.evaluate(tokens, actions)[0])
    plain = MATModel(MATHyperParameters(num_nodes=M, num_slots=K, dim=8))
    old = {key: value for key, value in plain.hparams.to_dict().items() if key != "abandon"}  # written before
    atomic_torch_save({"format": "mara-mat-policy", "version": 1, "hparams": old, "predictor": "wls",
                       "state_dict": plain.state_dict()}, tmp_path / "old.pt")
    restored = load_policy(tmp_path / "old.pt", verify=False).model
    assert not restored.hparams.abandon and not hasattr(restored, "abandon_query")
    assert restored.logits(restored.encode(tokens), tokens.present, actions.clamp(max=K)).shape[-1] == K + 1


def tiny_abandon_il(bank_dir, run_dir) -> MATILConfig:
    """Two DAgger rounds of 40 env steps in the abandon env over WLS, with the prior, a 16-dim model."""
    return MATILConfig(predictor="wls", num_envs=2, validation_roots=1, validation_episodes=1,
                       validation_stress_episodes=1, run_dir=str(run_dir),
                       env=MARAConfig(bank=str(bank_dir), abandon=True),
                       imitation=ImitationSettings(rounds=2, round_steps=40, bc_epochs=2, bc_batch=16, load_low=0.3,
                                                   load_high=0.3),
                       model=MATHyperParameters(dim=16, slack_prior=True))


def test_imitation_and_ppo_train_in_the_abandon_env_and_export_a_policy_that_plays_there(bank_dir, short_file,
                                                                                          tmp_path):
    imitated = train_il(tiny_abandon_il(bank_dir, tmp_path / "il"))
    trained = train(tiny_config(bank_dir, tmp_path / "ppo", abandon=True))
    for result in (imitated, trained):
        policy = load_mat_policy(result.checkpoint)
        assert policy.model.hparams.abandon
        rows = evaluate_workload(policy, short_file, bank=bank_dir, episodes=[0], arrival_window=SHORT_WINDOW,
                                 abandon=True)
        assert 0.0 <= rows[0]["success_rate"] <= 1.0 and rows[0]["conflicts"] == 0
        with pytest.raises(ValueError, match="abandon=True"):
            evaluate_workload(policy, short_file, bank=bank_dir, episodes=[0], arrival_window=SHORT_WINDOW)


def test_the_abandon_flag_sets_the_head_and_refuses_node_options():
    assert parse_config(["--abandon"]).hparams().abandon and not parse_config([]).hparams().abandon
    with pytest.raises(SystemExit):
        parse_config(["--abandon", "--num-nodes", "2", "--node-speeds", "1,2"])
