"""A small persistent store of finished evaluation results, keyed by content hashes (see ``fingerprint``).

SQLite (standard library) gives atomic commits: an interrupted run keeps every result committed before the
interruption and never leaves a torn entry, so the next run resumes where it stopped.  Only the main process
writes; workers return results to it.  Several evaluations may share one cache file: SQLite serialises their
commits, and a run that finds the file locked for longer than a moment says so and waits up to
:data:`LOCK_WAIT_S` before it gives up.

Every failure of the file — a directory where the file should be, a file that is not a SQLite database, a
truncated one, a foreign table, a value that is not JSON, a lock that outlasts the wait — is a
:class:`CacheError` whose one line names the file and what to do; nothing already committed is touched.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
LOCK_WAIT_S = 120.0  # how long a run waits for another process to release the cache before giving up
BUSY_S = 2.0  # a lock shorter than this (another run committing) is waited out silently
COLUMNS = ["key", "value"]


class CacheError(RuntimeError):
    """The result cache cannot be used; the message names the file and what to do about it."""


def _warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class ResultCache:
    """``key → JSON value`` on disk; ``None`` path keeps everything in memory (no reuse across runs).

    ``lock_wait_s`` bounds the wait for a cache another process holds locked; ``warn`` is told once that the
    run is waiting.
    """

    def __init__(self, path: Path | None, lock_wait_s: float = LOCK_WAIT_S, warn: Callable[[str], None] = _warn):
        self.path, self._lock_wait_s, self._warn = path, lock_wait_s, warn
        if path is not None:
            if path.is_dir():
                raise CacheError(f"{path}: the result cache is a directory; pass --cache with a file name")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CacheError(f"{path}: cannot create the result cache's directory ({exc.strerror}); "
                                 "pass --cache with a writable place") from exc
            if path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
                raise CacheError(f"{path}: the result cache (or its folder) is read-only; make it writable, or pass "
                                 "--cache with another file (its finished episodes are then recomputed)")
        self._db = self._guarded(lambda: sqlite3.connect(":memory:" if path is None else str(path),
                                                      timeout=min(BUSY_S, lock_wait_s)))
        self._guarded(self._open_table)

    def _open_table(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()
        columns = [row[1] for row in self._db.execute("PRAGMA table_info(results)")]
        if columns != COLUMNS:
            raise CacheError(f"{self.path}: not an evaluation result cache (its 'results' table has columns "
                             f"{columns}); {self._advice()}")

    def _advice(self) -> str:
        return f"delete {self.path} (finished episodes are then recomputed) or pass --cache with another file"

    def _guarded(self, operation: Callable[[], T]) -> T:
        """Run a database operation, waiting out a lock held by another process (with one message) up to
        ``lock_wait_s``; any other SQLite failure is a :class:`CacheError` naming the file."""
        deadline, told = time.monotonic() + self._lock_wait_s, False
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise CacheError(f"{self.path}: the result cache cannot be used ({exc}); {self._advice()}") \
                        from exc
                if not told:
                    self._warn(f"waiting for {self.path}: another process holds the result cache locked "
                               f"(giving up after {self._lock_wait_s:g} s)")
                    told = True
                if time.monotonic() >= deadline:
                    raise CacheError(f"{self.path}: the result cache is still locked by another process after "
                                     f"{self._lock_wait_s:g} s; let that run finish, or pass --cache with another "
                                     "file (nothing cached so far is lost)") from exc
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"{self.path}: the result cache is damaged or not a SQLite database ({exc}); "
                                 f"{self._advice()}") from exc

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """The cached values of those ``keys`` that are present."""
        found: dict[str, Any] = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            query = f"SELECT key, value FROM results WHERE key IN ({','.join('?' * len(chunk))})"
            for key, value in self._guarded(lambda: self._db.execute(query, chunk).fetchall()):
                found[key] = self._decode(key, value)
        return found

    def _decode(self, key: str, value: Any) -> Any:
        try:
            return json.loads(value)
        except (TypeError, ValueError) as exc:
            raise CacheError(f"{self.path}: entry {key[:12]}… holds no readable result ({exc}); "
                             f"{self._advice()}") from exc

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Store values and commit at once (each finished unit of work is durable on its own)."""
        rows = [(key, json.dumps(value)) for key, value in items.items()]

        def write() -> None:
            try:
                self._db.executemany("INSERT OR REPLACE INTO results (key, value) VALUES (?, ?)", rows)
                self._db.commit()
            except sqlite3.Error:
                self._db.rollback()
                raise
        self._guarded(write)

    def close(self) -> None:
        self._db.close()
