"""MAT's sequential decoding in fewer tensor operations: the same actions, log-probabilities and values as
:class:`~mara_agents.mat.model.NodeDecoder` driven by :func:`~mara_agents.mat.decoding.decode_nodes`, bit for bit.

A node's decoder row on a few dozen observations is bound by the count of small tensor operations, not by
their arithmetic, so the row is rewritten with fewer of them, each one computing what the reference computes
on the same values:

* module calls become direct ``torch.nn.functional`` calls on the same weights;
* the self-attention's query and its keys and values come from one linear layer over the concatenated weights
  (each output column is the same dot product, whatever the other columns are);
* the self-attention keys and values are written into buffers of all M nodes instead of concatenated anew at
  every node;
* every slot's choice embedding (``chosen_in`` over the encoded slots) is computed once per decision, and a
  node's input is a row gathered from it;
* the legal-choice mask is updated in place, and sampling draws the exponential variates that
  ``torch.multinomial`` draws for one sample and takes the same arg-max, without its input checks.

Whether those rewrites give the reference's bits depends on the matrix-multiply kernels: here a linear layer's
row is the same whether it is computed among three rows or thousands, but not alone or beside one other (a
different kernel), and a lone output column (the idle logit) is not the same column inside a wider layer.
So :func:`lean_decoding_checked` compares this path with the reference on random inputs the first time it is
asked, once per process, and :meth:`~mara_agents.mat.model.MATModel.act` uses it only when the check passed,
the batch has at least :data:`MIN_ROWS` rows, and the model has no setting this path does not know
(:func:`lean_decoding_supports`).  ``tests/agents/test_lean_decoder.py`` compares the two on random models,
settings and batches.
"""

from __future__ import annotations

import functools
import math
from dataclasses import fields

import torch
from torch.nn import functional

from mara_agents.mat.decoding import greedy_rule, masked
from mara_agents.mat.layers import visible_keys
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.tokens import Tokens

MIN_ROWS = 3  # a linear layer over one or two rows takes another kernel, whose last bits differ
KNOWN_SETTINGS = frozenset({"num_nodes", "num_slots", "dim", "heads", "blocks", "slot_features", "global_features",
                            "slack_prior", "node_features"})


CHECK_ROWS = (3, 28)  # the batches of the process's one comparison with the reference


def lean_decoding_supports(hparams: MATHyperParameters) -> bool:
    """Whether this path decodes a model of ``hparams``: every setting is one it was written for, or one it
    was not written for left at its default (the abandon head, for one, is decoded by the reference only)."""
    return all(field.name in KNOWN_SETTINGS or getattr(hparams, field.name) == field.default
               for field in fields(hparams))


def lean_decoding_applies(model: MATModel, tokens: Tokens, generator: torch.Generator | None) -> bool:
    """Whether :meth:`~mara_agents.mat.model.MATModel.act` may decode ``tokens`` through :func:`lean_act`: on
    the CPU, at least :data:`MIN_ROWS` rows, a model this path supports, and this process's kernels passed
    :func:`lean_decoding_checked`."""
    return (tokens.present.device.type == "cpu" and (generator is None or generator.device.type == "cpu")
            and tokens.present.shape[0] >= MIN_ROWS and lean_decoding_supports(model.hparams)
            and lean_decoding_checked())


@functools.cache
def lean_decoding_checked() -> bool:
    """Whether :func:`lean_act` gives :meth:`~mara_agents.mat.model.MATModel.reference_act`'s actions,
    log-probabilities and values bit for bit on this machine's kernels: a random model of the paper's shape on
    random tokens, greedy and sampled, at :data:`CHECK_ROWS` rows, under ``no_grad`` and ``inference_mode``
    (the two modes decoding runs in; some kernels differ between them).  Computed once per process; the global
    torch generator is left as it was."""
    with torch.random.fork_rng(devices=[]), torch.inference_mode(False):
        torch.manual_seed(0)
        model = MATModel(MATHyperParameters(slack_prior=True)).eval()
        return all(_agrees(model, rows, sample, mode) for rows in CHECK_ROWS for sample in (False, True)
                   for mode in (torch.no_grad, torch.inference_mode))


def _agrees(model: MATModel, rows: int, sample: bool, mode: type) -> bool:
    """Whether the lean and the reference decode agree bit for bit on ``rows`` random rows under ``mode``."""
    tokens = random_tokens(model.hparams, rows, torch.Generator().manual_seed(rows))
    with mode():
        lean = lean_act(model, tokens, torch.Generator().manual_seed(rows) if sample else None)
        reference = model.reference_act(tokens, torch.Generator().manual_seed(rows) if sample else None)
    return all(torch.equal(a, b) for a, b in zip(lean, reference))


def random_tokens(hparams: MATHyperParameters, rows: int, generator: torch.Generator) -> Tokens:
    """Tokens of ``rows`` random observations drawn from ``generator``: each slot occupied with probability 0.8,
    random features and, for a model with the FM-slack prior, a random rank order as the last slot column."""
    present = torch.rand(rows, hparams.num_slots, generator=generator) < 0.8
    slots = torch.randn(rows, hparams.num_slots, hparams.slot_features, generator=generator)
    if hparams.slack_prior:
        ranks = torch.argsort(torch.rand(rows, hparams.num_slots, generator=generator), dim=-1).float()
        slots = torch.cat([slots, ranks[..., None]], dim=-1)
    glob = torch.rand(rows, hparams.global_features, generator=generator)
    return Tokens(slots * present[..., None], glob, present)


class LeanDecoder:
    """One sequential decode of ``model`` over a batch (the reference is :class:`NodeDecoder`): the encoder's
    output, the cross-attention keys and values, the pointer keys and every slot's choice embedding are
    computed once; each node then costs one decoder row."""

    def __init__(self, model: MATModel, tokens: Tokens):
        self.memory = memory = model.encode(tokens)
        batch, num_nodes = memory.shape[0], model.hparams.num_nodes
        self.prior = model.additive_logits(tokens)
        self.node_rows = model.node_rows(tokens)
        self.hidden = ~visible_keys(tokens.present)[:, None]  # (B, 1, 1, 1 + K): keys no query may attend
        self.blocks = [_LeanBlock(block, batch, num_nodes, memory) for block in model.decoder]
        self.slot_keys = model.pointer_key(memory[:, 1:]).transpose(1, 2)
        choices = model.chosen_in(memory[:, 1:])
        self.choices = torch.cat([model.idle.expand(batch, 1, -1), choices], dim=1)  # (B, K + 1, D): idle first
        self.rows = torch.arange(batch, device=memory.device)
        self.previous = model.start.expand(batch, 1, -1)
        self.node_embedding = model.node_embedding
        self.norm = _norm_weights(model.decoder_norm)
        self.pointer_query = model.pointer_query.weight, model.pointer_query.bias
        self.idle_logit = model.idle_logit.weight, model.idle_logit.bias
        self.scale = math.sqrt(model.hparams.dim)

    def logits(self, node: int, legal: torch.Tensor) -> torch.Tensor:
        """(B, K + 1) logits of ``node`` under the ``legal`` mask, given the choices advanced so far."""
        x = self.previous + self.node_embedding[node]
        if self.node_rows is not None:
            x = x + self.node_rows[:, node:node + 1]
        for block in self.blocks:
            x = block.step(x, node, self.hidden)
        h = functional.layer_norm(x, *self.norm)
        pointer = functional.linear(h, *self.pointer_query) @ self.slot_keys
        logits = torch.cat([functional.linear(h, *self.idle_logit), pointer / self.scale], dim=-1)
        if self.prior is not None:
            logits = logits + (self.prior if self.prior.shape[1] == 1 else self.prior[:, node:node + 1])
        return masked(logits[:, 0], legal)

    def advance(self, choice: torch.Tensor) -> None:
        """Feed this node's ``choice`` (B,) to the next node."""
        self.previous = self.choices[self.rows, choice][:, None]


class _LeanBlock:
    """One decoder block for :meth:`LeanDecoder.logits`: its weights, its self-attention keys and values of
    all M nodes, and its cross-attention keys and values."""

    def __init__(self, block: torch.nn.Module, batch: int, num_nodes: int, memory: torch.Tensor):
        attention, cross = block.self_attn, block.cross_attn
        self.heads = attention.heads
        self.head_dim = memory.shape[-1] // self.heads
        self.qkv = (torch.cat([attention.query.weight, attention.key_value.weight]),
                    torch.cat([attention.query.bias, attention.key_value.bias]))
        self.self_out = attention.out.weight, attention.out.bias
        self.cross_query = cross.query.weight, cross.query.bias
        self.cross_out = cross.out.weight, cross.out.bias
        self.hidden_in, self.hidden_out = (block.mlp[0].weight, block.mlp[0].bias), (block.mlp[2].weight,
                                                                                     block.mlp[2].bias)
        self.norm_self, self.norm_cross, self.norm_mlp = (_norm_weights(norm) for norm in (
            block.norm_self, block.norm_cross, block.norm_mlp))
        shape = (batch, self.heads, num_nodes, self.head_dim)
        self.keys, self.values = memory.new_empty(shape), memory.new_empty(shape)
        cross_keys, self.cross_values = cross.keys_values(memory)
        self.cross_keys = cross_keys.transpose(2, 3)
        self.scale = math.sqrt(self.head_dim)

    def step(self, x: torch.Tensor, node: int, hidden: torch.Tensor) -> torch.Tensor:
        """The block's row (B, 1, D) for ``node`` (:meth:`~mara_agents.mat.layers.DecoderBlock.step`), with
        ``hidden`` the encoder keys no query may attend."""
        batch, heads, head_dim = x.shape[0], self.heads, self.head_dim
        h = functional.layer_norm(x, *self.norm_self)
        q, k, v = functional.linear(h, *self.qkv).view(batch, 3, heads, head_dim).unbind(1)
        self.keys[:, :, node] = k
        self.values[:, :, node] = v
        if node:
            keys, values = self.keys[:, :, :node + 1], self.values[:, :, :node + 1]
            x = x + self._out(torch.softmax(q[:, :, None] @ keys.transpose(2, 3) / self.scale, dim=-1) @ values,
                              self.self_out)
        else:  # one key: its softmax weight is exactly 1, so the mix is the value itself
            x = x + self._out(v[:, :, None].contiguous(), self.self_out)  # contiguous, as the mix would be
        q = functional.linear(functional.layer_norm(x, *self.norm_cross), *self.cross_query)
        scores = (q.view(batch, heads, 1, head_dim) @ self.cross_keys / self.scale).masked_fill(hidden, float("-inf"))
        x = x + self._out(torch.softmax(scores, dim=-1) @ self.cross_values, self.cross_out)
        hidden_units = functional.gelu(functional.linear(functional.layer_norm(x, *self.norm_mlp), *self.hidden_in))
        return x + functional.linear(hidden_units, *self.hidden_out)

    def _out(self, mixed: torch.Tensor, weights: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """An attention's output layer over one row's mixed values (B, heads, 1, head_dim)."""
        return functional.linear(mixed.transpose(1, 2).reshape(mixed.shape[0], 1, self.heads * self.head_dim),
                                 *weights)


def _norm_weights(norm: torch.nn.LayerNorm) -> tuple:
    """The arguments after the input that :func:`torch.nn.functional.layer_norm` takes for ``norm``."""
    return norm.normalized_shape, norm.weight, norm.bias, norm.eps


def lean_act(model: MATModel, tokens: Tokens,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:meth:`~mara_agents.mat.model.MATModel.act` through :class:`LeanDecoder`: (actions, log-probs, values)."""
    decoder = LeanDecoder(model, tokens)
    present, num_nodes = tokens.present, model.hparams.num_nodes
    legal = torch.cat([torch.ones_like(present[:, :1]), present], dim=1)
    choose = greedy_rule(model.hparams)
    node_logits, choices = [], []
    for node in range(num_nodes):
        logits = decoder.logits(node, legal)
        if generator is None:
            choice = choose(logits, legal, num_nodes - node - 1)
        else:  # torch.multinomial's draw of one sample: arg-max of p / q over exponential variates q
            probabilities = torch.softmax(logits, -1)
            choice = (probabilities / torch.empty_like(probabilities).exponential_(1, generator=generator)).argmax(-1)
        node_logits.append(logits)
        choices.append(choice)
        legal[decoder.rows, choice] = False
        legal[:, 0] = True
        decoder.advance(choice)
    actions = torch.stack(choices, dim=1)
    # log-softmax is computed row by row, so one call over all nodes gives each node's own values
    log_probs = torch.log_softmax(torch.stack(node_logits, dim=1), -1).gather(-1, actions[..., None])[..., 0]
    return actions, log_probs, model.values(decoder.memory)
