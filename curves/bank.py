"""The curve bank: a versioned directory of real per-batch training-loss curves.

Layout of a bank directory::

    manifest.json      format, version, family rules, one record per curve (and, only while a writer adds
                       one or after it was interrupted, ``pending``: the curves whose arrays are being written)
    <family>.npz       one float32 array of per-batch losses per curve, keyed "<split>_<index:03d>"

Only per-batch losses are stored; the cumulative-average curve L(s) (mean of the first s per-batch losses)
is derived on load in float64, so it is exact up to float32 storage of the raw losses.

Every write is atomic (temporary file + ``os.replace``) so an interrupted generator never leaves a torn file,
and the manifest is always written after the arrays it describes.  This module is pure NumPy: the simulator
imports it and must never pull in torch.

Here: the loaded bank (:class:`CurveBank`, :func:`load_bank`).  The format and its checks are in
:mod:`curves.bank_format`, the writer in :mod:`curves.bank_writer` and atomic writes in :mod:`mara_common.atomic`;
every public name of those is importable from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from curves.bank_format import (FORMAT, MANIFEST, PENDING, ROLES, SPLITS, VERSION, BankError, CurveRecord,
                                FamilySpec, cumulative_average, parse_family, parse_record, read_family_npz,
                                read_manifest, validate_curve)
from curves.bank_writer import LOCK, BankWriter

# The bank's public names, wherever they are defined: ``from curves.bank import ...`` is the one import users need.
__all__ = ["BankError", "BankWriter", "CurveBank", "CurveRecord", "DEFAULT_BANK", "FORMAT", "FamilySpec", "LOCK",
           "MANIFEST", "PENDING", "ROLES", "SPLITS", "VERSION", "cumulative_average", "load_bank", "validate_curve"]

DEFAULT_BANK = Path(__file__).resolve().parent / "bank"


@dataclass
class CurveBank:
    """A loaded, validated curve bank.  Use :func:`load_bank` to create one."""

    root: Path
    families: dict[str, FamilySpec]
    records: dict[str, CurveRecord]
    per_batch: dict[str, np.ndarray] = field(repr=False)
    _ids: dict[tuple[str | None, frozenset[str] | None], tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _cumavg: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    def ids(self, family: str | None = None, splits: Iterable[str] | None = None) -> list[str]:
        """Curve ids in a stable order, optionally filtered by family and split.

        Each selection is computed once per bank (a loaded bank's records do not change): episode sampling asks
        for the pool of every arriving task.  Callers get their own list.
        """
        wanted = None if splits is None else frozenset(splits)
        key = (family, wanted)
        if key not in self._ids:
            self._ids[key] = tuple(sorted(
                cid for cid, rec in self.records.items()
                if (family is None or rec.family == family) and (wanted is None or rec.split in wanted)))
        return list(self._ids[key])

    def cumavg(self, curve_id: str) -> np.ndarray:
        """The cumulative-average loss curve L(1..n) of one curve (float64, read-only).

        Computed once per curve: episode sampling asks for it for every arriving task.
        """
        curve = self._cumavg.get(curve_id)
        if curve is None:
            curve = cumulative_average(self.per_batch[curve_id])
            curve.flags.writeable = False
            self._cumavg[curve_id] = curve
        return curve

    @cached_property
    def max_length(self) -> int:
        """Length of the longest curve: the simulator's history width H_max."""
        return max((rec.length for rec in self.records.values()), default=0)

    def family(self, name: str) -> FamilySpec:
        """The family spec, with an error that lists the known families."""
        if name not in self.families:
            raise BankError(f"{self.root}: unknown family {name!r}; the bank holds {sorted(self.families)}")
        return self.families[name]


def load_bank(root: str | os.PathLike[str] = DEFAULT_BANK) -> CurveBank:
    """Load and validate a bank; any problem raises :class:`BankError` naming the file and the curve."""
    root = Path(root)
    manifest = read_manifest(root)
    where = str(root / MANIFEST)
    families = {name: parse_family(name, raw, where) for name, raw in manifest.get("families", {}).items()}
    records: dict[str, CurveRecord] = {}
    for raw in manifest.get("curves", []):
        record = parse_record(raw, where)
        if record.family not in families:
            raise BankError(f"{where}: curve {record.id} belongs to undeclared family {record.family!r}")
        if record.id in records:
            raise BankError(f"{where}: curve {record.id} is listed twice")
        records[record.id] = record
    per_batch: dict[str, np.ndarray] = {}
    for name in families:
        members = [rec for rec in records.values() if rec.family == name]
        if not members:
            continue
        path = root / f"{name}.npz"
        arrays = read_family_npz(path, members)
        expected = {rec.key for rec in members}
        extra = sorted(set(arrays) - expected)
        if extra:
            raise BankError(f"{path}: arrays {extra[:5]} have no record in {MANIFEST} (manifest/array mismatch)")
        for rec in members:
            curve_where = f"{path}: curve {rec.id}"
            if rec.key not in arrays:
                raise BankError(f"{curve_where}: listed in {MANIFEST} but absent from the file")
            losses = arrays[rec.key]
            validate_curve(losses, curve_where)
            if losses.size != rec.length:
                raise BankError(f"{curve_where}: manifest says length {rec.length}, file holds {losses.size}")
            per_batch[rec.id] = losses.astype(np.float32, copy=False)
    return CurveBank(root=root, families=families, records=records, per_batch=per_batch)
