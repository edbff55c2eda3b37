"""The Multi-Agent Transformer (Wen et al., 2022) as used by MARA (paper §4.2, Eq. 9).

* **Encoder** — one token per task slot plus one global token, a pre-LayerNorm Transformer block with
  self-attention over occupied slots (empty slots are masked as keys), producing the slot representations
  the decoder points at and, from the global token, one value per node (all nodes share the team reward, so
  their values estimate the same return; the team value is their mean).
* **Decoder** — autoregressive over nodes in index order.  Node i's input is its node embedding plus the
  previous node's choice: a learned start vector for node 0, a learned idle vector, or a projection of the
  encoded slot the previous node picked.  A causal self-attention block over nodes, cross-attention to the
  encoder, then pointer logits (node query · slot key) and an idle logit.
* **Masks** — node i's logits lose empty slots and slots taken by nodes < i (``masks.py``); idle is always
  legal, so every sampled joint action is a matching (Eq. 2) without repair.

* **FM-slack prior** (ours, off by default) — with ``slack_prior`` every node's pointer logits get
  −scale · (the slot's rank in FM-slack's order), idle ranked last, with ``scale`` learned from 3.0.  An
  untrained model then serves what FM-slack serves (``tests/agents/test_slack_prior.py``), and imitation
  moves it only where the expert's labels keep disagreeing with that order (``docs/research/learned_allocator.md``).
  The ranks come as the tokens' last column and are not features.

Teacher forcing (training) runs the decoder over all M positions at once under a causal mask; sequential
decoding (rollout, evaluation) computes one row per node and caches the earlier rows' keys and values.
Row i sees the same inputs either way, so their log-probabilities agree to float round-off (tested).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from mara_common import checks
from mara_agents.mat.decoding import decode_nodes, greedy_rule, masked
from mara_agents.mat.layers import DecoderBlock, EncoderBlock, run_encoder, visible_keys
from mara_agents.mat.masks import claimed_slot, teacher_forced_masks
from mara_agents.mat.tokens import NUM_GLOBAL_TOKEN_FEATURES, NUM_SLOT_FEATURES, Tokens

IDLE_PRIOR = -2.0
MAX_WIDTH = 4096  # the largest embedding a setting may ask for: far above any useful model, far below OOM
MAX_BLOCKS = 64
SLACK_PRIOR_SCALE = 3.0  # logits per rank step at the start: FM-slack's order wins over an untrained network
ABANDON_PRIOR = -4.0  # abandon logits' start without the FM-slack prior: below every serve logit of an untrained model


@dataclass(frozen=True)
class MATHyperParameters:
    """Architecture (paper Appendix A.3: one block, 64-dim, one head)."""

    num_nodes: int = 7  # M (training takes it from the env)
    num_slots: int = 10  # K (training takes it from the env)
    dim: int = field(default=64, metadata={"help": "embedding width"})
    heads: int = field(default=1, metadata={"help": "attention heads"})
    blocks: int = field(default=1, metadata={"help": "encoder and decoder blocks"})
    slot_features: int = NUM_SLOT_FEATURES
    global_features: int = NUM_GLOBAL_TOKEN_FEATURES
    slack_prior: bool = field(default=False, metadata={
        "help": "add -scale * (the slot's rank in FM-slack's order) to the pointer logits, scale learned from "
                "3.0, so the policy starts as FM-slack (tokens then carry the ranks as a last column)"})
    node_features: int = 0  # node-token features (tokens.NUM_NODE_TOKEN_FEATURES) with the env's node options; 0 without
    abandon: bool = False  # the env's abandon action: 2K + 1 choices per node (training takes it from the env)

    @property
    def abandon_nodes(self) -> int:
        """M for a model with the abandon head (what its tokens' abandon plan is drawn up for), else 0."""
        return self.num_nodes if self.abandon else 0

    def __post_init__(self) -> None:
        checks.integer("num_nodes", self.num_nodes, 1)
        checks.integer("num_slots", self.num_slots, 1)
        checks.integer("dim", self.dim, 1, MAX_WIDTH)
        checks.integer("heads", self.heads, 1, self.dim)
        checks.integer("blocks", self.blocks, 1, MAX_BLOCKS)
        checks.integer("node_features", self.node_features, 0)
        if self.abandon and self.node_features:
            raise ValueError("abandon: a MAT with the abandon head plays the paper's setting (no node options)")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")

    def to_dict(self) -> dict[str, int | bool]:
        """Plain dict for checkpoints and manifests."""
        return asdict(self)




class MATModel(nn.Module):
    """Encoder–decoder actor-critic over (slot tokens, global token) → per-node values and choices."""

    def __init__(self, hparams: MATHyperParameters):
        super().__init__()
        self.hparams = hparams
        dim, m = hparams.dim, hparams.num_nodes
        self.slot_in = nn.Sequential(nn.Linear(hparams.slot_features, dim), nn.GELU())
        self.global_in = nn.Sequential(nn.Linear(hparams.global_features, dim), nn.GELU())
        self.encoder = nn.ModuleList(EncoderBlock(dim, hparams.heads) for _ in range(hparams.blocks))
        self.encoder_norm = nn.LayerNorm(dim)
        self.value_head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, m))
        self.node_embedding = nn.Parameter(torch.randn(m, dim) * 0.02)
        self.start = nn.Parameter(torch.randn(dim) * 0.02)
        self.idle = nn.Parameter(torch.randn(dim) * 0.02)
        self.chosen_in = nn.Linear(dim, dim)
        self.decoder = nn.ModuleList(DecoderBlock(dim, hparams.heads) for _ in range(hparams.blocks))
        self.decoder_norm = nn.LayerNorm(dim)
        self.pointer_query = nn.Linear(dim, dim)
        self.pointer_key = nn.Linear(dim, dim)
        self.idle_logit = nn.Linear(dim, 1)
        # Start close to work-conserving: idle begins e^IDLE_PRIOR times as likely as a free slot.  A uniform
        # start idles ~1/(n+1) of the nodes and wastes most early rollouts learning not to.
        nn.init.constant_(self.idle_logit.bias, IDLE_PRIOR)
        if hparams.slack_prior:
            self.prior_scale = nn.Parameter(torch.tensor(SLACK_PRIOR_SCALE))
        if hparams.node_features:
            self.node_in = nn.Linear(hparams.node_features, dim)
            self.stay_weight = nn.Parameter(torch.tensor(0.0))
        self.register_buffer("causal", torch.tril(torch.ones(m, m, dtype=torch.bool)), persistent=False)
        if hparams.abandon:
            self.add_abandon_head()

    def add_abandon_head(self) -> None:
        """The abandon action's parameters (``hparams.abandon``): a second pointer head over the slot memory
        (its own query and key projections and a learned offset) whose K logits follow the serve logits, so
        that the env's choice K + j is the head's index, and the marker added to a slot's projection in
        :meth:`choice_embedding` when a node gave that slot up rather than served it."""
        dim = self.hparams.dim
        self.abandon_query = nn.Linear(dim, dim)
        self.abandon_key = nn.Linear(dim, dim)
        self.abandon_offset = nn.Parameter(torch.tensor(0.0 if self.hparams.slack_prior else ABANDON_PRIOR))
        self.abandoned = nn.Parameter(torch.randn(dim) * 0.02)

    # ------------------------------------------------------------------ encoder
    def encode(self, tokens: Tokens) -> torch.Tensor:
        """(B, 1 + K, D): the global token followed by the slot tokens, after the encoder blocks."""
        if bool(self.hparams.node_features) != (tokens.nodes is not None):
            trained = "with" if self.hparams.node_features else "without"
            raise ValueError(f"this MAT was trained {trained} node tokens, so it plays only an env {trained} node "
                             "options (node_speeds, switch_cost)")
        embedded = torch.cat([self.global_in(tokens.glob)[:, None], self.slot_in(self.slot_features(tokens.slots))],
                             dim=1)
        return run_encoder(self.encoder, self.encoder_norm, embedded, tokens.present)

    def slot_features(self, slots: torch.Tensor) -> torch.Tensor:
        """The slot features the encoder reads: without the FM-slack rank column when the model has one (and
        without the abandon plan column after it, :meth:`abandon_prior`)."""
        if self.hparams.slack_prior and self.hparams.abandon:
            return slots[..., :-2]
        return slots[..., :-1] if self.hparams.slack_prior else slots

    def slack_prior(self, slots: torch.Tensor, nodes: torch.Tensor | None = None) -> torch.Tensor | None:
        """(B, 1, K + 1) logits that order slots as FM-slack does (idle last), or None without the prior.  With
        node tokens, (B, M, K + 1): node i's choice in FM-slack's joint action on nodes (the tokens' last node
        column) ranks first, then the slots in FM-slack's order, then idle, so an untrained model places the
        tasks where FM-slack does."""
        if not self.hparams.slack_prior:
            return None
        ranks = slots[..., -2] if self.hparams.abandon else slots[..., -1]
        idle = torch.full_like(ranks[..., :1], float(ranks.shape[-1]))
        order = torch.cat([idle, ranks], dim=-1)[:, None, :]
        if nodes is None:
            return -self.prior_scale * order
        planned = nodes[..., -1:].long()  # (B, M, 1): 0 idle, k + 1 slot k
        order = (order + 1).expand(-1, nodes.shape[1], -1).scatter(-1, planned, 0.0)
        return -self.prior_scale * order

    def abandon_prior(self, slots: torch.Tensor) -> torch.Tensor | None:
        """(B, 1, K) what is added to the abandon logits: with the FM-slack prior, +scale at the slots that
        FM-slack + abandon gives up (the tokens' last column, ``mara_agents.mat.tokens.abandon_plans``) and
        −scale · M elsewhere, below the serve prior of every slot FM-slack would serve (ranks 0 … M − 1), so that
        greedy decoding of an untrained model abandons what FM-slack + abandon abandons (with its first nodes)
        and serves the rest in FM-slack's order, and imitation needs to move an abandon logit only a few
        rank steps to add an abandon; None without the prior or without the abandon head."""
        if not (self.hparams.abandon and self.hparams.slack_prior):
            return None
        plan = slots[..., -1]
        return (self.prior_scale * torch.where(plan > 0, 1.0, -float(self.hparams.num_nodes)))[:, None, :]

    def abandon_keys(self, memory: torch.Tensor) -> torch.Tensor | None:
        """(B, K, D) the abandon head's slot keys, or None without the abandon head."""
        return self.abandon_key(memory[:, 1:]) if self.hparams.abandon else None

    def with_abandon_logits(self, logits: torch.Tensor, h: torch.Tensor, abandon_keys: torch.Tensor | None,
                            prior: torch.Tensor | None = None) -> torch.Tensor:
        """``logits`` (B, L, K + 1) followed by the K abandon logits of decoder outputs h (B, L, D) (node query
        · slot key, plus the offset and the ``prior`` when given); ``logits`` alone without the abandon head."""
        if abandon_keys is None:
            return logits
        scores = self.abandon_query(h) @ abandon_keys.transpose(1, 2) / math.sqrt(h.shape[-1]) + self.abandon_offset
        return torch.cat([logits, scores if prior is None else scores + prior], dim=-1)

    def additive_logits(self, tokens: Tokens) -> torch.Tensor | None:
        """What is added to the pointer logits: the FM-slack prior (B, 1, K + 1; per node with node tokens) and,
        with node tokens, each node's learned preference for the slot it served at the previous step
        (B, M, K + 1); None when neither."""
        prior = self.slack_prior(tokens.slots, tokens.nodes)
        if not self.hparams.node_features:
            return prior
        first = self.hparams.node_features
        stays = tokens.nodes[..., first:first + self.hparams.num_slots]
        stay = self.stay_weight * torch.cat([torch.zeros_like(stays[..., :1]), stays], dim=-1)
        return stay if prior is None else stay + prior

    def node_rows(self, tokens: Tokens) -> torch.Tensor | None:
        """(B, M, D) what each node's decoder row reads of its own token (speed, setup), or None without."""
        if not self.hparams.node_features:
            return None
        return self.node_in(tokens.nodes[..., :self.hparams.node_features])

    def values(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, M) per-node value estimates (in the value normaliser's units)."""
        return self.value_head(memory[:, 0])

    # ------------------------------------------------------------------ decoder
    def choice_embedding(self, memory: torch.Tensor, choices: torch.Tensor) -> torch.Tensor:
        """(B, L, D) decoder input for earlier choices (B, L): the projected picked slot, or the idle vector;
        with the abandon head, an abandoned slot's projection plus the "abandoned" marker."""
        slot_memory = memory[:, 1:]
        claimed = claimed_slot(choices, slot_memory.shape[1]) if self.hparams.abandon else choices
        index = (claimed - 1).clamp(min=0)[..., None].expand(-1, -1, slot_memory.shape[-1])
        picked = self.chosen_in(slot_memory.gather(1, index))
        if self.hparams.abandon:
            picked = picked + (choices > slot_memory.shape[1])[..., None] * self.abandoned
        return torch.where((choices > 0)[..., None], picked, self.idle.expand_as(picked))

    def decoder_inputs(self, memory: torch.Tensor, actions: torch.Tensor,
                       node_rows: torch.Tensor | None = None) -> torch.Tensor:
        """(B, M, D): node embedding (+ the node token's row) + previous node's choice (start for node 0;
        ``actions`` shifted right)."""
        first = self.start.expand(actions.shape[0], 1, -1)
        x = torch.cat([first, self.choice_embedding(memory, actions[:, :-1])], dim=1) + self.node_embedding
        return x if node_rows is None else x + node_rows

    def pointer_logits(self, h: torch.Tensor, slot_keys: torch.Tensor,
                       prior: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L, K + 1) logits from decoder outputs h (B, L, D): idle, then node query · slot key (plus the
        FM-slack ``prior`` when given)."""
        pointer = self.pointer_query(h) @ slot_keys.transpose(1, 2)
        logits = torch.cat([self.idle_logit(h), pointer / math.sqrt(h.shape[-1])], dim=-1)
        return logits if prior is None else logits + prior

    def logits(self, memory: torch.Tensor, present: torch.Tensor, actions: torch.Tensor,
               prior: torch.Tensor | None = None, node_rows: torch.Tensor | None = None,
               abandon_prior: torch.Tensor | None = None) -> torch.Tensor:
        """Unmasked (B, M, K + 1) logits of every node given the earlier nodes' ``actions`` (teacher forcing);
        (B, M, 2K + 1) with the abandon head."""
        x = self.decoder_inputs(memory, actions, node_rows)
        causal = self.causal.expand(x.shape[0], -1, -1)
        visible = visible_keys(present).expand(-1, x.shape[1], -1)
        for block in self.decoder:
            x = block(x, memory, causal, visible)
        h = self.decoder_norm(x)
        return self.with_abandon_logits(self.pointer_logits(h, self.pointer_key(memory[:, 1:]), prior), h,
                                        self.abandon_keys(memory), abandon_prior)

    # ------------------------------------------------------------------ policy
    @torch.no_grad()
    def act(self, tokens: Tokens,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sequential decoding of tensor ``tokens``: (actions (B, M), log-probs (B, M), values (B, M)).

        Node i samples from ``generator`` under the mask of empty slots and slots taken by nodes < i, or,
        with ``generator=None``, decodes greedily and *work-conservingly*: it takes its most likely legal slot
        whenever one is left, and idles only when none is.  Serving costs nothing in the simulator, so an idle
        node beside a waiting task cannot help that step; yet a greedy rule that lets idle win (arg-max over
        {idle, slot 1..K}, or "serve iff P(serve) > 0.5") idles nodes next to waiting warm-up or FM-feasible
        tasks, and scores lower on the ``val`` check workloads (``mara_agents/checkpoints/README.md``).  Sampling keeps
        idle as a choice, so training and its log-probabilities are unchanged.  A model with node tokens
        serves as many tasks, but may leave a task to a later node (:func:`~mara_agents.mat.decoding.placing_greedy_choice`): with
        strict index order a fast node last in line would never serve while the slow ones before it could.

        The encoder's keys and values, the pointer keys and the earlier nodes' self-attention keys/values
        are computed once and reused (a key/value cache), so node i costs one decoder row, not i + 1; the
        result is row i of :meth:`logits` to float round-off (``tests/agents/test_mat_model.py``).

        On the CPU the decode runs through :func:`~mara_agents.mat.lean_decoder.lean_act`, which computes
        the same numbers as :meth:`reference_act` in fewer tensor operations, wherever it is known to give
        them bit for bit (:func:`~mara_agents.mat.lean_decoder.lean_decoding_applies`).
        """
        from mara_agents.mat.lean_decoder import lean_act, lean_decoding_applies  # it builds on this module
        if lean_decoding_applies(self, tokens, generator):
            return lean_act(self, tokens, generator)
        return self.reference_act(tokens, generator)

    @torch.no_grad()
    def reference_act(self, tokens: Tokens,
                      generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`act` node by node through :class:`NodeDecoder` and :func:`~mara_agents.mat.decoding.decode_nodes`: the definition of
        what it computes, and its path wherever the lean decoder does not apply."""
        decoder = NodeDecoder(self, tokens)

        def sampled(logits: torch.Tensor, legal: torch.Tensor, later: int) -> torch.Tensor:
            return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]

        actions, log_probs = decode_nodes(decoder.logits, decoder.advance, tokens.present, self.hparams.num_nodes,
                                          greedy_rule(self.hparams) if generator is None else sampled,
                                          self.hparams.abandon)
        return actions, log_probs, self.values(decoder.memory)

    def evaluate(self, tokens: Tokens, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher forcing: (log-probs (B, M), entropies (B, M), values (B, M)) of stored joint actions given
        tensor ``tokens``, under masks rebuilt from the actions by an exclusive prefix sum."""
        memory = self.encode(tokens)
        logits = masked(self.logits(memory, tokens.present, actions, self.additive_logits(tokens),
                                     self.node_rows(tokens), self.abandon_prior(tokens.slots)),
                        teacher_forced_masks(tokens.present, actions, self.hparams.abandon))
        log_p = torch.log_softmax(logits, -1)
        # Illegal entries have p = 0 and log p = −inf; zeroing log p there keeps 0·log 0 = 0 in value and gradient.
        entropy = -(log_p.exp() * log_p.masked_fill(log_p.isinf(), 0.0)).sum(-1)
        return log_p.gather(-1, actions[..., None])[..., 0], entropy, self.values(memory)


class NodeDecoder:
    """One sequential decode of ``model`` over a batch, node by node: the encoder's output, its keys and values
    for cross-attention, the pointer keys and the earlier nodes' self-attention keys/values are computed once
    and reused (a key/value cache), so node i costs one decoder row."""

    def __init__(self, model: MATModel, tokens: Tokens):
        self.model = model
        self.memory = model.encode(tokens)
        self.prior = model.additive_logits(tokens)
        self.node_rows = model.node_rows(tokens)
        self.visible = visible_keys(tokens.present)
        self.memory_kv = [block.cross_attn.keys_values(self.memory) for block in model.decoder]
        self.past: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in model.decoder]
        self.slot_keys = model.pointer_key(self.memory[:, 1:])
        self.abandon_keys = model.abandon_keys(self.memory)
        self.abandon_prior = model.abandon_prior(tokens.slots)
        self.previous = model.start.expand(tokens.slots.shape[0], 1, -1)

    def logits(self, node: int, legal: torch.Tensor) -> torch.Tensor:
        """(B, K + 1) logits ((B, 2K + 1) with the abandon head) of ``node`` under the ``legal`` mask, given the
        choices advanced so far."""
        model = self.model
        x = self.previous + model.node_embedding[node]
        if self.node_rows is not None:
            x = x + self.node_rows[:, node:node + 1]
        for block, block_past, kv in zip(model.decoder, self.past, self.memory_kv):
            x = block.step(x, block_past, kv, self.visible)
        prior = self.prior if self.prior is None or self.prior.shape[1] == 1 else self.prior[:, node:node + 1]
        h = model.decoder_norm(x)
        logits = model.with_abandon_logits(model.pointer_logits(h, self.slot_keys, prior), h, self.abandon_keys,
                                           self.abandon_prior)
        return masked(logits[:, 0], legal)

    def advance(self, choice: torch.Tensor) -> None:
        """Feed this node's ``choice`` (B,) to the next node."""
        self.previous = self.model.choice_embedding(self.memory, choice[:, None])
