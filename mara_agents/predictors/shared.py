"""Answers shared by every policy of one process while they play the same episodes (an exact speed-up).

A predictor's answer for a task depends only on the task's row — its observed losses, recipe, ε and cap —
and in the simulator that row is the same after s batches whichever policy served the task.  The evaluation
plays the same episodes with every method and training seed, and the FM-driven ones ask for the same rows
again and again: most of their rows were asked before (figures in ``docs/performance.md``, "The evaluation:
predictor answers shared across policies").  :data:`SHARED` keeps the answers of one *scope* (the evaluation harness
opens one per unit of work, named by its episodes), so a later unit on the same episodes reuses them.

**Exactness.**  A batched network's answer for a row can depend on the batch it is computed in.  FM's does
not once the batch holds :data:`MIN_INVARIANT_BATCH` rows or more (on the CPUs of ``docs/performance.md``),
while smaller batches take other kernels and differ in the last bits.  So a call with fewer new rows is computed as it always was and
never stored, a stored answer always comes from a batch of at least that size (padded by repeating its rows),
and :func:`batch_invariant` checks the property for each predictor on a fixed query before the store is used:
where it fails, nothing is shared and every answer is the one the predictor would give alone.

Off unless a scope is open, so training and direct use of a predictor are unaffected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from mara_agents.predictors.base import Predictor, PredictorQuery
from mara_agents.predictors.digest_table import DIGEST_BYTES, DigestTable

MIN_INVARIANT_BATCH = 3  # rows per call from which FM's answers no longer depend on the batch (checked below)
CAPACITY = 600_000  # stored rows at most (its memory: docs/performance.md); a scope that outgrows it starts again empty


def predictor_identity(predictor: Predictor) -> bytes | None:
    """A digest of what decides a neural predictor's answers (its weights and sampling settings), or None
    for a predictor without a ``model`` (nothing is shared for it)."""
    model = getattr(predictor, "model", None)
    if model is None or not hasattr(model, "state_dict"):
        return None
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((type(predictor).__qualname__, getattr(predictor, "n_samples", None),
                        getattr(predictor, "euler_steps", None))).encode())
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.digest()


def canary_query(rows: int = 12) -> PredictorQuery:
    """A fixed query of ``rows`` noisy power-law loss prefixes of different lengths (no data needed)."""
    rng = np.random.default_rng(20261204)
    width = 48
    length = rng.integers(6, width + 1, rows)
    steps = np.arange(1, width + 1)
    curves = 2.5 * steps[None, :] ** -rng.uniform(0.1, 0.5, (rows, 1)) + rng.normal(0, 0.01, (rows, width))
    history = np.where(steps[None, :] <= length[:, None], np.cumsum(curves, axis=1) / steps, 0.0)
    current = history[np.arange(rows), length - 1]
    return PredictorQuery(history=history.astype(np.float32), length=length, batch_size=np.full(rows, 64.0),
                          lr=np.full(rows, 1e-3), eps=current * 0.8, cap=np.full(rows, 200.0))


def batch_invariant(predictor: Predictor) -> bool:
    """Whether ``predictor`` answers each row of the canary query identically in one batch, in batches of
    :data:`MIN_INVARIANT_BATCH` and more, and in a batch padded by repeating one row."""
    query = canary_query()
    whole = predictor.predict(query).remaining
    parts = [np.arange(0, 3), np.arange(3, 7), np.arange(7, 12)]
    split = np.concatenate([predictor.predict(query.subset(rows)).remaining for rows in parts])
    padded = predictor.predict(query.subset(np.array([5] * MIN_INVARIANT_BATCH))).remaining
    return bool(np.array_equal(whole, split) and np.all(padded == whole[5]))


class SharedAnswers:
    """The process's store of answers, keyed by a digest of (predictor identity, row key), for the open scope
    only.

    Digests live in a :class:`~mara_agents.predictors.digest_table.DigestTable`, answers in one NumPy array
    of ``capacity`` rows (remaining, then the per-sample estimates when the predictor gives them): a stored
    row costs at most about 110 bytes (up to 40 in the table, 72 for 9 float64 answers), and the table is only
    allocated while a scope is open.
    """

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.scope: object = None
        self._table: DigestTable | None = None  # made when a scope opens, freed when it closes
        self._values = np.empty((0, 0))  # row: [remaining, samples…], NaN where a predictor gave no samples
        self._invariant: dict[bytes, bool] = {}

    def __len__(self) -> int:
        """Rows stored in the open scope."""
        return 0 if self._table is None else len(self._table)

    def open(self, scope: object) -> None:
        """Share answers among the policies played under ``scope`` (kept while the same scope is reopened)."""
        if self._table is None:
            self._table = DigestTable(self.capacity)
        elif scope != self.scope:
            self._table.clear()
        self.scope = scope

    def close(self) -> None:
        """Stop sharing and free the answers."""
        self._table = None
        self._values = np.empty((0, 0))
        self.scope = None

    def usable(self, identity: bytes | None, predictor: Predictor) -> bool:
        """Whether answers of this predictor may be shared now: a scope is open and it passed the canary."""
        if self.scope is None or identity is None:
            return False
        if identity not in self._invariant:
            self._invariant[identity] = batch_invariant(predictor)
        return self._invariant[identity]

    def answer(self, predictor: Predictor, identity: bytes, query: PredictorQuery,
               keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray | None]:
        """(remaining, samples) for every row of ``query`` (at least :data:`MIN_INVARIANT_BATCH` rows): stored
        answers where there are some, the others computed in one batch padded to that size and stored."""
        salt = identity[:hashlib.blake2b.MAX_KEY_SIZE]
        digests = [hashlib.blake2b(key, digest_size=DIGEST_BYTES, key=salt).digest() for key in keys]
        assert self._table is not None, "answer() needs an open scope (see usable())"
        slots = self._table.lookup(digests)
        found, todo = np.flatnonzero(slots >= 0), np.flatnonzero(slots < 0)
        known = self._values[slots[found]]  # read before storing: a full store starts again empty
        fresh = np.empty((0, known.shape[1]))
        if todo.size:
            asked = np.resize(todo, max(todo.size, MIN_INVARIANT_BATCH))  # repeats rows up to the size
            prediction = predictor.predict(query.subset(asked))
            fresh = np.column_stack([prediction.remaining[:todo.size],
                                     np.full((todo.size, 0), np.nan) if prediction.samples is None
                                     else prediction.samples[:todo.size]])
            self._store([digests[row] for row in todo.tolist()], fresh)
        rows = np.full((len(digests), max(known.shape[1], fresh.shape[1], 1)), np.nan)
        rows[found, :known.shape[1]] = known
        rows[todo, :fresh.shape[1]] = fresh
        # None only where no row has samples (a predictor that does not sample); a sampling predictor's rows
        # without samples (FM's tasks in warm-up, empty slots) stay NaN rows, as the predictor alone gives them.
        samples = rows[:, 1:]
        return rows[:, 0], (None if samples.shape[1] == 0 or np.isnan(samples).all() else samples)

    def _store(self, digests: list[bytes], values: np.ndarray) -> None:
        """Keep the answers of the call's distinct rows (a call can hold the same row more than once, e.g. the
        empty slots at an episode's start); a store that would outgrow its capacity starts again empty."""
        first = {digest: row for row, digest in reversed(list(enumerate(digests)))}
        if len(first) > self.capacity:
            return  # more distinct rows than the store holds at all: answered, not kept
        assert self._table is not None
        if len(self._table) + len(first) > self.capacity:
            self._table.clear()
        stored = self._table.insert(list(first))
        width = max(values.shape[1], self._values.shape[1])
        if width > self._values.shape[1]:
            # The whole capacity at once, never grown: the operating system backs the pages only as rows are
            # written, and no copy of a growing array is left behind in the heap.
            wider = np.empty((self.capacity, width))
            kept = min(self._values.shape[0], int(stored[0]) if stored.size else 0)
            wider[:kept] = np.nan
            wider[:kept, :self._values.shape[1]] = self._values[:kept]
            self._values = wider
        self._values[stored] = np.nan
        self._values[stored, :values.shape[1]] = values[np.fromiter(first.values(), dtype=np.int64, count=len(first))]


SHARED = SharedAnswers()
