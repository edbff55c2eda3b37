"""PPO with GAE for the MAT allocator (paper §4.2, Eqs. 10–12), plus the value normaliser.

The loss is L = −L_clip + c_v·L_V − c_e·H.  Following MAT, the clipped ratio is taken per node: node i's ratio
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

from mara_agents.config_cli import check_integers
from mara_agents.mat.critic import PrivilegedCritic
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


def _check_range(name: str, value: object, low: float, high: float, low_open: bool = False) -> None:
    """``value`` is a finite number in [low, high] (or (low, high] with ``low_open``), else ``ValueError``."""
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    inside = math.isfinite(number) and (low < number if low_open else low <= number) and number <= high
    if not inside:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be a number in {bracket}{low:g}, {high:g}], got {value!r}")


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
    reference_kl: float = field(default=0.0, metadata={
        "help": "weight of a KL penalty that keeps the policy near the one it started from (with --init-from)"})

    def __post_init__(self) -> None:
        _check_range("lr", self.lr, 0.0, 1.0, low_open=True)
        _check_range("gamma", self.gamma, 0.0, 1.0)
        _check_range("gae_lambda", self.gae_lambda, 0.0, 1.0)
        _check_range("clip", self.clip, 0.0, 1.0, low_open=True)
        _check_range("value_coef", self.value_coef, 0.0, math.inf)
        _check_range("entropy_coef", self.entropy_coef, 0.0, math.inf)
        _check_range("max_grad_norm", self.max_grad_norm, 0.0, math.inf, low_open=True)
        _check_range("reference_kl", self.reference_kl, 0.0, math.inf)
        check_integers(self, ("epochs", "minibatches"), 1)


@dataclass(frozen=True)
class Batch:
    """A flattened rollout: tokens, stored joint actions and their old log-probs, advantages, returns, the
    actions' log-probs under the reference policy (zeros when there is none), and the privileged critic's
    extra inputs (None without one)."""

    slots: torch.Tensor
    glob: torch.Tensor
    present: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    reference_log_probs: torch.Tensor
    privileged: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.actions.shape[0]

    def select(self, rows: torch.Tensor) -> Batch:
        """The minibatch of ``rows``."""
        parts = (getattr(self, name) for name in self.__dataclass_fields__)
        return Batch(*(None if part is None else part[rows] for part in parts))


def ppo_loss(model: MATModel, batch: Batch, value_norm: ValueNorm, settings: PPOSettings,
             critic_only: bool = False,
             critic: PrivilegedCritic | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq. 12 on one minibatch; advantages are normalised within it.  The values are the model's own, or
    those of a separate ``critic`` that also reads ``batch.privileged``.

    With ``settings.reference_kl`` > 0 the loss also penalises KL(π ‖ π_ref), estimated on the batch's actions
    by E[r − 1 − log r] with r = π_ref(a)/π(a) (non-negative per sample).  ``critic_only`` leaves the policy
    terms out: the value loss alone, for fitting a critic before the policy may move.
    """
    tokens = Tokens(batch.slots, batch.glob, batch.present)
    log_probs, entropy, values = model.evaluate(tokens, batch.actions)
    if critic is not None:
        values = critic(tokens, batch.privileged)
    advantages = (batch.advantages - batch.advantages.mean()) / (batch.advantages.std() + 1e-8)
    ratio = torch.exp(log_probs - batch.log_probs)
    unclipped = ratio * advantages[:, None]
    clipped = ratio.clamp(1 - settings.clip, 1 + settings.clip) * advantages[:, None]
    policy_loss = -torch.min(unclipped, clipped).mean()
    value_loss = 0.5 * (values - value_norm.normalise(batch.returns)[:, None]).pow(2).mean()
    entropy_mean = entropy.mean()
    if critic_only:
        loss = settings.value_coef * value_loss
    else:
        loss = policy_loss + settings.value_coef * value_loss - settings.entropy_coef * entropy_mean
    extra = {}
    if settings.reference_kl > 0:
        log_ratio = batch.reference_log_probs - log_probs
        reference_kl = (torch.exp(log_ratio) - 1 - log_ratio).mean()
        extra["reference_kl"] = reference_kl.item()
        if not critic_only:
            loss = loss + settings.reference_kl * reference_kl
    with torch.no_grad():
        stats = {**extra, "policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                 "entropy": entropy_mean.item(), "approx_kl": ((ratio - 1) - torch.log(ratio)).mean().item(),
                 "clip_fraction": ((ratio - 1).abs() > settings.clip).float().mean().item()}
    return loss, stats


def ppo_update(model: MATModel, optimizer: torch.optim.Optimizer, batch: Batch, value_norm: ValueNorm,
               settings: PPOSettings, generator: torch.Generator, critic_only: bool = False,
               critic: PrivilegedCritic | None = None) -> dict[str, float]:
    """Several epochs of shuffled minibatch steps with gradient-norm clipping; returns mean statistics.
    ``critic_only``: the value loss alone (give it an optimiser over the value head's parameters, or over
    ``critic``'s when the values come from a separate critic).

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
                                   critic_only, critic)
            for parameter in reached:
                parameter.grad = None
            loss.backward()
            stats["grad_norm"] = float(nn.utils.clip_grad_norm_(stepped, settings.max_grad_norm))
            optimizer.step()
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
    return {key: value / steps for key, value in totals.items()}
