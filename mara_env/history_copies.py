"""Copies of the vector env's loss-history buffer that recycle the copies nobody holds any more.

With ``copy=True`` every observation carries a ``history`` array that no later step changes. Copying the whole
(N, K, H_max) buffer on every step is a large part of a step's cost (``docs/research/performance.md``). Between two
observations, though, a step changes few entries: one loss per served task, and the rows of the tasks that
leave or of the episodes that restart. So the copy handed out two observations ago, if nothing references it
any more, is brought up to date by rewriting only the entries changed since, and handed out again.

"Nothing references it" is CPython's reference count: the caller's variable, the observation dict, a NumPy view
or a torch tensor over the array all count, so a copy someone can still read is never touched. The copy handed
out last is never recycled either (a caller usually still holds it while it asks for the next step).
"""

from __future__ import annotations

import sys
from collections import deque

import numpy as np

_ONLY_OURS = 2  # sys.getrefcount of an array held by nothing but the deque (the call's argument is the other)
# Reference counts say who holds an array on CPython with the GIL; elsewhere (PyPy, free-threaded builds) every
# copy is a full one.
COUNTS_REFERENCES = hasattr(sys, "getrefcount") and getattr(sys, "_is_gil_enabled", lambda: True)()


class HistoryCopies:
    """Hands out copies of ``history`` (updated in place by its owner, who reports every change)."""

    def __init__(self, history: np.ndarray):
        self.history = history
        self._entries = history.reshape(-1)
        self._rows = history.reshape(-1, history.shape[-1])
        self._handed: deque[np.ndarray] = deque(maxlen=2)  # the last two copies handed out, oldest first
        # What changed between consecutive hand-outs (the last two intervals), and since the last one.
        self._intervals: deque[tuple[list[np.ndarray], list[np.ndarray]]] = deque(maxlen=2)
        self._changed_entries: list[np.ndarray] = []
        self._changed_rows: list[np.ndarray] = []

    def wrote(self, entries: np.ndarray) -> None:
        """The owner set these flat entries of ``history``."""
        if self._handed:  # only copies already handed out need to know (before the first, nothing is kept)
            self._changed_entries.append(entries)

    def rewrote_rows(self, rows: np.ndarray) -> None:
        """The owner set whole rows (flat indices into the (N·K, H_max) view) of ``history``."""
        if self._handed:
            self._changed_rows.append(rows)

    def copy(self) -> np.ndarray:
        """A copy of ``history`` as it is now, which later changes do not reach."""
        self._intervals.append((self._changed_entries, self._changed_rows))
        self._changed_entries, self._changed_rows = [], []
        if COUNTS_REFERENCES and len(self._handed) == 2 and sys.getrefcount(self._handed[0]) == _ONLY_OURS:
            fresh = self._handed.popleft()  # as ``history`` was two hand-outs ago; the intervals say what changed
            entries, rows = fresh.reshape(-1), fresh.reshape(self._rows.shape)
            for changed_entries, changed_rows in self._intervals:
                for index in changed_entries:
                    entries[index] = self._entries[index]
                for index in changed_rows:
                    rows[index] = self._rows[index]
        else:
            fresh = self.history.copy()
        self._handed.append(fresh)
        return fresh
