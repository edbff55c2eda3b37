"""PPO with GAE for the MAT allocator (paper §4.2, Eqs. 10–12), plus the value normaliser.

One function per term: :func:`clipped_surrogate` (Eq. 10), :func:`value_loss` and :func:`policy_entropy`
(Eq. 11), :func:`mat_loss` (Eq. 12: L = −L_clip + c_v·L_V − c_e·H) and our :func:`reference_kl` penalty;
:func:`ppo_loss` puts them together on a minibatch.  Following MAT, the clipped ratio is taken per node: node i's ratio
is π(a_i | o, a_<i) / π_old(a_i | o, a_<i) and every node shares the team advantage (the reward is shared).
Clipping each factor keeps any one node's policy change bounded, which a single joint ratio over seven
factors would not.  Value targets are normalised by running return statistics (MAPPO-style) so the critic
sees O(1) targets whether the reward is shaped or sparse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from mara_common.config_cli import check_integers, check_range
from mara_agents.training.critic import PrivilegedCritic
from mara_agents.mat.model import MATModel
from mara_agents.mat.tokens import Tokens


class ValueNorm(nn.Module):
    """Running mean/variance of value targets; the critic predicts normalised returns."""

    def __init__(self, epsilon: float = 1e-5):
        super().__init__()
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, targets: torch.Tensor) -> None:
        """Merge a batch into the running moments (parallel-variance formula)."""
        x = targets.detach().double().reshape(-1)
        n, mean, var = float(x.numel()), x.mean(), x.var(unbiased=False)
        total = self.count + n
        delta = mean - self.mean
        self.var.copy_((self.var * self.count + var * n + delta ** 2 * self.count * n / total) / total)
        self.mean.copy_(self.mean + delta * n / total)
        self.count.copy_(total)

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """Return units → critic units."""
        return ((x.double() - self.mean) / (self.var.sqrt() + self.epsilon)).to(x.dtype)

    def denormalise(self, x: torch.Tensor) -> torch.Tensor:
        """Critic units → return units."""
        return (x.double() * (self.var.sqrt() + self.epsilon) + self.mean).to(x.dtype)


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor,
        gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over a (T, N) rollout; returns (advantages, returns).

    ``dones[t]`` marks that the episode ended with step t (MARA episodes terminate, never truncate), so no
    value is bootstrapped across it; the rollout's tail bootstraps from ``last_value``.
    """
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(last_value)
    for t in reversed(range(rewards.shape[0])):
        next_value = last_value if t == rewards.shape[0] - 1 else values[t + 1]
        alive = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * alive - values[t]
        running = delta + gamma * lam * alive * running
        advantages[t] = running
    return advantages, advantages + values


@dataclass(frozen=True)
class PPOSettings:
    """The PPO algorithm's settings (paper Appendix A.3; lr and its schedule are ours)."""

    lr: float = field(default=5e-4, metadata={"help": "Adam learning rate"})
    anneal_lr: bool = field(default=True, metadata={
        "help": "decay the learning rate linearly from lr to 0 over the run (damps late-run policy swings)"})
    gamma: float = field(default=1.0, metadata={"help": "discount γ (1: the undiscounted success count)"})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE λ"})
    clip: float = field(default=0.2, metadata={"help": "PPO ratio clip ε_PPO"})
    value_coef: float = field(default=1.0, metadata={"help": "value-loss coefficient c_v"})
    entropy_coef: float = field(default=0.01, metadata={"help": "entropy coefficient c_e"})
    epochs: int = field(default=10, metadata={"help": "PPO epochs per update"})
    minibatches: int = field(default=4, metadata={"help": "minibatches per epoch"})
    max_grad_norm: float = field(default=0.5, metadata={"help": "gradient-norm clip"})

    def __post_init__(self) -> None:
        check_range("lr", self.lr, 0.0, 1.0, low_open=True)
        check_range("gamma", self.gamma, 0.0, 1.0)
        check_range("gae_lambda", self.gae_lambda, 0.0, 1.0)
        check_range("clip", self.clip, 0.0, 1.0, low_open=True)
        check_range("value_coef", self.value_coef, 0.0, math.inf)
        check_range("entropy_coef", self.entropy_coef, 0.0, math.inf)
        check_range("max_grad_norm", self.max_grad_norm, 0.0, math.inf, low_open=True)
        check_integers(self, ("epochs", "minibatches"), 1)


@dataclass(frozen=True)
class Rollout:
    """On-policy transitions, as collected — (T, N, …) tensors of T vector steps of N environments — or, once
    :meth:`flatten`-ed, as one (T·N, …) batch for the PPO update.

    ``values`` are team values in return units and ``last_value`` (N,) bootstraps a collected rollout's tail;
    ``privileged`` holds the privileged critic's extra inputs (None without one), ``nodes`` the node tokens
(None without the env's node options).  ``advantages`` and
    ``returns`` (GAE's) and ``reference_log_probs`` (the actions' log-probs under the policy a KL penalty
    holds the update near) are set when the rollout is flattened for the update, None before.
    """

    slots: torch.Tensor
    glob: torch.Tensor
    present: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    last_value: torch.Tensor | None = None
    privileged: torch.Tensor | None = None
    nodes: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    reference_log_probs: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.actions.shape[0]

    def flatten(self, advantages: torch.Tensor, returns: torch.Tensor,
                reference_log_probs: torch.Tensor | None = None) -> Rollout:
        """(T, N, …) → (T·N, …): one batch with the (T, N) advantages and returns, and, when given, the
        (T·N, M) reference log-probs; the tail's bootstrap value is dropped (GAE has used it)."""
        step_major = {name: (None if getattr(self, name) is None else getattr(self, name).flatten(0, 1))
                      for name in _STEP_FIELDS}
        return Rollout(**step_major, advantages=advantages.flatten(), returns=returns.flatten(),
                       reference_log_probs=reference_log_probs)

    def select(self, rows: torch.Tensor) -> Rollout:
        """The minibatch of ``rows`` of a flattened rollout."""
        parts = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return Rollout(**{name: None if part is None else part[rows] for name, part in parts.items()})


_STEP_FIELDS = ("slots", "glob", "present", "nodes", "actions", "log_probs", "values", "rewards", "dones",
                "privileged")


def clipped_surrogate(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                      clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 10, L_clip: the mean over transitions and nodes of min(r·Â, clip(r, 1 − ε, 1 + ε)·Â), with node i's
    ratio r = π(a_i | o, a_<i) / π_old(a_i | o, a_<i) and the team advantage Â shared by every node (the reward
    is shared); returns (L_clip, the (B, M) ratios)."""
    ratio = torch.exp(log_probs - old_log_probs)
    unclipped = ratio * advantages[:, None]
    clipped = ratio.clamp(1 - clip, 1 + clip) * advantages[:, None]
    return torch.min(unclipped, clipped).mean(), ratio


def value_loss(values: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Eq. 11, L_V: half the mean squared error of the (B, M) node values against the (B,) return targets
    (both in the value normaliser's units)."""
    return 0.5 * (values - targets[:, None]).pow(2).mean()


def policy_entropy(entropy: torch.Tensor) -> torch.Tensor:
    """Eq. 11, H: the mean entropy of the policy's per-node action distributions."""
    return entropy.mean()


def mat_loss(l_clip: torch.Tensor, l_value: torch.Tensor, entropy: torch.Tensor,
             settings: PPOSettings) -> torch.Tensor:
    """Eq. 12, L_MAT = −L_clip + c_v·L_V − c_e·H."""
    return -l_clip + settings.value_coef * l_value - settings.entropy_coef * entropy


def reference_kl(log_probs: torch.Tensor, reference_log_probs: torch.Tensor) -> torch.Tensor:
    """KL(π ‖ π_ref), estimated on the batch's actions by E[r − 1 − log r] with r = π_ref(a)/π(a): unbiased and
    non-negative per sample.  Ours, not the paper's: it holds a fine-tuned policy near its starting point."""
    log_ratio = reference_log_probs - log_probs
    return (torch.exp(log_ratio) - 1 - log_ratio).mean()


def ppo_loss(model: MATModel, batch: Rollout, value_norm: ValueNorm, settings: PPOSettings,
             critic_only: bool = False, critic: PrivilegedCritic | None = None,
             kl_weight: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one minibatch of a flattened rollout, with its statistics; advantages are normalised within
    it.  The values are the model's own, or those of a separate ``critic`` that also reads
    ``batch.privileged``.  ``critic_only``: c_v·L_V alone, for fitting a critic before the policy may move;
    otherwise Eq. 12, plus ``kl_weight``·:func:`reference_kl` when ``kl_weight`` > 0.
    """
    tokens = Tokens(batch.slots, batch.glob, batch.present, batch.nodes)
    log_probs, entropy, values = model.evaluate(tokens, batch.actions)
    if critic is not None:
        values = critic(tokens, batch.privileged)
    advantages = (batch.advantages - batch.advantages.mean()) / (batch.advantages.std() + 1e-8)
    l_clip, ratio = clipped_surrogate(log_probs, batch.log_probs, advantages, settings.clip)
    l_value = value_loss(values, value_norm.normalise(batch.returns))
    entropy_mean = policy_entropy(entropy)
    loss = settings.value_coef * l_value if critic_only else mat_loss(l_clip, l_value, entropy_mean, settings)
    stats = {}
    if kl_weight > 0:
        kl = reference_kl(log_probs, batch.reference_log_probs)
        stats["reference_kl"] = kl.item()
        if not critic_only:
            loss = loss + kl_weight * kl
    with torch.no_grad():
        stats.update({"policy_loss": -l_clip.item(), "value_loss": l_value.item(), "entropy": entropy_mean.item(),
                      "approx_kl": ((ratio - 1) - torch.log(ratio)).mean().item(),
                      "clip_fraction": ((ratio - 1).abs() > settings.clip).float().mean().item()})
    return loss, stats


def ppo_update(model: MATModel, optimizer: torch.optim.Optimizer, batch: Rollout, value_norm: ValueNorm,
               settings: PPOSettings, generator: torch.Generator, critic_only: bool = False,
               critic: PrivilegedCritic | None = None, kl_weight: float = 0.0) -> dict[str, float]:
    """Several epochs of shuffled minibatch steps of :func:`ppo_loss` over a flattened rollout, with
    gradient-norm clipping; returns mean statistics.  ``critic_only``: the value loss alone (give it an
    optimiser over the value head's parameters, or over ``critic``'s when the values come from a separate
    critic).

    Every step clears the gradients of everything the loss reaches (the model and ``critic``), not only of the
    parameters ``optimizer`` holds, and clips the norm over the parameters it steps.  With a critic-only
    optimiser the value loss also gives the encoder gradients; were they left, they would pile up from step
    to step and, counted in the clip, shrink the critic's steps.

    The value normaliser is updated with this batch's returns first, so the critic's targets and the
    advantages (computed before, in return units) stay consistent within the update.
    """
    value_norm.update(batch.returns)
    totals: dict[str, float] = {}
    steps = 0
    size = len(batch) // settings.minibatches
    reached = list(model.parameters()) + (list(critic.parameters()) if critic is not None else [])
    stepped = [parameter for group in optimizer.param_groups for parameter in group["params"]]
    for _ in range(settings.epochs):
        order = torch.randperm(len(batch), generator=generator).to(batch.actions.device)
        for start in range(0, size * settings.minibatches, size):
            loss, stats = ppo_loss(model, batch.select(order[start:start + size]), value_norm, settings,
                                   critic_only, critic, kl_weight)
            for parameter in reached:
                parameter.grad = None
            loss.backward()
            stats["grad_norm"] = float(nn.utils.clip_grad_norm_(stepped, settings.max_grad_norm))
            optimizer.step()
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
    return {key: value / steps for key, value in totals.items()}
