"""A hash table from 16-byte digests to row numbers, held in NumPy arrays.

The shared predictor answers (:mod:`~mara_agents.predictors.shared`) store up to hundreds of thousands of rows
per process.  In a Python dict every row costs an entry, a ``bytes`` key object and its hash (about 150 bytes);
here it costs its 16 key bytes and a 4-byte row number in a table kept at most two-thirds full (at most 40
bytes), and a whole call's lookups are a few vectorised probes instead of one dict access per row.

Open addressing with linear probing: a digest's first 8 bytes pick its home position, a lookup walks on from
there until it meets the digest or an empty position.  Digests are cryptographic hashes, so their bytes are
already uniform and need no further mixing.  Rows are never deleted one by one, only all at once
(:meth:`DigestTable.clear`), which keeps linear probing exact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

DIGEST_BYTES = 16
EMPTY = -1


class DigestTable:
    """Digest → row number for at most ``capacity`` digests; rows are numbered 0, 1, … in insertion order."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        size = 1 << max(4, (3 * capacity // 2).bit_length())  # at most two-thirds full: probe walks stay short
        self._mask = np.uint64(size - 1)
        self._keys = np.zeros((size, 2), dtype=np.uint64)
        self._rows = np.full(size, EMPTY, dtype=np.int32 if capacity < 2**31 else np.int64)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def clear(self) -> None:
        """Forget every digest (row numbers start again at 0)."""
        self._rows.fill(EMPTY)
        self._count = 0

    def lookup(self, digests: Sequence[bytes]) -> np.ndarray:
        """Row number of each digest, or −1 where it is not in the table."""
        return self.lookup_keys(as_keys(digests))

    def lookup_keys(self, keys: np.ndarray) -> np.ndarray:
        """:meth:`lookup` for digests given as an (n, 2) uint64 array (see :func:`as_keys`)."""
        found = np.full(len(keys), EMPTY, dtype=np.int64)
        position = keys[:, 0] & self._mask
        walking = np.arange(len(keys))
        while walking.size:
            at = position[walking]
            rows = self._rows[at]
            occupied = rows != EMPTY
            match = occupied & np.all(self._keys[at] == keys[walking], axis=1)
            found[walking[match]] = rows[match]
            walking = walking[occupied & ~match]
            position[walking] = (position[walking] + np.uint64(1)) & self._mask
        return found

    def insert(self, digests: Sequence[bytes]) -> np.ndarray:
        """Add digests that are distinct and not in the table; returns their new row numbers."""
        return self.insert_keys(as_keys(digests))

    def insert_keys(self, keys: np.ndarray) -> np.ndarray:
        """:meth:`insert` for an (n, 2) uint64 array, all rows placed at once: each walk step gives every free
        position to the first key that reached it, and the others walk on."""
        if self._count + len(keys) > self.capacity:
            raise ValueError(f"{len(keys)} more digests would exceed the table's capacity of {self.capacity}")
        new_rows = np.arange(self._count, self._count + len(keys))
        position = keys[:, 0] & self._mask
        waiting = np.arange(len(keys))
        while waiting.size:
            at = position[waiting]
            free = np.flatnonzero(self._rows[at] == EMPTY)
            if free.size:
                order = np.argsort(at[free], kind="stable")
                ordered = at[free][order]
                first = free[order[np.concatenate(([True], ordered[1:] != ordered[:-1]))]]  # first per position
                placed = waiting[first]
                self._keys[position[placed]] = keys[placed]
                self._rows[position[placed]] = new_rows[placed]
                waiting = np.delete(waiting, first)
            position[waiting] = (position[waiting] + np.uint64(1)) & self._mask
        self._count += len(keys)
        return new_rows


def prefix_digests(heads: np.ndarray, history: np.ndarray, lengths: np.ndarray, rows: np.ndarray,
                   salt: bytes = b"") -> list[bytes]:
    """One digest per row of ``rows``: BLAKE2b, keyed with ``salt``, of ``heads[row]``'s bytes followed by the first
    ``lengths[row]`` entries of ``history[row]`` (a row's fixed fields, then its observed prefix)."""
    heads_bytes, history = np.ascontiguousarray(heads).tobytes(), np.ascontiguousarray(history)
    losses = memoryview(history).cast("B")
    head_size, item = len(heads_bytes) // max(len(heads), 1), history.itemsize
    row_size = history.shape[1] * item
    digests = []
    for row, length in zip(rows.tolist(), np.asarray(lengths)[rows].tolist()):
        digest = hashlib.blake2b(heads_bytes[row * head_size:(row + 1) * head_size], digest_size=DIGEST_BYTES, key=salt)
        digest.update(losses[row * row_size:row * row_size + length * item])
        digests.append(digest.digest())
    return digests


def distinct_keys(keys: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct digest of an (n, 2) uint64 array, in order."""
    return np.sort(np.unique(keys, axis=0, return_index=True)[1])


def as_keys(digests: Sequence[bytes]) -> np.ndarray:
    """(n, 2) uint64 view of n digests of :data:`DIGEST_BYTES` bytes each."""
    joined = b"".join(digests)
    if len(joined) != DIGEST_BYTES * len(digests):
        raise ValueError(f"every digest must be {DIGEST_BYTES} bytes")
    return np.frombuffer(joined, dtype=np.uint64).reshape(-1, 2).copy()


class DigestRows:
    """Fixed-width rows of numbers keyed by digests, at most ``capacity`` of them, in two generations.

    New rows go to the young generation.  When it is full, the old generation is forgotten and the young one
    becomes old; a row found in the old generation is copied into the young one, so the rows still in use
    survive and a full store forgets only what has not been asked for lately.  Each generation is a
    :class:`DigestTable` and one array allocated whole (the operating system backs its pages only as rows are
    written).
    """

    def __init__(self, capacity: int, width: int, dtype: np.dtype | type = np.float64):
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity}")
        self.width, self.dtype = width, np.dtype(dtype)
        half = capacity // 2
        self._young, self._old = (_Generation(half, width, self.dtype) for _ in range(2))

    def __len__(self) -> int:
        return len(self._young.table) + len(self._old.table)

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the ``keys`` held, their rows) for digests given as an (n, 2) uint64 array."""
        slots = self._young.table.lookup_keys(keys)
        values = np.empty((len(keys), self.width), dtype=self.dtype)
        young = slots >= 0
        values[young] = self._young.values[slots[young]]
        elsewhere = np.flatnonzero(~young)
        if elsewhere.size and len(self._old.table):
            old = self._old.table.lookup_keys(keys[elsewhere])
            found = elsewhere[old >= 0]
            values[found] = self._old.values[old[old >= 0]]
            young[found] = True
            self.put(keys[found], values[found])
        held = np.flatnonzero(young)
        return held, values[held]

    def put(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Keep ``values`` (n, width) under ``keys`` (an (n, 2) uint64 array; a digest given twice, or one the
        young generation holds, keeps its first value)."""
        first = distinct_keys(keys)
        keys, values = keys[first], values[first]
        new = self._young.table.lookup_keys(keys) < 0
        keys, values = keys[new], values[new]
        if not len(keys):
            return
        if len(self._young.table) + len(keys) > self._young.table.capacity:
            self._young, self._old = self._old, self._young
            self._young.table.clear()
            keys, values = keys[-self._young.table.capacity:], values[-self._young.table.capacity:]
        self._young.values[self._young.table.insert_keys(keys)] = values


class _Generation:
    """One generation of :class:`DigestRows`: its table and its rows."""

    def __init__(self, capacity: int, width: int, dtype: np.dtype):
        self.table = DigestTable(capacity)
        self.values = np.empty((capacity, width), dtype=dtype)
