"""A MAT with FM-slack's ranking as a logit prior (``MATHyperParameters.slack_prior``): it starts as FM-slack,
reads the ranks apart from its features, and trains and exports like any MAT."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mara_agents.mat.policy import MATPolicy, load_mat_policy
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.rules.slack import slack_order
from mara_agents.mat.checkpoint import export_policy
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.tokens import NUM_SLOT_FEATURES, build_tokens, slack_ranks
from mara_agents.predictors.demand import Demand
from mara_agents.predictors.wls import WLSPredictor
from mara_env.config import MARAConfig

from conftest import fifo_observations

BUSY, NODES = 0.09, 3  # three nodes: most steps have more tasks than nodes


def busy_observations(bank_dir, steps: int = 120) -> list[dict[str, np.ndarray]]:
    """Observations of a busy episode played by FIFO (more tasks than nodes at many steps)."""
    return fifo_observations(MARAConfig(bank=str(bank_dir), arrival_prob=BUSY, num_nodes=NODES), steps)


def test_the_ranks_follow_fm_slacks_order_row_by_row(bank_dir):
    observations = busy_observations(bank_dir)[::10]
    demand = Demand(WLSPredictor())
    stacked, predicted = demand.stacked(observations)
    ranks = slack_ranks(stacked, predicted)
    for row, observation in enumerate(observations):
        order = slack_order(observation, predicted[row])
        assert ranks[row, order].tolist() == list(range(order.size))
        empty = np.ones(ranks.shape[1], dtype=bool)
        empty[order] = False
        assert np.all(ranks[row, empty] == ranks.shape[1])
    plain, ranked = build_tokens(stacked, predicted), build_tokens(stacked, predicted, with_slack_ranks=True)
    assert plain.slots.shape[-1] == NUM_SLOT_FEATURES and ranked.slots.shape[-1] == NUM_SLOT_FEATURES + 1
    assert np.array_equal(ranked.slots[..., :-1], plain.slots)


def test_an_untrained_student_with_the_prior_serves_what_fm_slack_serves(bank_dir):
    torch.manual_seed(0)
    demand = Demand(WLSPredictor())
    student = MATPolicy(MATModel(MATHyperParameters(num_nodes=NODES, slack_prior=True)), demand)
    rule = SlackPolicy(demand)
    contended = 0
    for observation in busy_observations(bank_dir):
        if (observation["tasks"][:, 0] > 0).sum() <= observation["action_mask"].shape[0]:
            continue
        contended += 1
        ours, theirs = student.act(observation), rule.act(observation)
        assert sorted(ours[ours > 0].tolist()) == sorted(theirs[theirs > 0].tolist())
    assert contended >= 30


def test_a_model_without_the_prior_has_no_scale_and_ignores_nothing():
    plain = MATModel(MATHyperParameters())
    assert not hasattr(plain, "prior_scale") and plain.slack_prior(torch.zeros(1, 10, NUM_SLOT_FEATURES)) is None


def test_the_prior_exports_and_loads_with_its_learned_scale(tmp_path):
    model = MATModel(MATHyperParameters(slack_prior=True))
    with torch.no_grad():
        model.prior_scale.fill_(2.5)
    path = tmp_path / "student.pt"
    export_policy(path, model, "wls", {"method": "test"})
    loaded = load_mat_policy(path)
    assert loaded.model.hparams.slack_prior and loaded.model.prior_scale.item() == pytest.approx(2.5)
