"""Atomic file writes and versioned JSON reads, shared by every file the project writes or reads back.

A write goes to a temporary file beside its target, is flushed to disk and renamed over the target, so a
reader (or a run interrupted mid-write) never sees half a file.  A versioned JSON file declares its
``format`` and ``version``, and a file of another kind is refused with one line naming it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _atomic_write_bytes(path: Path, write: Any) -> None:
    """Write through ``write(fileobj)`` to a temporary file beside ``path``, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON atomically, sorted and indented so that diffs of the manifest stay readable."""
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically (tables, README sections): a reader never sees half a file."""
    _atomic_write_bytes(Path(path), lambda handle: handle.write(text.encode()))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write raw bytes atomically (a checkpoint copied unchanged into place)."""
    _atomic_write_bytes(Path(path), lambda handle: handle.write(data))


def atomic_write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write a compressed NPZ atomically."""
    _atomic_write_bytes(Path(path), lambda handle: np.savez_compressed(handle, **arrays))


def read_versioned_json(path: Path, fmt: str, version: int, error: type[Exception], what: str,
                        hint: str = "") -> dict[str, Any]:
    """A JSON file that declares its ``format`` and ``version`` (bank manifests, workload files); a missing,
    unreadable or foreign file raises ``error`` naming the path (``hint`` is appended when it is missing)."""
    if not path.is_file():
        raise error(f"{path}: {what} not found{hint}")
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise error(f"{path}: unreadable {what}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != fmt or data.get("version") != version:
        found = (data.get("format"), data.get("version")) if isinstance(data, dict) else type(data).__name__
        raise error(f"{path}: not a {fmt} v{version} {what} (found {found!r})")
    return data
