"""Several MAT models' sequential decoders run as one: every decoder weight stacked along a leading member
axis, so one batched operation per layer serves all members (inference only).

Decoding is dispatch-bound: a node's row is about fifty small tensor operations on a few rows, so E members
decoded one after the other cost E times the dispatches.  Here each linear layer is one ``torch.baddbmm`` over
the (E, rows, features) activations and the stacked (E, in, out) weights, each LayerNorm one normalisation plus
the stacked affine, and attention one batched matmul, so E members cost about one member's dispatches.

:class:`GroupedNodeDecoder` computes, per member, the same row as :meth:`~mara_agents.mat.model.NodeDecoder.logits`
(:meth:`~mara_agents.mat.layers.DecoderBlock.step`: causal self-attention over the earlier nodes, cross-attention
to the encoder, MLP, pointer logits); the results agree to float round-off
(``tests/agents/test_mat_ensemble.py``).  Each member's encoder still runs on its own (once per decision).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional

from mara_agents.mat.decoding import masked
from mara_agents.mat.model import MATModel, NodeDecoder

_LINEARS = ("self_attn.query", "self_attn.key_value", "self_attn.out", "cross_attn.query", "cross_attn.out",
            "mlp.0", "mlp.2")
_NORMS = ("norm_self", "norm_cross", "norm_mlp")


def _stack(members: Sequence[MATModel], name: str) -> torch.Tensor:
    """The members' parameter ``name`` stacked along a new leading axis."""
    return torch.stack([member.get_parameter(name).detach() for member in members])


class StackedDecoderWeights(nn.Module):
    """The decoder-side weights of ``members`` stacked along a leading member axis (non-persistent buffers:
    they follow ``.to(device)`` and are never saved; the members' own state is the checkpoint)."""

    def __init__(self, members: Sequence[MATModel]):
        super().__init__()
        first = members[0]
        self.heads, self.blocks, self.dim = first.hparams.heads, first.hparams.blocks, first.hparams.dim
        self.eps = first.decoder_norm.eps
        linears = [f"decoder.{block}.{layer}" for block in range(self.blocks) for layer in _LINEARS]
        norms = [f"decoder.{block}.{norm}" for block in range(self.blocks) for norm in _NORMS]
        for name in [*linears, "pointer_query", "idle_logit", "chosen_in"]:
            # (E, in, out) so that baddbmm(bias, x, weight) computes x Wᵀ + b per member.
            self._store(f"{name}.weight", _stack(members, f"{name}.weight").transpose(1, 2).contiguous())
            self._store(f"{name}.bias", _stack(members, f"{name}.bias")[:, None, :])
        for name in [*norms, "decoder_norm"]:
            self._store(f"{name}.weight", _stack(members, f"{name}.weight")[:, None, :])
            self._store(f"{name}.bias", _stack(members, f"{name}.bias")[:, None, :])
        self._store("node_embedding", _stack(members, "node_embedding")[:, :, None, :])  # (E, M, 1, D)
        self._store("idle", _stack(members, "idle")[:, None, :])  # (E, 1, D)

    def _store(self, name: str, tensor: torch.Tensor) -> None:
        self.register_buffer(name.replace(".", "__"), tensor, persistent=False)

    def get(self, name: str) -> torch.Tensor:
        """The stacked tensor of parameter ``name`` (the members' own parameter name)."""
        return getattr(self, name.replace(".", "__"))

    def linear(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """Layer ``name`` of every member on its own rows: (E, N, in) → (E, N, out)."""
        return torch.baddbmm(self.get(f"{name}.bias"), x, self.get(f"{name}.weight"))

    def norm(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """LayerNorm ``name`` of every member on its own rows (E, N, D)."""
        normalised = functional.layer_norm(x, (x.shape[-1],), eps=self.eps)
        return torch.addcmul(self.get(f"{name}.bias"), normalised, self.get(f"{name}.weight"))


class GroupedNodeDecoder:
    """One sequential decode of several members over one batch, node by node, all members per operation.

    Each member's encoder output, cross-attention keys/values, pointer keys, FM-slack prior and, with node tokens,
    its node rows and stay term come from its own
    :class:`~mara_agents.mat.model.NodeDecoder` (which encodes on construction) and are stacked here; the earlier
    nodes' self-attention keys/values are cached per block, as in the single-model decoder.
    """

    def __init__(self, weights: StackedDecoderWeights, starts: Sequence[NodeDecoder]):
        self.weights = weights
        self.slot_memory = torch.stack([start.memory[:, 1:] for start in starts])  # (E, B, K, D)
        self.memory_kv = [tuple(torch.stack(parts) for parts in zip(*(start.memory_kv[block] for start in starts)))
                          for block in range(weights.blocks)]  # per block: keys, values (E, B, H, 1 + K, head_dim)
        self.slot_keys_t = torch.stack([start.slot_keys for start in starts]).transpose(2, 3)  # (E, B, D, K)
        priors = [start.prior for start in starts]
        # (E, B, 1, K + 1) for every node alike (the FM-slack prior), or (E, B, M, K + 1) per node (node tokens'
        # stay term, with the prior when there is one)
        self.prior = None if priors[0] is None else torch.stack(priors)
        rows = [start.node_rows for start in starts]
        self.node_rows = None if rows[0] is None else torch.stack(rows)  # (E, B, M, D) with node tokens
        self.hidden = ~starts[0].visible[None, :, None]  # (1, B, 1, 1, 1 + K): keys a row may not attend
        self.past: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in range(weights.blocks)]
        self.previous = torch.stack([start.previous[:, 0] for start in starts])  # (E, B, D)

    def log_probs(self, node: int, legal: torch.Tensor) -> torch.Tensor:
        """(E, B, K + 1) each member's log-probabilities of ``node``'s choices under the ``legal`` mask."""
        w = self.weights
        x = self.previous + w.get("node_embedding")[:, node]
        if self.node_rows is not None:
            x = x + self.node_rows[:, :, node]
        for block in range(w.blocks):
            prefix = f"decoder.{block}"
            h = w.norm(f"{prefix}.norm_self", x)
            self.past[block].append(self._keys_values(w.linear(f"{prefix}.self_attn.key_value", h)))
            keys, values = (torch.cat(parts, dim=3) for parts in zip(*self.past[block]))
            x = x + self._attend(f"{prefix}.self_attn", h, keys, values, None)
            x = x + self._attend(f"{prefix}.cross_attn", w.norm(f"{prefix}.norm_cross", x), *self.memory_kv[block],
                                 self.hidden)
            mlp = functional.gelu(w.linear(f"{prefix}.mlp.0", w.norm(f"{prefix}.norm_mlp", x)))
            x = x + w.linear(f"{prefix}.mlp.2", mlp)
        h = w.norm("decoder_norm", x)
        pointer = (w.linear("pointer_query", h)[:, :, None, :] @ self.slot_keys_t)[:, :, 0]
        logits = torch.cat([w.linear("idle_logit", h), pointer / math.sqrt(w.dim)], dim=-1)
        if self.prior is not None:
            logits = logits + self.prior[:, :, 0 if self.prior.shape[2] == 1 else node]
        return torch.log_softmax(masked(logits, legal), -1)

    def advance(self, choice: torch.Tensor) -> None:
        """Feed this node's ``choice`` (B,) to every member's next node."""
        w = self.weights
        index = (choice - 1).clamp(min=0)[None, :, None, None].expand(self.slot_memory.shape[0], -1, 1,
                                                                      self.slot_memory.shape[-1])
        picked = w.linear("chosen_in", self.slot_memory.gather(2, index)[:, :, 0])
        self.previous = torch.where((choice > 0)[None, :, None], picked, w.get("idle"))

    def _keys_values(self, projected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(E, B, 2D) key/value projections of one row → per-head keys and values (E, B, H, 1, head_dim)."""
        members, batch, _ = projected.shape
        w = self.weights
        k, v = projected.view(members, batch, 2, w.heads, w.dim // w.heads).unbind(2)
        return k[:, :, :, None], v[:, :, :, None]

    def _attend(self, name: str, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                hidden: torch.Tensor | None) -> torch.Tensor:
        """One row per member and batch entry (E, B, D) attends to (E, B, H, L, head_dim) keys and values."""
        w = self.weights
        members, batch, dim = x.shape
        head_dim = dim // w.heads
        q = w.linear(f"{name}.query", x).view(members, batch, w.heads, 1, head_dim)
        scores = q @ keys.transpose(3, 4) / math.sqrt(head_dim)
        if hidden is not None:
            scores = scores.masked_fill(hidden, float("-inf"))
        mixed = torch.softmax(scores, dim=-1) @ values  # (E, B, H, 1, head_dim)
        return w.linear(f"{name}.out", mixed.reshape(members, batch, dim))
