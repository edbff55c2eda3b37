"""Reuse last step's estimates for tasks whose inputs have not changed since (a pure speed-up).

Both predictors are deterministic functions of one task's row — its observed losses, recipe, ε and cap
(FM integrates fixed Sobol noise) — and in the simulator a row changes only when the task is served: an
unserved task keeps its history, its length and so its generation cap 2·B − s.  On a busy cluster a third
or more of the active tasks wait at any step, so an allocator that asks for every slot at every step would
recompute many identical answers.  :class:`StepMemo` keeps the answers of the previous call only, keyed by
the row's full content, so memory stays bounded and a hit is exactly the answer the row would get again
(up to the float round-off by which a batched neural network's output can depend on the batch it is in).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from mara_agents.predictors.base import Prediction, Predictor, PredictorQuery
from mara_agents.predictors.shared import MIN_INVARIANT_BATCH, SHARED, predictor_identity


def row_keys(query: PredictorQuery) -> list[bytes]:
    """One key per task: the bytes of everything a predictor reads for it."""
    scalars = np.stack([query.length.astype(np.float64), query.batch_size.astype(np.float64),
                        query.lr.astype(np.float64), query.eps.astype(np.float64),
                        query.cap.astype(np.float64)], axis=1)
    history = np.ascontiguousarray(query.history)
    return [scalars[i].tobytes() + history[i, :length].tobytes() for i, length in enumerate(query.length.tolist())]


class StepMemo:
    """A :class:`Predictor` that answers rows seen in its previous call from memory and asks ``predictor``
    for the rest, in one batched call.

    It returns ``remaining`` and, when the wrapped predictor gives them (FM), the per-sample estimates
    ``samples`` — a remembered row gets the samples it was given with its estimate; it never returns sampled
    trajectories: wrap a predictor with it for allocation, and use the bare predictor when the trajectories
    are wanted.
    """

    def __init__(self, predictor: Predictor):
        self.predictor = predictor
        self._previous: dict[bytes, int] = {}  # row key → its row in the previous call's answers
        self._remaining = np.zeros(0)
        self._samples: np.ndarray | None = None
        self.hits = 0
        self.misses = 0

    def predict(self, query: PredictorQuery) -> Prediction:
        keys = row_keys(query)
        index = np.fromiter((self._previous.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
        found, missing = np.flatnonzero(index >= 0), np.flatnonzero(index < 0)
        remaining = np.empty(len(keys))
        remaining[found] = self._remaining[index[found]]
        samples = None
        if found.size and self._samples is not None:
            samples = np.full((len(keys), self._samples.shape[1]), np.nan)
            samples[found] = self._samples[index[found]]
        if missing.size:
            asked_remaining, asked_samples = self._ask(query if missing.size == len(keys) else query.subset(missing),
                                                       [keys[row] for row in missing.tolist()])
            remaining[missing] = asked_remaining
            if asked_samples is not None:
                if samples is None:
                    samples = np.full((len(keys), asked_samples.shape[1]), np.nan)
                samples[missing] = asked_samples
        self.hits += found.size
        self.misses += missing.size
        self._previous = {key: row for row, key in enumerate(keys)}
        self._remaining, self._samples = remaining, samples
        return Prediction(remaining=remaining, samples=samples)

    @cached_property
    def identity(self) -> bytes | None:
        """The predictor's digest for shared answers (None: never shared); computed on first use, once."""
        return predictor_identity(self.predictor)

    def _ask(self, query: PredictorQuery, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray | None]:
        """The predictor's (remaining, samples) for rows this memo does not hold: from the process's shared
        answers (:mod:`~mara_agents.predictors.shared`) when a scope is open and the call is large enough for
        them to be exact, else from one call of the predictor."""
        if (len(keys) >= MIN_INVARIANT_BATCH and SHARED.scope is not None
                and SHARED.usable(self.identity, self.predictor)):
            return SHARED.answer(self.predictor, self.identity, query, keys)
        asked = self.predictor.predict(query)
        return asked.remaining, asked.samples
