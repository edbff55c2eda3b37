"""MAT's masks, decoding and log-probabilities (paper §4.2, Eq. 9)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.mat.masks import taken_before, teacher_forced_masks
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.tokens import ESTIMATE_FEATURES, NUM_SLOT_FEATURES, SLOT_FEATURES, Tokens, build_tokens
from mara_env.features import TASK_FEATURE_INDEX

M, K = 7, 10


def random_inputs(batch: int, seed: int) -> Tokens:
    g = torch.Generator().manual_seed(seed)
    present = torch.rand(batch, K, generator=g) < torch.rand(batch, 1, generator=g)
    slots = torch.randn(batch, K, NUM_SLOT_FEATURES, generator=g) * present[..., None]
    return Tokens(slots, torch.rand(batch, 4, generator=g), present)


def is_matching(actions: np.ndarray, present: np.ndarray) -> bool:
    picked = actions[actions > 0] - 1
    return len(set(picked.tolist())) == picked.size and bool(np.all(present[picked]))


class FixedLogits(MATModel):
    """A MAT whose decoder outputs whatever (1, M, K + 1) logits the test sets, in both decoding paths:
    all nodes at once under teacher forcing, node by node (one row per call, in node order) when acting."""

    fixed: torch.Tensor
    single_row_calls = 0

    def pointer_logits(self, h, slot_keys, prior=None):
        if h.shape[1] == M:
            return self.fixed
        node = self.single_row_calls % M
        self.single_row_calls += 1
        return self.fixed[:, node:node + 1]


FIXED = FixedLogits(MATHyperParameters(dim=8))


@settings(max_examples=100, deadline=None)
@given(logits=st.lists(st.floats(-1e30, 1e30), min_size=M * (K + 1), max_size=M * (K + 1)),
       present=st.lists(st.booleans(), min_size=K, max_size=K), greedy=st.booleans())
def test_masks_guarantee_a_matching_for_any_logits(logits, present, greedy):
    model = FIXED
    model.fixed = torch.tensor(logits, dtype=torch.float32).view(1, M, K + 1)
    present_t = torch.tensor([present])
    slots = torch.zeros(1, K, NUM_SLOT_FEATURES)
    generator = None if greedy else torch.Generator().manual_seed(0)
    actions, log_probs, _ = model.act(Tokens(slots, torch.zeros(1, 4), present_t), generator=generator)
    assert is_matching(actions[0].numpy(), np.array(present))
    assert torch.isfinite(log_probs).all()


def test_idle_is_always_legal_and_empty_slots_never_are():
    present = torch.tensor([[True, False] * 5])
    actions = torch.tensor([[1, 0, 3, 1, 0, 5, 0]])
    masks = teacher_forced_masks(present, actions)
    assert masks[..., 0].all()
    assert not masks[0, :, 2].any()  # slot 1 is empty
    assert masks[0, 0, 1] and not masks[0, 1:, 1].any()  # slot 0 taken by node 0 for everyone after


def test_taken_before_is_the_exclusive_prefix_of_picks():
    actions = torch.tensor([[2, 0, 2, 5, 0, 1, 3]])
    taken = taken_before(actions, K)[0]
    for node in range(M):
        expected = torch.zeros(K, dtype=torch.bool)
        for earlier in actions[0, :node].tolist():
            if earlier:
                expected[earlier - 1] = True
        assert torch.equal(taken[node], expected)


@pytest.mark.parametrize("greedy", [False, True], ids=["sampled", "greedy"])
@pytest.mark.parametrize("blocks,heads,prior", [(1, 1, False), (2, 4, False), (1, 1, True)],
                         ids=["paper", "deeper", "slack-prior"])
def test_sequential_and_teacher_forced_log_probs_agree(greedy, blocks, heads, prior):
    """Sequential decoding (with its key/value cache) and teacher forcing compute the same rows."""
    torch.manual_seed(0)
    model = MATModel(MATHyperParameters(blocks=blocks, heads=heads, slack_prior=prior))
    slots, glob, present, _ = random_inputs(64, seed=1)
    if prior:  # the rank column: a random order of each row's slots
        slots = torch.cat([slots, torch.argsort(torch.rand(64, K), dim=-1).float()[..., None]], dim=-1)
    generator = None if greedy else torch.Generator().manual_seed(2)
    tokens = Tokens(slots, glob, present)
    actions, log_probs, values = model.act(tokens, generator=generator)
    replayed, entropy, replayed_values = model.evaluate(tokens, actions)
    # The cached and the teacher-forced passes sum in different orders: a few float32 ulps apart (about 2e-6
    # at log-probabilities near -2.6 on some CPUs), while a wrong mask or cache is off by 1e-3 or more.
    assert torch.allclose(log_probs, replayed, atol=1e-5, rtol=0)
    assert torch.allclose(values, replayed_values, atol=1e-5)
    assert (entropy >= -1e-6).all()
    assert all(is_matching(a, p) for a, p in zip(actions.numpy(), present.numpy()))


def test_an_empty_observation_gives_all_idle_and_finite_values():
    model = MATModel(MATHyperParameters())
    slots, glob, present = torch.zeros(3, K, NUM_SLOT_FEATURES), torch.rand(3, 4), torch.zeros(3, K, dtype=torch.bool)
    actions, log_probs, values = model.act(Tokens(slots, glob, present), generator=torch.Generator().manual_seed(0))
    assert actions.eq(0).all() and log_probs.abs().max() < 1e-6 and torch.isfinite(values).all()


def test_tokens_zero_empty_slots_and_flag_tasks_that_cannot_finish_alone():
    tasks = np.zeros((K, 11), dtype=np.float32)
    tasks[:2, 0] = 1.0
    tasks[:2, 1] = [0.5, 0.1]  # 50 and 10 steps left of B = 100
    obs = {"tasks": tasks, "global": np.full(4, 0.5, dtype=np.float32),
           "budget": np.array([100.0, 100.0] + [0.0] * (K - 2), dtype=np.float32),
           "history_len": np.array([4, 4] + [0] * (K - 2))}  # enough observations: the estimates count
    tokens = build_tokens(obs, np.array([30.0, 30.0] + [0.0] * (K - 2)))
    fits = SLOT_FEATURES.index("fits_alone")
    assert tokens.slots[:2, fits].tolist() == [1.0, 0.0]
    assert not tokens.slots[2:].any() and tokens.present.tolist() == [True, True] + [False] * (K - 2)


def test_tokens_leave_out_the_estimate_of_a_task_with_too_few_observations():
    # Both tasks get the predictor's cap (600); only the one with 4 observations shows it as its demand.
    tasks = np.zeros((K, 11), dtype=np.float32)
    tasks[:2, 0] = 1.0
    tasks[:2, 1] = 0.9
    tasks[:2, TASK_FEATURE_INDEX["warmup"]] = [1.0, 0.75]
    obs = {"tasks": tasks, "global": np.full(4, 0.5, dtype=np.float32),
           "budget": np.array([300.0, 300.0] + [0.0] * (K - 2), dtype=np.float32),
           "history_len": np.array([4, 3] + [0] * (K - 2))}
    slots = build_tokens(obs, np.array([600.0, 600.0] + [0.0] * (K - 2))).slots
    estimate = [SLOT_FEATURES.index(name) for name in ESTIMATE_FEATURES]
    assert slots[0, SLOT_FEATURES.index("slack")] < 0 and slots[0, SLOT_FEATURES.index("predicted")] > 0
    assert not slots[1, estimate].any() and slots[1, SLOT_FEATURES.index("warmup")] == 0.75


def test_greedy_decoding_is_work_conserving():
    # Idle is by far the most likely choice, yet greedy nodes take the remaining legal slots, likeliest first,
    # and only the nodes left over once every occupied slot is taken idle.
    model = FIXED
    row = torch.log(torch.tensor([0.9, 0.01, 0.03, 0.02, 0.04] + [1e-9] * (K - 4)))
    model.fixed = row.expand(1, M, K + 1).clone()
    present = torch.tensor([[True] * 4 + [False] * (K - 4)])
    actions, _, _ = model.act(Tokens(torch.zeros(1, K, NUM_SLOT_FEATURES), torch.zeros(1, 4), present))
    assert actions[0].tolist() == [4, 2, 3, 1, 0, 0, 0]
