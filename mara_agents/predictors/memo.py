"""Reuse last step's estimates for tasks whose inputs have not changed since (a pure speed-up).

Both predictors are deterministic functions of one task's row — its observed losses, recipe, ε and cap
(FM integrates fixed Sobol noise) — and in the simulator a row changes only when the task is served: an
unserved task keeps its history, its length and so its generation cap 2·B − s.  On a busy cluster a third
or more of the active tasks wait at any step, so an allocator that asks for every slot at every step would
recompute many identical answers.  :class:`StepMemo` keeps the answers of the previous call only, keyed by
a digest of the row's full content, so memory stays bounded and a hit is exactly the answer the row would
get again (up to the float round-off by which a batched neural network's output can depend on the batch it
is in).  Rows it does not hold go to the process's shared answers (:mod:`~mara_agents.predictors.shared`)
when there are enough of them for those to be exact, else to the predictor.

A row at the same position as in the previous call with the same bytes is recognised by comparing whole
arrays, so only the rows that changed are digested one by one: the memo's cost follows the tasks served, not
the slots.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from mara_agents.predictors.base import Prediction, Predictor, PredictorQuery
from mara_agents.predictors.digest_table import prefix_digests
from mara_agents.predictors.shared import MIN_INVARIANT_BATCH, SHARED, predictor_identity, row_salt


def row_scalars(query: PredictorQuery) -> np.ndarray:
    """(n, 5) float64: everything a predictor reads for a task besides its losses."""
    return np.stack([query.length.astype(np.float64), query.batch_size.astype(np.float64),
                     query.lr.astype(np.float64), query.eps.astype(np.float64),
                     query.cap.astype(np.float64)], axis=1)


def row_digests(query: PredictorQuery, rows: np.ndarray, salt: bytes = b"") -> list[bytes]:
    """One digest per task of ``rows``: BLAKE2b, keyed with ``salt``, of its scalars and observed losses."""
    return prefix_digests(row_scalars(query), query.history, query.length, rows, salt)


class RowSnapshot:
    """A copy of the previous call's rows, to find the rows of a new call that are byte for byte the same at
    the same position (whole-array comparisons: no per-row work)."""

    def __init__(self) -> None:
        self.scalars = np.zeros((0, 5))
        self.history = np.zeros((0, 0))

    def unchanged(self, query: PredictorQuery, scalars: np.ndarray) -> np.ndarray:
        """(n,) bool: the rows equal to the snapshot's at their position (False where the shapes differ)."""
        n = len(query)
        if self.scalars.shape != scalars.shape or self.history.dtype != query.history.dtype:
            return np.zeros(n, dtype=bool)
        same = np.all(self.scalars.view(np.uint64) == scalars.view(np.uint64), axis=1)
        # Equal scalars mean equal lengths, all within the snapshot's width: only those columns are compared.
        width = min(self.history.shape[1], query.history.shape[1])
        if width and same.any():
            as_bits = np.dtype(f"u{query.history.itemsize}")
            same &= np.all(query.history[:, :width].view(as_bits) == self.history[:, :width].view(as_bits), axis=1)
        return same

    def take(self, query: PredictorQuery, scalars: np.ndarray) -> None:
        """Remember ``query``'s rows (its losses up to its longest history)."""
        self.scalars = scalars
        self.history = query.history[:, :int(query.length.max(initial=0))].copy()


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
        self._snapshot = RowSnapshot()
        self._digests: list[bytes] = []  # the previous call's digest per row
        self._previous: dict[bytes, int] = {}  # digest → its row in the previous call's answers
        self._remaining = np.zeros(0)
        self._samples: np.ndarray | None = None
        self.hits = 0
        self.misses = 0

    def predict(self, query: PredictorQuery) -> Prediction:
        scalars = row_scalars(query)
        same = self._snapshot.unchanged(query, scalars)
        changed = np.flatnonzero(~same)
        fresh = row_digests(query, changed, self.salt)
        index = np.where(same, np.arange(len(query)), -1)
        index[changed] = np.fromiter((self._previous.get(key, -1) for key in fresh), dtype=np.int64,
                                     count=len(fresh))
        digests = list(self._digests) if same.any() else [b""] * len(query)
        for row, key in zip(changed.tolist(), fresh):
            digests[row] = key
        found, missing = np.flatnonzero(index >= 0), np.flatnonzero(index < 0)
        remaining = np.empty(len(query))
        remaining[found] = self._remaining[index[found]]
        samples = None
        if found.size and self._samples is not None:
            samples = np.full((len(query), self._samples.shape[1]), np.nan)
            samples[found] = self._samples[index[found]]
        if missing.size:
            asked_remaining, asked_samples = self._ask(query, missing, [digests[row] for row in missing.tolist()])
            remaining[missing] = asked_remaining
            if asked_samples is not None:
                if samples is None:
                    samples = np.full((len(query), asked_samples.shape[1]), np.nan)
                samples[missing] = asked_samples
        self.hits += found.size
        self.misses += missing.size
        self._remember(digests, changed, fresh)
        self._snapshot.take(query, scalars)
        self._remaining, self._samples = remaining, samples
        return Prediction(remaining=remaining, samples=samples)

    @cached_property
    def identity(self) -> bytes | None:
        """The predictor's digest for shared answers (None: never shared); computed on first use, once."""
        return predictor_identity(self.predictor)

    @cached_property
    def salt(self) -> bytes:
        """The key of this predictor's row digests."""
        return row_salt(self.identity)

    def _remember(self, digests: list[bytes], changed: np.ndarray, fresh: list[bytes]) -> None:
        """Make ``digests`` the previous call's, updating the digest → row map only where rows changed (a
        digest held by several rows may keep pointing at one of them: their answers are the same)."""
        if len(digests) != len(self._digests):
            self._previous = {key: row for row, key in enumerate(digests)}
        else:
            for row, key in zip(changed.tolist(), fresh):
                if self._previous.get(self._digests[row]) == row:
                    del self._previous[self._digests[row]]
                self._previous[key] = row
        self._digests = digests

    def _ask(self, query: PredictorQuery, rows: np.ndarray, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray | None]:
        """The predictor's (remaining, samples) for the ``rows`` of ``query`` this memo does not hold: from the
        shared answers (:mod:`~mara_agents.predictors.shared`) when there are enough rows for them to be exact
        and the predictor passed their canary, else from one call of the predictor."""
        if len(keys) >= MIN_INVARIANT_BATCH and SHARED.usable(self.identity, self.predictor):
            return SHARED.answer(self.predictor, self.identity, query, keys, rows)
        asked = self.predictor.predict(query if rows.size == len(query) else query.subset(rows))
        return asked.remaining, asked.samples
