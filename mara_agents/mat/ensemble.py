"""Several exported MAT policies decoded as one greedy policy (inference only).

At each node, in node order, every member scores the legal choices given the choices the ensemble has made
so far, and the ensemble takes the legal slot with the highest *sum* of the members' log-probabilities (the
product of their probabilities), work-conservingly as :meth:`~mara_agents.mat.model.MATModel.act` does.  The
members must share the architecture (so they read the same tokens), the predictor they were trained on and
the setting (:class:`~mara_agents.mat.setting.Setting`: M, node speeds, c).

Members with node tokens (trained with the env's node options) combine the same way: each member's node
choices carry its own node rows and its own learned stay term, and the sum is over those log-probabilities;
greedy decoding then follows :func:`~mara_agents.mat.decoding.placing_greedy_choice`, as one such member does.

Independently trained policies disagree where each departs from the shared ranking; summing their
log-probabilities keeps what they agree on; ``docs/research/learned_allocator.md`` gives the ensembles' scores on the
``val`` check beside their members'.

Each member encodes on its own; the decoder rows of all members run together over their stacked weights
(:mod:`~mara_agents.mat.grouped`), which costs about one member's operations instead of E times them.  The
stacked weights are a copy taken when the ensemble is built: change a member afterwards and build it again.

Use it anywhere a MAT policy goes: ``load_mat_ensemble([a.pt, b.pt, c.pt])`` returns a
:class:`~mara_agents.mat.policy.MATPolicy`; ``evaluate.py --policy`` takes it as
``NAME=mara_agents.mat.ensemble:load_mat_ensemble:paths=a.pt+b.pt+c.pt``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from torch import nn

from mara_agents.mat.policy import MATPolicy
from mara_agents.mat.checkpoint import check_trained_fm, load_policy
from mara_agents.mat.grouped import GroupedNodeDecoder, StackedDecoderWeights
from mara_agents.mat.decoding import decode_nodes, greedy_rule
from mara_agents.mat.model import MATModel, NodeDecoder
from mara_agents.mat.setting import Setting
from mara_agents.mat.tokens import Tokens
from mara_agents.predictors.demand import make_demand


class MATEnsemble(nn.Module):
    """MAT models decoded together; ``act`` has :meth:`MATModel.act`'s signature, greedy only."""

    def __init__(self, members: Sequence[MATModel]):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.hparams = members[0].hparams
        if any(member.hparams != self.hparams for member in members):
            raise ValueError("ensemble members must share the architecture, got "
                             f"{sorted({str(member.hparams) for member in members})}")
        if self.hparams.abandon:
            raise ValueError("an ensemble decodes MATs without the abandon head (K + 1 choices per node); play a "
                             "MAT trained with --abandon on its own")
        self.members = nn.ModuleList(members)
        self.stacked = StackedDecoderWeights(members)

    @torch.no_grad()
    def act(self, tokens: Tokens,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(actions (B, M), the ensemble's log-probs of them (B, M), the members' mean values (B, M))."""
        if generator is not None:
            raise ValueError("an ensemble decodes greedily only (sample from one member to train)")
        starts = [NodeDecoder(member, tokens) for member in self.members]
        decoder = GroupedNodeDecoder(self.stacked, starts)

        def summed(node: int, legal: torch.Tensor) -> torch.Tensor:
            return decoder.log_probs(node, legal).sum(0)

        actions, log_probs = decode_nodes(summed, decoder.advance, tokens.present, self.hparams.num_nodes,
                                          greedy_rule(self.hparams))
        values = torch.stack([member.values(start.memory) for member, start in zip(self.members, starts)])
        return actions, log_probs, values.mean(0)


def load_mat_ensemble(paths: Sequence[str | os.PathLike[str]] | str, device: str = "cpu",
                      fm_checkpoint: str = "", verify: bool = True) -> MATPolicy:
    """A :class:`~mara_agents.mat.policy.MATPolicy` over the exported checkpoints ``paths`` (a sequence, or
    one string joined by ``+`` as ``evaluate.py --policy`` passes it); they must share their predictor and
    their setting, and each must have been trained with the FM it is given (or ``verify=False``)."""
    paths = paths.split("+") if isinstance(paths, str) else list(paths)
    loaded = [load_policy(path, device, verify) for path in paths]
    predictors = {member.predictor for member in loaded}
    if len(predictors) != 1:
        raise ValueError(f"ensemble members were trained on different predictors: {sorted(predictors)}")
    for path, member in zip(paths, loaded):
        check_trained_fm(path, member.predictor, fm_checkpoint, verify)
    for path, member in zip(paths[1:], loaded[1:]):
        if member.setting is None or member.setting != loaded[0].setting:
            raise ValueError(f"ensemble members were trained in different settings: {paths[0]} in "
                             f"{_described(loaded[0].setting)}, {path} in {_described(member.setting)}")
    return MATPolicy(MATEnsemble([member.model for member in loaded]),
                     make_demand(predictors.pop(), fm_checkpoint, device, verify), setting=loaded[0].setting,
                     checkpoints=paths)


def _described(setting: Setting | None) -> str:
    """A member's setting in words."""
    return "an unrecorded setting" if setting is None else setting.describe()
