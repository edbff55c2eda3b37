"""Adding curves to a bank directory, one at a time and atomically, so that generation can resume anywhere."""

from __future__ import annotations

import dataclasses
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mara_common.atomic import atomic_write_json, atomic_write_npz
from curves.bank_format import (FORMAT, MANIFEST, PENDING, SPLITS, VERSION, BankError, CurveRecord, FamilySpec,
                                family_body, parse_record, read_manifest, read_npz, validate_curve)

LOCK = ".lock"


class BankWriter:
    """Adds curves to a bank directory one at a time, atomically, so generation can resume anywhere.

    Adding a curve writes three files in turn: the manifest with the curve listed under ``pending``, the
    family's NPZ with the new array, then the manifest with the curve's record (and no longer pending).  A
    crash between them leaves at most an array that the manifest names as pending, which :meth:`reconcile`
    (called on open) removes, and the generator regenerates.  The writer deletes nothing else: an array the
    manifest neither lists nor names as pending, a missing manifest beside curve arrays, or a file it cannot
    read is refused with a :class:`BankError` naming the file, and the bank is left as it was.  Every write
    holds an exclusive lock on ``<bank>/.lock`` and starts from the files on disk, so several writers (two
    generators on one bank) add their curves without overwriting each other's.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise BankError(f"{self.root}: not a directory, so it cannot hold a curve bank")
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked():
            self.reconcile()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the bank's write lock and reload the manifest from disk (another writer may have changed it)."""
        with open(self.root / LOCK, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self.manifest = self._load_manifest()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _load_manifest(self) -> dict[str, Any]:
        """The manifest on disk; an empty one for a new bank, never for a directory that already holds curves."""
        path = self.root / MANIFEST
        if path.exists():
            manifest = read_manifest(self.root)
            if not isinstance(manifest.setdefault("families", {}), dict) or not isinstance(
                    manifest.setdefault("curves", []), list) or not isinstance(manifest.get(PENDING, []), list):
                raise BankError(f"{path}: malformed curve bank manifest (families must be an object, curves and "
                                f"{PENDING} lists)")
            return manifest
        held = {npz.name: len(read_npz(npz)) for npz in sorted(self.root.glob("*.npz"))}
        held = {name: count for name, count in held.items() if count}
        if held:
            files = ", ".join(list(held)[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise BankError(f"{path} is missing but {self.root} holds {sum(held.values())} curve arrays ({files}); "
                            f"the writer never deletes curves it cannot account for: restore the manifest (for the "
                            f"shipped bank `git checkout -- curves/bank/{MANIFEST}`) or move the .npz files aside")
        return {"format": FORMAT, "version": VERSION, "families": {}, "curves": []}

    def _records(self) -> list[CurveRecord]:
        return [parse_record(raw, str(self.root / MANIFEST)) for raw in self.manifest["curves"]]

    def reconcile(self) -> None:
        """Remove the arrays that interrupted adds left (those the manifest names as pending but does not list);
        refuse, naming the file, any other array without a record and any record without an array."""
        listed: dict[str, set[str]] = {}
        for rec in self._records():
            listed.setdefault(rec.family, set()).add(rec.key)
        pending = {(entry.get("family"), entry.get("key")) for entry in self.manifest.get(PENDING, [])
                   if isinstance(entry, dict)}
        trimmed: dict[Path, dict[str, np.ndarray]] = {}
        kept: dict[str, set[str]] = {}
        for path in sorted(self.root.glob("*.npz")):
            arrays = read_npz(path)
            unlisted = set(arrays) - listed.get(path.stem, set())
            kept[path.stem] = set(arrays) - unlisted
            unknown = sorted(key for key in unlisted if (path.stem, key) not in pending)
            if unknown:
                shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
                raise BankError(f"{path}: arrays {shown} have no record in {self.root / MANIFEST}; the writer never "
                                f"deletes curves it cannot account for: restore the manifest that lists them or "
                                f"move {path.name} aside")
            if unlisted:
                trimmed[path] = {key: value for key, value in arrays.items() if key not in unlisted}
        for family, keys in sorted(listed.items()):
            absent = sorted(keys - kept.get(family, set()))
            if absent:
                path = self.root / f"{family}.npz"
                raise BankError(f"{path}: curve {family}/{absent[0].replace('_', '/')} is listed in {MANIFEST} but "
                                f"absent from the file ({len(absent)} such curve(s)); the bank is incomplete")
        for path, arrays in trimmed.items():
            atomic_write_npz(path, arrays)
        if PENDING in self.manifest:
            del self.manifest[PENDING]
            atomic_write_json(self.root / MANIFEST, self.manifest)

    def has(self, family: str, split: str, index: int) -> bool:
        """Whether the curve is already finished (the generator skips it)."""
        return any(r.family == family and r.split == split and r.index == index for r in self._records())

    def declare_family(self, spec: FamilySpec) -> None:
        """Add or update a family's description and rules."""
        body = family_body(spec)
        with self._locked():
            self.manifest["families"][spec.name] = body
            atomic_write_json(self.root / MANIFEST, self.manifest)

    def add(self, record: CurveRecord, per_batch: np.ndarray) -> None:
        """Store one finished curve: the manifest naming it as pending, its array, then the manifest with its
        record (see the class docstring); a record with an unknown split, a bad index or a length that
        disagrees with the losses is refused before anything is written."""
        if record.split not in SPLITS:
            raise BankError(f"{self.root}: new curve of {record.family!r}: split {record.split!r} is not one of "
                            f"{SPLITS}")
        if isinstance(record.index, bool) or not isinstance(record.index, int) or record.index < 0:
            raise BankError(f"{self.root}: new curve of {record.family!r}: index must be an integer ≥ 0, "
                            f"got {record.index!r}")
        losses = np.asarray(per_batch, dtype=np.float32)
        validate_curve(losses, f"{self.root}: new curve {record.id}")
        if record.length != losses.size:
            raise BankError(f"{self.root}: new curve {record.id}: record length {record.length} != {losses.size}")
        with self._locked():
            self._add(record, losses)

    def _add(self, record: CurveRecord, losses: np.ndarray) -> None:
        if record.family not in self.manifest["families"]:
            raise BankError(f"{self.root}: declare family {record.family!r} before adding curves to it")
        path = self.root / f"{record.family}.npz"
        arrays = read_npz(path) if path.exists() else {}
        entry = {"family": record.family, "key": record.key}
        pending = [item for item in self.manifest.get(PENDING, []) if item != entry]
        self.manifest[PENDING] = pending + [entry]
        atomic_write_json(self.root / MANIFEST, self.manifest)
        arrays[record.key] = losses
        atomic_write_npz(path, arrays)
        curves = [raw for raw in self.manifest["curves"]
                  if (raw["family"], raw["split"], raw["index"]) != (record.family, record.split, record.index)]
        curves.append(dataclasses.asdict(record))
        curves.sort(key=lambda raw: (raw["family"], SPLITS.index(raw["split"]), raw["index"]))
        self.manifest["curves"] = curves
        if pending:
            self.manifest[PENDING] = pending
        else:
            del self.manifest[PENDING]
        atomic_write_json(self.root / MANIFEST, self.manifest)
