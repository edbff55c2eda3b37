"""Inputs of the flow-matching predictor: the history encoding and the static context (paper §4.1).

Every encoded point of a prefix becomes four numbers: the log processed-sample count log(S_i), the log
loss relative to the current loss log(L(S_i)/L(S_0)), and the first differences of both (0 at the first
point).  Relative losses make prefixes of different loss scales look alike; the static context (log batch
size, log learning rate, current loss, log horizon in samples) restores what they leave out.  The
threshold ε is deliberately absent, so one forecast serves every threshold.

Long prefixes are read at W evenly strided points ending at the current one (:func:`thinned_positions`).
This is our choice, not the paper's: a cumulative-average curve is smooth, so little is lost, and it bounds
the GRU's sequential steps — the dominant inference cost on a CPU — at W whatever the prefix length.
"""

from __future__ import annotations

import torch

HISTORY_FEATURES = 4  # log samples, log relative loss, and their first differences
STATIC_FEATURES = 4   # log batch size, log learning rate, current loss, log horizon


def thinned_positions(length: torch.Tensor, points: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch indices (1-based) read from each prefix: all of 1..n when n ≤ W, else ⌈k·n/W⌉ for k = 1..W.

    Returns positions (n, W) — strictly increasing, the last valid one equal to n — and the count of valid
    positions min(n, W) per row.
    """
    k = torch.arange(1, points + 1, device=length.device)[None, :]
    n = length[:, None]
    positions = torch.where(n > points, (k * n + points - 1) // points, k)
    return positions, torch.clamp(length, max=points)


def encode_history(history: torch.Tensor, length: torch.Tensor, batch_size: torch.Tensor,
                   points: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, T) cumulative-average losses → per-point encoding (n, W', 4) and the valid count per row.

    Features: [log S_i, log(L(S_i)/L(S_0)), Δ log S_i, Δ log(L(S_i)/L(S_0))] at the thinned positions i
    (S_i = i·batch size, S_0 the prefix end); padding is zero.
    """
    width = min(points, int(length.max()))
    positions, count = thinned_positions(length, width)
    observed = torch.arange(width, device=length.device)[None, :] < count[:, None]
    index = torch.where(observed, positions, length[:, None]) - 1
    losses = history.gather(1, index)
    current = history.gather(1, (length - 1)[:, None])
    log_samples = torch.log(positions.to(history.dtype) * batch_size[:, None])
    values = torch.stack([log_samples, torch.log(losses / current)], dim=-1)
    steps = torch.diff(values, dim=1, prepend=values[:, :1])
    encoded = torch.cat([values, steps], dim=-1)
    return torch.where(observed[..., None], encoded, torch.zeros_like(encoded)), count


def static_context(batch_size: torch.Tensor, lr: torch.Tensor, current_loss: torch.Tensor,
                   horizon_samples: torch.Tensor) -> torch.Tensor:
    """(n, 4) static features: [log batch size, log lr, L(S_0), log h] (h = queried horizon in samples)."""
    return torch.stack([torch.log(batch_size), torch.log(lr), current_loss, torch.log(horizon_samples)], dim=-1)
