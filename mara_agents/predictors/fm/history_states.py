"""FM's history states kept across calls: an exact speed-up of its batched answers.

A task's history state, the GRU's output after the last encoded point of its prefix, reads only the prefix's
losses and the batch size, not ε, the cap or the learning rate.  In the simulator a bank curve's prefix recurs
in task after task, with other budgets and thresholds, so most history states of an evaluation have been
computed before even where the whole answer, which also reads the cap and ε, has not.
:class:`HistoryStates` keeps the states keyed by a digest of (losses, batch size), so the GRU runs only for
prefixes it has not seen.

A state is the same bit for bit whichever batch it was computed in, provided the batch holds at least
:data:`~mara_agents.predictors.base.MIN_INVARIANT_BATCH` rows (smaller batches take other kernels), so states are
computed in batches padded to that size, and only for callers that ask where FM's answers are batch-invariant
(the shared answers, after their canary, :mod:`~mara_agents.predictors.shared`, which also checks this path).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mara_agents.predictors.base import MIN_INVARIANT_BATCH
from mara_agents.predictors.digest_table import DigestRows, as_keys, prefix_digests

CAPACITY = 1 << 18  # states held at most, each of the model's hidden size in float32


def prefix_keys(history: np.ndarray, length: np.ndarray, batch_size: np.ndarray) -> np.ndarray:
    """(n, 2) uint64 digests of each row's batch size and first ``length`` losses (float32, as the GRU reads them)."""
    sizes = np.asarray(batch_size, dtype=np.float64)[:, None]
    return as_keys(prefix_digests(sizes, history.astype(np.float32, copy=False), length, np.arange(len(sizes))))


class HistoryStates:
    """History states by prefix, at most ``capacity`` (the least recently asked for are forgotten first)."""

    def __init__(self, width: int, capacity: int = CAPACITY):
        self.rows = DigestRows(capacity, width, np.float32)
        self.computed = 0
        self.reused = 0

    def __call__(self, compute: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                 history: torch.Tensor, length: torch.Tensor, batch_size: torch.Tensor) -> torch.Tensor:
        """The states (n, width) of the rows of (``history``, ``length``, ``batch_size``), CPU tensors: held
        ones from memory, the others from one call of ``compute`` on their distinct prefixes, padded by
        repeating rows to at least :data:`~mara_agents.predictors.base.MIN_INVARIANT_BATCH` rows."""
        keys = prefix_keys(history.numpy(), length.numpy(), batch_size.numpy())
        held, values = self.rows.get(keys)
        states = np.empty((len(keys), self.rows.width), dtype=np.float32)
        states[held] = values
        missing = np.setdiff1d(np.arange(len(keys)), held, assume_unique=True)
        if missing.size:
            _, first_index, inverse = np.unique(keys[missing], axis=0, return_index=True, return_inverse=True)
            first = missing[first_index]
            asked = torch.as_tensor(np.resize(first, max(first.size, MIN_INVARIANT_BATCH)))
            computed = compute(history[asked], length[asked], batch_size[asked])[:first.size].numpy()
            self.rows.put(keys[first], computed)
            states[missing] = computed[inverse.reshape(-1)]
            self.computed += first.size
        self.reused += len(keys) - missing.size
        return torch.from_numpy(states)
