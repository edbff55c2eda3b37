"""The on-disk half of the shared predictor answers: files of (row digest, answer) pairs, one folder per
predictor identity, kept across processes and runs.

A neural predictor's answer for a row is a pure function of the row and of what decides the predictor (its
weights, sampling settings, code and this machine's kernels: :func:`~mara_agents.predictors.shared.store_identity`
names the folder after all of them), so an answer computed once can be read back by any later process.

**Layout.**  ``<root>/<identity>/<time>-<pid>-<rows>.answers``, each file written whole to a temporary name
and renamed into place, so a reader never sees a half-written file and concurrent writers never share one.  A
file holds a header (format tag, row count, value width, BLAKE2b checksum of the rest), the rows' 16-byte
digests and their float64 values.  A file whose size or checksum does not match is reported in one line on
stderr, removed, and its rows are recomputed when asked again: a damaged file never yields an answer.

**Bound.**  A folder holds at most ``capacity`` rows and :data:`MAX_FILES` files, and the root at most
:data:`MAX_FOLDERS` folders (a new checkpoint or code version makes a new one): after each write the oldest
files, then the least recently written folders, are removed until every bound holds.  Rows written twice (two processes computing the same row) cost space but
give the same answer, so a duplicate is never wrong.

**Where.**  ``$MARA_FM_STORE`` when set (``off``: nothing is read or written), else ``$XDG_CACHE_HOME/mara/
fm-answers``, else ``~/.cache/mara/fm-answers``.  Deleting the folder clears it (``python -m
mara_agents.predictors.answer_files --clear``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mara_agents.predictors.digest_table import DIGEST_BYTES

ENV_VAR = "MARA_FM_STORE"
OFF = "off"
SUFFIX = ".answers"
MAGIC = b"MARAFMA1"
HEADER = struct.Struct("<8sQQ32s")  # tag, rows, values per row, BLAKE2b-256 of the payload
MAX_FILES = 256
MAX_FOLDERS = 8
STALE_TEMP_SECONDS = 3600  # a temporary file this old belongs to a writer that died


def store_root() -> Path | None:
    """The folder of every predictor's answer files, or None when ``$MARA_FM_STORE`` is ``off``."""
    chosen = os.environ.get(ENV_VAR, "")
    if chosen.strip().lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "mara" / "fm-answers"


def warn(message: str) -> None:
    """One line on stderr: the store is a cache, so its problems never stop the caller."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


def file_rows(path: Path) -> int:
    """The row count an answer file's name gives (0 for a name not in the store's form)."""
    try:
        return int(path.stem.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


class AnswerFiles:
    """The answer files of one predictor identity in ``folder``, at most ``capacity`` rows in all."""

    def __init__(self, folder: Path, capacity: int):
        self.folder = folder
        self.capacity = capacity

    def files(self) -> list[Path]:
        """The folder's answer files, oldest first."""
        try:
            return sorted(self.folder.glob(f"*{SUFFIX}"))
        except OSError:
            return []

    def load(self, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(digests (n, 2) uint64, values (n, width) float64) of the newest files holding at most ``limit``
        rows; a damaged file is reported, removed and skipped, a file another process removed is skipped."""
        digests, values, total = [], [], 0
        for path in reversed(self.files()):
            if total + file_rows(path) > limit:
                break
            read = self._read(path)
            if read is None:
                continue
            if values and read[1].shape[1] != values[0].shape[1]:
                self._discard(path, "its rows have another width than the folder's newer files")
                continue
            digests.append(read[0])
            values.append(read[1])
            total += len(read[0])
        if not digests:
            return np.zeros((0, 2), dtype=np.uint64), np.zeros((0, 0))
        return np.concatenate(digests), np.concatenate(values)

    def write(self, digests: np.ndarray, values: np.ndarray) -> None:
        """Add one file of ``digests`` (n, 2) uint64 and ``values`` (n, width) float64, then trim the folder to
        its bounds; a folder that cannot be written is reported and the rows stay in memory only."""
        payload = np.ascontiguousarray(digests, dtype=np.uint64).tobytes() + \
            np.ascontiguousarray(values, dtype=np.float64).tobytes()
        header = HEADER.pack(MAGIC, len(digests), values.shape[1], hashlib.blake2b(payload, digest_size=32).digest())
        name = f"{time.time_ns():020d}-{os.getpid()}-{len(digests)}{SUFFIX}"
        temporary = self.folder / f".{name}.tmp"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as out:
                out.write(header + payload)
            os.replace(temporary, self.folder / name)
        except OSError as exc:
            warn(f"{self.folder}: cannot keep predictor answers there ({exc}); set {ENV_VAR} to another "
                 f"folder or to {OFF}")
            temporary.unlink(missing_ok=True)
            return
        self.trim()
        trim_folders(self.folder.parent, keep=self.folder)

    def trim(self) -> None:
        """Remove the oldest files until at most ``capacity`` rows and :data:`MAX_FILES` files are left, and
        temporary files a dead writer left behind."""
        files = self.files()
        total, count = sum(file_rows(path) for path in files), len(files)
        for path in files:
            if total <= self.capacity and count <= MAX_FILES:
                break
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
            total, count = total - file_rows(path), count - 1
        now = time.time()
        for temporary in self.folder.glob(f".*{SUFFIX}.tmp"):
            try:
                if now - temporary.stat().st_mtime > STALE_TEMP_SECONDS:
                    temporary.unlink()
            except OSError:
                pass

    def _read(self, path: Path) -> tuple[np.ndarray, np.ndarray] | None:
        """One file's digests and values, or None when it is gone or damaged (then reported and removed)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            warn(f"{path}: cannot read predictor answers ({exc}); they will be recomputed")
            return None
        if len(data) < HEADER.size:
            return self._discard(path, "truncated")
        magic, rows, width, checksum = HEADER.unpack_from(data)
        payload = data[HEADER.size:]
        if magic != MAGIC or len(payload) != rows * (2 * 8 + width * 8):
            return self._discard(path, "truncated" if magic == MAGIC else "not a predictor answer file")
        if hashlib.blake2b(payload, digest_size=32).digest() != checksum:
            return self._discard(path, "checksum mismatch")
        digests = np.frombuffer(payload, dtype=np.uint64, count=2 * rows).reshape(rows, 2)
        values = np.frombuffer(payload, dtype=np.float64, offset=16 * rows).reshape(rows, width)
        return digests, values

    def _discard(self, path: Path, why: str) -> None:
        warn(f"{path}: damaged predictor answer file ({why}); removed, its answers will be recomputed")
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def holds_only_answers(folder: Path) -> bool:
    """Whether every entry of ``folder`` is an answer file (or one being written): only such folders are
    ever trimmed away, so a store pointed at a folder shared with other data never deletes that data."""
    return all(entry.is_file() and (entry.name.endswith(SUFFIX) or entry.name.endswith(".tmp"))
               for entry in folder.iterdir())


def trim_folders(root: Path, keep: Path) -> None:
    """Remove the least recently written predictor folders of ``root`` beyond :data:`MAX_FOLDERS` (never
    ``keep``, the one just written, nor a folder holding anything but answer files)."""
    try:
        folders = sorted((path for path in root.iterdir()
                          if path.is_dir() and path != keep and holds_only_answers(path)),
                         key=lambda path: path.stat().st_mtime)
    except OSError:
        return
    for folder in folders[:max(len(folders) + 1 - MAX_FOLDERS, 0)]:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mara_agents.predictors.answer_files [--clear]``: where the store is, what it holds."""
    parser = argparse.ArgumentParser(prog="python -m mara_agents.predictors.answer_files",
                                     description="Where FM's stored answers live, how many, and how to clear them.")
    parser.add_argument("--clear", action="store_true", help="delete every stored answer")
    args = parser.parse_args(argv)
    root = store_root()
    if root is None:
        print(f"the answer store is off (${ENV_VAR}={OFF})")
        return 0
    if args.clear:
        shutil.rmtree(root, ignore_errors=True)
        print(f"cleared {root}")
        return 0
    folders = sorted(path for path in root.glob("*") if path.is_dir()) if root.is_dir() else []
    print(f"{root} ({ENV_VAR} overrides it; --clear deletes it)")
    for folder in folders:
        files = AnswerFiles(folder, 0).files()
        size = sum(path.stat().st_size for path in files if path.exists())
        print(f"  {folder.name}: {sum(map(file_rows, files)):,} rows in {len(files)} files, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
