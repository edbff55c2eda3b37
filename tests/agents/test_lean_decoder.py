"""The lean decoder gives MAT's reference decode bit for bit: actions, log-probabilities, values and the
sampling generator's state, on random models, settings and batches, greedy and sampled."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mara_agents.mat import lean_decoder
from mara_agents.mat.lean_decoder import (MIN_ROWS, lean_act, lean_decoding_applies, lean_decoding_checked,
                                          lean_decoding_supports, random_tokens)
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.tokens import NUM_NODE_TOKEN_FEATURES

SETTINGS = {
    "paper": MATHyperParameters(),
    "slack prior": MATHyperParameters(slack_prior=True),
    "two blocks, two heads": MATHyperParameters(blocks=2, heads=2, dim=32),
    "four heads, small": MATHyperParameters(num_nodes=3, num_slots=5, dim=16, heads=4),
    "node tokens": MATHyperParameters(node_features=NUM_NODE_TOKEN_FEATURES),
    "node tokens and prior": MATHyperParameters(node_features=NUM_NODE_TOKEN_FEATURES, slack_prior=True),
}


def tokens_for(hparams: MATHyperParameters, rows: int, seed: int):
    """Random tokens of ``rows`` observations, with random node tokens for a model that reads them (speeds and
    setups, one stay indicator per node and, with the prior, a planned choice in 0..K)."""
    generator = torch.Generator().manual_seed(seed)
    tokens = random_tokens(hparams, rows, generator)
    if not hparams.node_features:
        return tokens
    m, k = hparams.num_nodes, hparams.num_slots
    features = torch.randn(rows, m, hparams.node_features, generator=generator)
    stays = torch.nn.functional.one_hot(torch.randint(0, k, (rows, m), generator=generator), k).float()
    parts = [features, stays]
    if hparams.slack_prior:
        parts.append(torch.randint(0, k + 1, (rows, m, 1), generator=generator).float())
    return tokens._replace(nodes=torch.cat(parts, dim=-1))


def model_for(hparams: MATHyperParameters, seed: int) -> MATModel:
    torch.manual_seed(seed)
    model = MATModel(hparams).eval()
    with torch.no_grad():  # an untrained idle bias and start vectors would make every choice alike
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model


@pytest.mark.parametrize("name", sorted(SETTINGS))
@pytest.mark.parametrize("sample", [False, True])
@pytest.mark.parametrize("built_in", ["grad mode", "inference mode"])  # inference tensors take other kernels
def test_lean_decode_is_the_reference_bit_for_bit(name, sample, built_in):
    hparams = SETTINGS[name]
    with torch.inference_mode(built_in == "inference mode"):
        model = model_for(hparams, seed=len(name))
    for rows in (MIN_ROWS, 4, 7, 28, 61):
        tokens = tokens_for(hparams, rows, seed=rows)
        lean_generator = torch.Generator().manual_seed(rows) if sample else None
        reference_generator = torch.Generator().manual_seed(rows) if sample else None
        with torch.inference_mode():
            lean = lean_act(model, tokens, lean_generator)
            reference = model.reference_act(tokens, reference_generator)
        for part, (got, want) in zip(("actions", "log-probs", "values"), zip(lean, reference)):
            assert torch.equal(got, want), f"{name}, {rows} rows: {part} differ"
        if sample:
            assert torch.equal(lean_generator.get_state(), reference_generator.get_state())
        assert len(set(lean[0].flatten().tolist())) > 2  # the decode chose among several slots


def test_act_takes_the_lean_path_where_it_applies(monkeypatch):
    model = model_for(MATHyperParameters(), seed=0)
    assert lean_decoding_checked()
    calls = []
    monkeypatch.setattr(lean_decoder, "lean_act", lambda *args: calls.append(args) or args[0].reference_act(*args[1:]))
    model.act(tokens_for(model.hparams, MIN_ROWS, seed=1))
    assert len(calls) == 1
    model.act(tokens_for(model.hparams, MIN_ROWS - 1, seed=1))  # too few rows: another kernel, the reference
    assert len(calls) == 1


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_the_process_check_passes_and_leaves_the_global_generator_alone(mode):
    lean_decoding_checked.cache_clear()
    before = torch.random.get_rng_state()
    with mode():  # whichever mode the first decode runs in
        assert lean_decoding_checked()
    assert torch.equal(torch.random.get_rng_state(), before)


def test_a_failed_check_sends_every_decode_to_the_reference(monkeypatch):
    model = model_for(MATHyperParameters(), seed=0)
    tokens = tokens_for(model.hparams, 8, seed=2)
    assert lean_decoding_applies(model, tokens, None)
    monkeypatch.setattr(lean_decoder, "lean_decoding_checked", lambda: False)
    assert not lean_decoding_applies(model, tokens, None)


def test_a_model_setting_it_does_not_know_is_left_to_the_reference():
    @dataclasses.dataclass(frozen=True)
    class WithAHead(MATHyperParameters):
        another_head: bool = False

    assert lean_decoding_supports(MATHyperParameters())
    assert lean_decoding_supports(WithAHead())  # left at its default, the setting changes nothing
    assert not lean_decoding_supports(WithAHead(another_head=True))
    assert not lean_decoding_supports(MATHyperParameters(abandon=True))
