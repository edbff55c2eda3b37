"""A small persistent store of finished evaluation results, keyed by content hashes (see ``fingerprint``).

SQLite (standard library) gives atomic commits: an interrupted run keeps every result committed before the
interruption and never leaves a torn entry, so the next run resumes where it stopped.  Only the main process
writes; workers return results to it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


class ResultCache:
    """``key → JSON value`` on disk; ``None`` path keeps everything in memory (no reuse across runs)."""

    def __init__(self, path: Path | None):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(":memory:" if path is None else str(path))
        self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """The cached values of those ``keys`` that are present."""
        found: dict[str, Any] = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            query = f"SELECT key, value FROM results WHERE key IN ({','.join('?' * len(chunk))})"
            found.update((key, json.loads(value)) for key, value in self._db.execute(query, chunk))
        return found

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Store values and commit at once (each finished unit of work is durable on its own)."""
        self._db.executemany("INSERT OR REPLACE INTO results (key, value) VALUES (?, ?)",
                             [(key, json.dumps(value)) for key, value in items.items()])
        self._db.commit()

    def close(self) -> None:
        self._db.close()
