"""Predictor answers shared by every caller of a process and, through files, by every process and run (an
exact speed-up).

A predictor's answer for a task depends only on the task's row — its observed losses, recipe, ε and cap —
and in the simulator that row recurs: the same task after s batches whichever policy served it, the same
episodes in every evaluation unit, every replayed seed of a training run or a benchmark.  :data:`SHARED`
keeps the answers of neural predictors keyed by a digest of (predictor identity, row): in memory for the
process, and in answer files (:mod:`~mara_agents.predictors.answer_files`) that later processes load, so a
row is computed once per checkpoint and machine.  The forecast env, the evaluation, MAT's rollouts and the
observation wrappers all reach it through the demand stage's memo (:mod:`~mara_agents.predictors.memo`).

**Exactness.**  A batched network's answer for a row can depend on the batch it is computed in.  FM's does
not once the batch holds :data:`MIN_INVARIANT_BATCH` rows or more, while smaller batches take other kernels
and differ in the last bits.  So a call with fewer new rows is computed as it always was and never stored, a
stored answer always comes from a batch of at least that size (padded by repeating its rows), and
:func:`canary_answers` checks the property for each predictor on a fixed query before anything is shared:
where it fails, nothing is shared and every answer is the one the predictor would give alone.  The files of
a predictor are named by :func:`store_identity`: its weights and sampling settings, the predictors' code,
the torch and NumPy versions and the canary's answers on this machine, so answers computed by other code or kernels are
never read.

**Bound.**  At most :data:`CAPACITY` rows in memory (a full table starts again empty) and as many per
predictor in its files (the oldest files are removed first).
"""

from __future__ import annotations

import hashlib
import multiprocessing.util
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from mara_agents.predictors.answer_files import AnswerFiles, store_root
from mara_agents.predictors.base import MIN_INVARIANT_BATCH, Predictor, PredictorQuery
from mara_agents.predictors.digest_table import DigestTable, as_keys, distinct_keys

CAPACITY = 600_000  # rows held at most, in memory (its size: docs/research/performance.md) and in each predictor's files
FLUSH_ROWS = 50_000  # computed rows written to one answer file


def predictor_identity(predictor: Predictor) -> bytes | None:
    """A digest of what decides a neural predictor's answers (its weights, sampling settings and device), or
    None for a predictor without a ``model`` (nothing is shared for it)."""
    model = getattr(predictor, "model", None)
    if model is None or not hasattr(model, "state_dict"):
        return None
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((type(predictor).__qualname__, getattr(predictor, "n_samples", None),
                        getattr(predictor, "euler_steps", None), str(getattr(predictor, "device", None)))).encode())
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


def canary_answers(predictor: Predictor) -> np.ndarray | None:
    """The canary query's answers when ``predictor`` answers each of its rows identically in one batch, in
    batches of :data:`MIN_INVARIANT_BATCH` and more, in a batch padded by repeating one row and, for a predictor
    with ``predict_invariant`` (which may reuse what its earlier calls kept), in overlapping batches of that
    method; else None."""
    query = canary_query()
    whole = predictor.predict(query).remaining
    parts = [np.arange(0, 3), np.arange(3, 7), np.arange(7, 12)]
    split = np.concatenate([predictor.predict(query.subset(rows)).remaining for rows in parts])
    padded = predictor.predict(query.subset(np.array([5] * MIN_INVARIANT_BATCH))).remaining
    invariant = np.array_equal(whole, split) and np.all(padded == whole[5])
    reusing, kept = getattr(predictor, "predict_invariant", None), {}
    if invariant and reusing is not None:
        # Overlapping batches: the second reuses what the first kept (FM: the history states of rows 3–6).
        first, second = (reusing(query.subset(rows), kept).remaining for rows in (np.arange(0, 7), np.arange(3, 12)))
        invariant = np.array_equal(first, whole[:7]) and np.array_equal(second, whole[3:])
    return whole if invariant else None


def batch_invariant(predictor: Predictor) -> bool:
    """Whether ``predictor`` passes the canary (see :func:`canary_answers`)."""
    return canary_answers(predictor) is not None


@cache
def predictors_code() -> bytes:
    """A digest of the predictors' source files: answers stored by other code are never read."""
    digest = hashlib.blake2b(digest_size=16)
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.digest()


def store_identity(identity: bytes, canary: np.ndarray) -> str:
    """The name of a predictor's answer files: its identity, the predictors' code, the torch and NumPy
    versions and its canary answers on this machine (a fingerprint of the kernels that computed them)."""
    import torch  # only neural predictors have an identity, and they bring torch
    digest = hashlib.blake2b(identity, digest_size=16)
    digest.update(predictors_code())
    digest.update(f"{torch.__version__} {np.__version__}".encode())
    digest.update(np.ascontiguousarray(canary, dtype=np.float64).tobytes())
    return digest.hexdigest()


def row_salt(identity: bytes | None) -> bytes:
    """The BLAKE2b key a predictor's row digests are made with (rows of different predictors never meet)."""
    return b"" if identity is None else identity[:hashlib.blake2b.MAX_KEY_SIZE]


class SharedAnswers:
    """The process's answers, keyed by a digest of (predictor identity, row), backed by answer files.

    Digests live in a :class:`~mara_agents.predictors.digest_table.DigestTable`, answers in one NumPy array
    of ``capacity`` rows (remaining, then the per-sample estimates when the predictor gives them): a stored
    row costs at most about 110 bytes (up to 40 in the table, 72 for 9 float64 answers), allocated on first
    use.  A predictor's files are read when it first passes the canary; the rows it computes are written in
    files of :data:`FLUSH_ROWS` rows, and the rest by :meth:`flush` (when the process ends, or the caller is
    done).  A predictor with ``predict_invariant`` (FM) computes through it, with a dictionary kept per identity
    in which it may keep intermediate results for later calls (FM's history states).
    """

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._table: DigestTable | None = None
        self._values = np.empty((0, 0))  # row: [remaining, samples…], NaN where a predictor gave no samples
        self._invariant: dict[bytes, bool] = {}
        self._files: dict[bytes, AnswerFiles] = {}
        self._pending: dict[bytes, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._pending_rows: dict[bytes, int] = {}
        self._width: dict[bytes, int] = {}  # values per row of each predictor: 1 + its samples per estimate
        self._kept: dict[bytes, dict[str, Any]] = {}  # per predictor: what its predict_invariant keeps across calls
        self._flushes_at_exit: int | None = None  # the process that will write the queued rows when it ends

    def __len__(self) -> int:
        """Rows held in memory."""
        return 0 if self._table is None else len(self._table)

    def close(self) -> None:
        """Write the pending rows, then free the answers (a later use reads the files again)."""
        self.flush()
        self._table = None
        self._values = np.empty((0, 0))
        self._invariant.clear()
        self._files.clear()
        self._width.clear()
        self._kept.clear()

    def flush(self) -> None:
        """Write every predictor's rows computed since its last file."""
        for identity in list(self._pending):
            self._write(identity)

    def usable(self, identity: bytes | None, predictor: Predictor) -> bool:
        """Whether answers of this predictor may be shared: it has an identity and passed the canary (checked,
        and its files read, on first use)."""
        if identity is None:
            return False
        if identity not in self._invariant:
            canary = canary_answers(predictor)
            self._invariant[identity] = canary is not None
            root = store_root()
            if canary is not None and root is not None:
                self._files[identity] = AnswerFiles(root / store_identity(identity, canary), self.capacity)
                keys, values = self._files[identity].load(self.capacity // 2)
                if len(keys):
                    self._width[identity] = values.shape[1]
                    self._store(keys, values)
        return self._invariant[identity]

    def answer(self, predictor: Predictor, identity: bytes, query: PredictorQuery, digests: Sequence[bytes],
               rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """(remaining, samples) for the ``rows`` of ``query`` (default all; at least :data:`MIN_INVARIANT_BATCH`
        of them; one digest per row, made with :func:`row_salt`): stored answers where there are some, the
        others computed in one batch padded to that size and stored."""
        rows = np.arange(len(query)) if rows is None else rows
        keys = as_keys(digests)
        slots = self._table.lookup_keys(keys) if self._table is not None else np.full(len(keys), -1)
        found, todo = np.flatnonzero(slots >= 0), np.flatnonzero(slots < 0)
        known = self._values[slots[found]]  # read before storing: a full store starts again empty
        fresh = np.empty((0, 0))
        if todo.size:
            asked = np.resize(todo, max(todo.size, MIN_INVARIANT_BATCH))  # repeats rows up to the size
            asked_query = query.subset(rows[asked])
            if hasattr(predictor, "predict_invariant"):  # reuses what earlier batches kept: checked by the canary
                prediction = predictor.predict_invariant(asked_query, self._kept.setdefault(identity, {}))
            else:
                prediction = predictor.predict(asked_query)
            fresh = np.column_stack([prediction.remaining[:todo.size],
                                     np.full((todo.size, 0), np.nan) if prediction.samples is None
                                     else prediction.samples[:todo.size]])
            self._width[identity] = max(self._width.get(identity, 1), fresh.shape[1])
            kept = self._store(keys[todo], fresh, looked_up=True)
            if identity in self._files and kept.size:
                self._keep(identity, keys[todo][kept], fresh[kept])
        width = self._width[identity]
        values = np.full((len(keys), width), np.nan)
        if found.size:
            common = min(width, known.shape[1])
            values[found, :common] = known[:, :common]
        if todo.size:
            values[todo, :fresh.shape[1]] = fresh
        # None only for a predictor that does not sample; a sampling predictor's rows without samples (FM's
        # tasks in warm-up, empty slots) stay NaN rows, as the predictor alone gives them.
        return values[:, 0], (values[:, 1:] if width > 1 else None)

    def _keep(self, identity: bytes, keys: np.ndarray, values: np.ndarray) -> None:
        """Queue computed rows for the predictor's files, writing a file once :data:`FLUSH_ROWS` are queued."""
        if self._flushes_at_exit != os.getpid():
            # At the exit of this process, including a pool's worker (which ends without running atexit).
            multiprocessing.util.Finalize(self, self.flush, exitpriority=0)
            self._flushes_at_exit = os.getpid()
        self._pending.setdefault(identity, []).append((keys, values))
        self._pending_rows[identity] = self._pending_rows.get(identity, 0) + len(keys)
        if self._pending_rows[identity] >= FLUSH_ROWS:
            self._write(identity)

    def _write(self, identity: bytes) -> None:
        pending = self._pending.pop(identity, [])
        self._pending_rows.pop(identity, None)
        if pending and identity in self._files:
            self._files[identity].write(np.concatenate([part[0] for part in pending]),
                                        np.concatenate([part[1] for part in pending]))

    def _store(self, keys: np.ndarray, values: np.ndarray, looked_up: bool = False) -> np.ndarray:
        """Keep the answers of the distinct rows of ``keys`` not stored yet (a call can hold the same row more
        than once, e.g. the empty slots at an episode's start; ``looked_up``: none is stored, the caller just
        looked them up); a store that would outgrow its capacity starts again empty.  Returns the indices of
        the rows kept."""
        if self._table is None:
            self._table = DigestTable(self.capacity)
        if not len(keys):
            return np.zeros(0, dtype=np.int64)
        first = distinct_keys(keys)
        if not looked_up:
            first = first[self._table.lookup_keys(keys[first]) < 0]
        if first.size > self.capacity:
            return first[:0]  # more distinct rows than the store holds at all: answered, not kept
        if len(self._table) + first.size > self.capacity:
            self._table.clear()
        stored = self._table.insert_keys(keys[first])
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
        self._values[stored, :values.shape[1]] = values[first]
        return first


SHARED = SharedAnswers()
