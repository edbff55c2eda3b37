"""DAgger (Ross et al., 2011) from the privileged expert into the MAT allocator: the imitation phase.

Each round plays N environments for a number of vector steps.  At every step each environment's joint
action comes from the expert (:class:`~mara_agents.training.experts.PrivilegedSlackExpert`; with the env's abandon
action :class:`~mara_agents.training.experts.PrivilegedAbandoningExpert`) with probability β
and otherwise from the current student, decoded greedily as it is deployed; whoever acted, the state is
labelled with the expert's joint action.  The labelled states of all rounds are kept (the aggregated data
set), and after each round the student is trained on all of them by maximum likelihood of the expert's joint
action under teacher forcing (the sum over nodes of log π(a_i | o, a_<i)).  Round 0 uses β = 1 (behaviour
cloning); round r uses β = ``beta_decay`` ** r, so later rounds visit the states the student itself reaches.

Only **contended** states are kept — more occupied slots than nodes.  Elsewhere the greedy, work-conserving
decoder serves every task whatever the policy ranks first, so those labels teach nothing that changes an
outcome.  With the env's node options (``node_speeds``, ``switch_cost``) every state with a task is kept:
*where* each task runs matters even when every task is served, and the labels are the expert's per-node
actions, which node tokens let the student tell apart (:func:`~mara_agents.mat.decoding.placing_greedy_choice`
lets its greedy decoding place them).  The student sees what the deployed policy sees (tokens of the observation and the frozen
predictor's estimates); only the labels use the simulator's true remaining batches.

**Mixed load.**  The N environments' arrival loads are spread evenly over ``[load_low, load_high]``
(``mixed_loads``), so one data set covers the light loads the check workloads use and the heavy ones the
paper tests (p up to 0.07); ``stress_envs`` of them may play the stress construction (§5.4) instead, on
train/val curves, so the student also sees states in which most slots hold hopeless tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from gymnasium.utils import seeding
from torch import nn

from mara_common.config_cli import check_integers
from mara_agents.training.experts import TRUE_REMAINING, privileged_expert, vector_true_remaining
from mara_agents.mat.model import MATModel
from mara_agents.mat.tokens import Tokens, mat_inputs
from mara_agents.predictors.demand import Demand
from mara_agents.play.lockstep import Lockstep, make_vector_env, sub_observation
from mara_env.config import MARAConfig
from mara_env.engine import EpisodeSource, load_sources
from mara_env.workload import Episode


@dataclass(frozen=True)
class ImitationSettings:
    """The DAgger phase's settings."""

    rounds: int = field(default=6, metadata={"help": "DAgger rounds (round 0 is behaviour cloning)"})
    round_steps: int = field(default=10_000, metadata={
        "help": "environment steps played per DAgger round (all environments together)"})
    beta_decay: float = field(default=0.5, metadata={
        "help": "round r acts with the expert with probability beta_decay**r, else with the greedy student"})
    bc_epochs: int = field(default=4, metadata={"help": "passes over the aggregated data set after each round"})
    bc_batch: int = field(default=256, metadata={"help": "states per imitation minibatch"})
    bc_lr: float = field(default=1e-3, metadata={"help": "Adam learning rate of the imitation phase"})
    bc_grad_norm: float = field(default=1.0, metadata={"help": "gradient-norm clip of the imitation phase"})
    load_low: float = field(default=0.04, metadata={"help": "lowest arrival load of the mixed-load environments"})
    load_high: float = field(default=0.07, metadata={"help": "highest arrival load of the mixed-load environments"})
    stress_envs: int = field(default=0, metadata={
        "help": "of the environments, this many play stress-test episodes (train/val curves) instead of mixtures"})
    start_candidate: bool = field(default=False, metadata={
        "help": "also score the untrained student at step 0 as a checkpoint candidate, so imitation is kept only "
                "where it beats it (with --slack-prior the untrained student serves what FM-slack serves)"})

    def __post_init__(self) -> None:
        check_integers(self, ("stress_envs",), 0)
        check_integers(self, ("rounds", "round_steps", "bc_epochs", "bc_batch"), 1)
        if not 0.0 <= self.beta_decay <= 1.0:
            raise ValueError(f"beta_decay must lie in [0, 1], got {self.beta_decay!r}")
        if not 0.0 < self.bc_lr <= 1.0:
            raise ValueError(f"bc_lr must lie in (0, 1], got {self.bc_lr!r}")
        if not self.bc_grad_norm > 0.0:
            raise ValueError(f"bc_grad_norm must be > 0, got {self.bc_grad_norm!r}")
        if not 0.0 <= self.load_low <= self.load_high <= 1.0:
            raise ValueError(f"need 0 ≤ load_low ≤ load_high ≤ 1, got {self.load_low!r} and {self.load_high!r}")


def mixed_loads(low: float, high: float, num_envs: int) -> list[float]:
    """Arrival loads of ``num_envs`` environments, evenly spaced over [low, high]."""
    return np.linspace(low, high, num_envs).tolist()


def environment_configs(base: MARAConfig, settings: ImitationSettings, num_envs: int) -> list[MARAConfig]:
    """The DAgger environments: mixtures at loads spread over the range, then ``stress_envs`` stress tests."""
    if settings.stress_envs >= num_envs:
        raise ValueError(f"stress_envs ({settings.stress_envs}) must leave at least one of the {num_envs} "
                         "environments for mixtures")
    mixtures = num_envs - settings.stress_envs
    loads = mixed_loads(settings.load_low, settings.load_high, mixtures)
    return ([base.replace(arrival_prob=p) for p in loads]
            + [base.replace(task_set="stress", arrival_prob=0.0)] * settings.stress_envs)


@dataclass
class LabelledStates:
    """The aggregated data set: student inputs (tokens) and the expert's joint actions, in chunks of states."""

    tokens: list[Tokens] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(a) for a in self.actions)

    def add(self, tokens: Tokens, actions: np.ndarray) -> None:
        """Append states (tensor tokens, kept on the CPU) and their expert actions (B, M)."""
        self.tokens.append(tokens.to("cpu"))
        self.actions.append(actions)

    def tensors(self, device: torch.device) -> tuple[Tokens, torch.Tensor]:
        """(tokens, actions) of every state so far, on ``device``."""
        tokens = Tokens.join(self.tokens, torch.cat).to(device)
        return tokens, torch.as_tensor(np.concatenate(self.actions), device=device)


class ExpertRollout:
    """N DAgger environments (one per config) played by the one play loop (:class:`~mara_agents.play.lockstep.Lockstep`)
    on one native vector env; plays and labels states.

    The configs may differ only in what draws the episodes (task set and arrival load): each sub-env's episodes
    come from its own config's source and seed, so it plays what a single env of that config seeded alike would.
    """

    def __init__(self, configs: list[MARAConfig], demand: Demand, seed: int, device: torch.device):
        base = configs[0]
        if any(config.replace(task_set=base.task_set, arrival_prob=base.arrival_prob) != base for config in configs):
            raise ValueError("configs: the DAgger environments may differ only in task_set and arrival_prob")
        _, bank, _ = load_sources(base)
        self.sources = [EpisodeSource(config, bank, None) for config in configs]
        self.rngs = [seeding.np_random(int(s))[0] for s in np.random.SeedSequence(seed).generate_state(len(configs))]
        self.loop = Lockstep(make_vector_env(len(configs), config=base),
                             options={"episode": self._draw(np.ones(len(configs), dtype=bool))},
                             restart=lambda ended: {"episode": self._draw(ended)})
        self.demand = demand
        self.device = device
        self.switch_cost = base.switch_cost  # told to the expert and to the slack prior's plan
        self.expert = privileged_expert(base)
        self.num_nodes = base.num_nodes
        self.placing = base.node_options  # then every state with a task teaches where it runs
        self.finished: list[float] = []  # success rates of episodes ended since the last drain

    def _draw(self, rows: np.ndarray) -> list[Episode | None]:
        """Each sub-env's next episode where ``rows`` is True (None elsewhere: not read)."""
        return [source.next(rng, None) if row else None for source, rng, row in zip(self.sources, self.rngs, rows)]

    def labels(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """The expert's joint actions (N, M) for the current observations, told each slot's true remaining batches."""
        remaining = vector_true_remaining(self.loop.env)
        return self.expert.act_batch([{**sub_observation(observation, row), TRUE_REMAINING: remaining[row]}
                                      for row in range(len(remaining))])

    @torch.no_grad()
    def collect(self, model: MATModel, vector_steps: int, beta: float, rng: np.random.Generator,
                data: LabelledStates) -> None:
        """Play ``vector_steps`` steps, each env acting with the expert with probability ``beta``; append the
        contended states (with node options: every state with a task) with the expert's labels to ``data``."""
        def decide(observation: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
            tokens = mat_inputs(observation, self.demand, model.hparams.slack_prior, self.device,
                                self.switch_cost, model.hparams.abandon_nodes)
            labels = actions = self.labels(observation)
            use_student = rng.random(len(rows)) >= beta
            if use_student.any():
                student, _, _ = model.act(tokens)
                actions = np.where(use_student[:, None], student.cpu().numpy(), labels)
            occupied = tokens.present.sum(-1)
            kept = ((occupied > 0) if self.placing else (occupied > self.num_nodes)).cpu().numpy()
            data.add(tokens.select(kept), labels[kept])
            return actions

        played = self.loop.play(decide, vector_steps)
        self.finished += [record["success_rate"] for _, record in played.ended]

    def drain_finished(self) -> list[float]:
        """Success rates of the episodes that ended since the last call."""
        finished, self.finished = self.finished, []
        return finished


def imitation_loss(model: MATModel, tokens: Tokens, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean over states of −log π(expert joint action), fraction of node choices the student gives p > 0.5)."""
    log_probs, _, _ = model.evaluate(tokens, actions)
    return -log_probs.sum(-1).mean(), (log_probs > np.log(0.5)).float().mean()


def fit(model: MATModel, optimizer: torch.optim.Optimizer, data: LabelledStates, settings: ImitationSettings,
        generator: torch.Generator, device: torch.device) -> dict[str, float]:
    """``bc_epochs`` shuffled passes over the aggregated data; returns the mean loss and agreement."""
    tokens, actions = data.tensors(device)
    model.train()
    totals, batches = np.zeros(2), 0
    for _ in range(settings.bc_epochs):
        order = torch.randperm(len(actions), generator=generator).to(device)
        for start in range(0, len(order), settings.bc_batch):
            rows = order[start:start + settings.bc_batch]
            loss, agreement = imitation_loss(model, tokens.select(rows), actions[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), settings.bc_grad_norm)
            optimizer.step()
            totals += (loss.item(), agreement.item())
            batches += 1
    loss, agreement = totals / max(batches, 1)
    return {"imitation_loss": float(loss), "agreement": float(agreement)}
