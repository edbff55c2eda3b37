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


def as_keys(digests: Sequence[bytes]) -> np.ndarray:
    """(n, 2) uint64 view of n digests of :data:`DIGEST_BYTES` bytes each."""
    joined = b"".join(digests)
    if len(joined) != DIGEST_BYTES * len(digests):
        raise ValueError(f"every digest must be {DIGEST_BYTES} bytes")
    return np.frombuffer(joined, dtype=np.uint64).reshape(-1, 2).copy()
