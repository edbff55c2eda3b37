"""The conditional flow-matching network (paper §4.1, Eqs. 7–8; Appendix A.2).

A GRU(64) reads the encoded history; its final state joined with the standardised static features is the
context c.  A two-hidden-layer MLP v_θ(z_u, u, c) with a sinusoidal embedding of the flow time u predicts
the velocity of the linear path from Gaussian noise z_0 to the standardised target z_1.

The model also stores (as buffers, so they travel in the checkpoint) the means and standard deviations that
standardise the history encoding, the static features and the target; they are estimated once from
training examples by :meth:`FlowMatchingModel.set_statistics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import nn

from mara_common import checks
from mara_agents.predictors.fm.encoding import HISTORY_FEATURES, STATIC_FEATURES, encode_history
from mara_agents.predictors.fm.target import BINS, DELTA

MAX_WIDTH = 4096  # the largest layer width a setting may ask for: far above any useful model, far below OOM


@dataclass(frozen=True)
class FMHyperParameters:
    """Architecture of the flow model (paper Appendix A.2 where it says, otherwise our choice)."""

    hidden: int = 64        # GRU history-encoder width (paper: 64)
    history_points: int = 32  # W: most prefix points the GRU reads (see encoding.thinned_positions)
    bins: int = BINS        # target coordinates J (paper: 32)
    width: int = 128        # velocity-MLP hidden width
    time_dim: int = 32      # sinusoidal time-embedding size
    delta: float = DELTA    # δ of Eq. (5)

    def __post_init__(self) -> None:
        for name in ("hidden", "history_points", "bins", "width"):
            checks.integer(name, getattr(self, name), 1, MAX_WIDTH)
        checks.integer("time_dim", self.time_dim, 2, MAX_WIDTH)
        if self.time_dim % 2:
            raise ValueError(f"time_dim must be even (sine and cosine halves), got {self.time_dim}")
        checks.number("delta", self.delta, 0.0, low_open=True)

    def to_dict(self) -> dict[str, float | int]:
        """Plain-dict form stored in checkpoints and manifests."""
        return asdict(self)


def sinusoidal_embedding(u: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of the flow time u ∈ [0, 1] (paper §4.1): [sin(ω_k u), cos(ω_k u)] with
    geometric frequencies ω_k = 1000^(1 − k/(d/2)), k = 0..d/2 − 1."""
    half = dim // 2
    exponent = 1.0 - torch.arange(half, dtype=u.dtype, device=u.device) / half
    frequency = torch.exp(math.log(1000.0) * exponent)
    angle = u[:, None] * frequency[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


def linear_path(z0: torch.Tensor, z1: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Eq. (7): z_u = (1 − u) z_0 + u z_1."""
    return (1.0 - u[:, None]) * z0 + u[:, None] * z1


def flow_matching_loss(velocity: torch.Tensor, z0: torch.Tensor, z1: torch.Tensor) -> torch.Tensor:
    """Eq. (8): E ‖v_θ(z_u, u, c) − (z_1 − z_0)‖², summed over coordinates, averaged over the batch."""
    return ((velocity - (z1 - z0)) ** 2).sum(dim=-1).mean()


class FlowMatchingModel(nn.Module):
    """History encoder + velocity field.  Inputs are raw (unstandardised); standardisation is internal."""

    def __init__(self, hparams: FMHyperParameters = FMHyperParameters()):
        super().__init__()
        self.hparams = hparams
        self.encoder = nn.GRU(HISTORY_FEATURES, hparams.hidden, batch_first=True)
        context_dim = hparams.hidden + STATIC_FEATURES
        self.velocity_mlp = nn.Sequential(
            nn.Linear(hparams.bins + hparams.time_dim + context_dim, hparams.width), nn.SiLU(),
            nn.Linear(hparams.width, hparams.width), nn.SiLU(),
            nn.Linear(hparams.width, hparams.bins))
        for name, size in (("history", HISTORY_FEATURES), ("static", STATIC_FEATURES), ("target", hparams.bins)):
            self.register_buffer(f"{name}_mean", torch.zeros(size))
            self.register_buffer(f"{name}_std", torch.ones(size))

    def set_statistics(self, history: torch.Tensor, length: torch.Tensor, batch_size: torch.Tensor,
                       static: torch.Tensor, target: torch.Tensor) -> None:
        """Fix the standardisation from raw example tensors (as passed to :meth:`context`) and their targets
        (n, J).  Standard deviations are floored so constant features stay finite."""
        encoded, count = encode_history(history, length, batch_size, self.hparams.history_points)
        points = encoded[torch.arange(encoded.shape[1], device=encoded.device)[None, :] < count[:, None]]
        for name, values in (("history", points), ("static", static), ("target", target)):
            getattr(self, f"{name}_mean").copy_(values.mean(dim=0))
            getattr(self, f"{name}_std").copy_(values.std(dim=0).clamp(min=1e-3))

    def standardise_target(self, target: torch.Tensor) -> torch.Tensor:
        """z_1 = (y − mean) / std."""
        return (target - self.target_mean) / self.target_std

    def unstandardise_target(self, z: torch.Tensor) -> torch.Tensor:
        """y = z·std + mean (the inverse of :meth:`standardise_target`)."""
        return z * self.target_std + self.target_mean

    def context(self, history: torch.Tensor, length: torch.Tensor, batch_size: torch.Tensor,
                static: torch.Tensor) -> torch.Tensor:
        """c = [GRU state after the last encoded point, standardised static features]; (n, hidden + 4).

        ``history`` (n, T) holds raw cumulative-average losses with ``length`` ≥ 1 valid entries per row.
        """
        return self.join_context(self.history_state(history, length, batch_size), static)

    def history_state(self, history: torch.Tensor, length: torch.Tensor, batch_size: torch.Tensor) -> torch.Tensor:
        """The GRU's state after a prefix's last encoded point, (n, hidden): the part of the context that reads
        the losses, a function of each row's observed losses and batch size only."""
        encoded, count = encode_history(history, length, batch_size, self.hparams.history_points)
        observed = (torch.arange(encoded.shape[1], device=encoded.device)[None, :] < count[:, None])[..., None]
        scaled = torch.where(observed, (encoded - self.history_mean) / self.history_std, torch.zeros_like(encoded))
        # The GRU is causal, so its output at the last encoded point equals the final state of a packed run;
        # running over the padded batch and gathering is about twice as fast on a CPU.
        outputs, _ = self.encoder(scaled)
        return outputs[torch.arange(outputs.shape[0], device=outputs.device), count - 1]

    def join_context(self, state: torch.Tensor, static: torch.Tensor) -> torch.Tensor:
        """c from the history states (n, hidden) and the raw static features (n, 4)."""
        return torch.cat([state, (static - self.static_mean) / self.static_std], dim=-1)

    def velocity(self, z: torch.Tensor, u: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """v_θ(z_u, u, c) for flat batches: z (m, J), u (m,), context (m, C)."""
        return self.velocity_mlp(torch.cat([z, sinusoidal_embedding(u, self.hparams.time_dim), context], dim=-1))

    def sampling_velocity(self, context: torch.Tensor, repeats: int, time_terms: dict[float, torch.Tensor] | None = None
                          ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """:meth:`velocity` for sampling: ``repeats`` noise rows per task (task-major) and one flow time per
        Euler step.  The first layer is linear in [z, time embedding, c], so its context term is computed
        once per task and its time term once per step rather than once per sample row; the same function
        to float round-off, with about a third fewer FLOPs (the predictor's dominant CPU cost).

        The returned function runs the layers' kernels on tensors of the shapes above and updates its
        intermediate results in place (same elementwise operations, same order), so it allocates less than
        the module's forward pass; it is meant for inference, without autograd.  ``time_terms``, kept by the
        caller across calls while the weights stay as they are, holds each flow time's term once computed.
        """
        first = self.velocity_mlp[0]
        layers = [(layer.weight, layer.bias) for layer in self.velocity_mlp[2::2]]
        bins, time_dim = self.hparams.bins, self.hparams.time_dim
        w_z, w_t, w_c = first.weight.split([bins, time_dim, context.shape[-1]], dim=1)
        context_term = (context @ w_c.T + first.bias)[:, None, :]  # (n, 1, width): broadcast over the repeats

        def time_term(u: torch.Tensor) -> torch.Tensor:
            if time_terms is None:
                return sinusoidal_embedding(u, time_dim) @ w_t.T
            key = float(u[0])
            if key not in time_terms:
                time_terms[key] = sinusoidal_embedding(u, time_dim) @ w_t.T
            return time_terms[key]

        def velocity(z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
            hidden = z @ w_z.T
            hidden += time_term(u[:1])  # every row shares the step's u
            hidden.view(context_term.shape[0], repeats, -1).add_(context_term)
            for weight, bias in layers:
                hidden = nn.functional.linear(nn.functional.silu(hidden, inplace=True), weight, bias)
            return hidden

        return velocity
