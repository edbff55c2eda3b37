"""Node-by-node decoding shared by every MAT decoder (one model, the ensemble, the grouped and lean paths): the
loop over nodes in index order under the sequential mask, and the rules that turn a node's logits into its
choice."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from mara_agents.mat.masks import claimed_slot, node_mask

if TYPE_CHECKING:
    from mara_agents.mat.model import MATHyperParameters

Choose = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


def decode_nodes(score: Callable[[int, torch.Tensor], torch.Tensor], advance: Callable[[torch.Tensor], None],
                 present: torch.Tensor, num_nodes: int, choose: Choose,
                 abandon: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Nodes in index order: ``score(node, legal)`` gives (B, K + 1) logits under the mask of empty slots and
    slots taken by earlier nodes, ``choose(logits, legal, later)`` picks (``later``: the nodes still to decide
    after this one), ``advance(choice)`` feeds the pick to the next node.  With ``abandon`` the logits are
    (B, 2K + 1) and an abandon claims its slot as a pick does.  Returns the actions (B, M) and their
    log-probabilities under the logits."""
    batch = present.shape[0]
    actions = torch.zeros(batch, num_nodes, dtype=torch.long, device=present.device)
    log_probs = torch.zeros(batch, num_nodes, device=present.device)
    taken = torch.zeros_like(present)
    for node in range(num_nodes):
        legal = node_mask(present, taken, abandon)
        logits = score(node, legal)
        choice = choose(logits, legal, num_nodes - node - 1)
        actions[:, node] = choice
        log_probs[:, node] = torch.log_softmax(logits, -1).gather(1, choice[:, None])[:, 0]
        claimed = claimed_slot(choice, present.shape[1]) if abandon else choice
        taken = taken | nn.functional.one_hot(claimed, present.shape[1] + 1)[:, 1:].bool()
        advance(choice)
    return actions, log_probs


def greedy_choice(scores: torch.Tensor, legal: torch.Tensor, later: int = 0) -> torch.Tensor:
    """(B,) work-conserving greedy choice from (B, K + 1) scores: the best legal slot while one is left, else
    idle (:meth:`~mara_agents.mat.model.MATModel.act` says why idle never wins over a free slot); ``later`` is not read."""
    return torch.where(legal[:, 1:].any(-1), scores[:, 1:].argmax(-1) + 1, 0)


def placing_greedy_choice(scores: torch.Tensor, legal: torch.Tensor, later: int) -> torch.Tensor:
    """(B,) greedy choice of a model with node tokens: :func:`greedy_choice`, except that the node idles when
    idle scores highest and the ``later`` nodes can still serve every task left.  Every task is still served
    when there are nodes for all (the same count as :func:`greedy_choice`), but *where* follows the policy:
    on nodes of different speeds or with a switching cost, a node early in the order may leave a task to a
    faster node, or to the node that served it, after it."""
    serve = greedy_choice(scores, legal)
    may_idle = legal[:, 1:].sum(-1) <= later
    return torch.where(may_idle & (scores.argmax(-1) == 0), 0, serve)


def greedy_rule(hparams: MATHyperParameters) -> Choose:
    """How greedy decoding chooses for a model: :func:`placing_greedy_choice` with node tokens, else
    :func:`greedy_choice` (the paper's setting, where every node is alike and only *which* tasks are served
    matters)."""
    return placing_greedy_choice if hparams.node_features else greedy_choice


def masked(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Logits with illegal choices set to −inf: probability exactly 0 whatever the legal logits are (a
    finite "large negative" would beat legal logits below it).  Idle is always legal, so no row is all −inf."""
    return logits.masked_fill(~legal, float("-inf"))
