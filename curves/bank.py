"""The curve bank: a versioned directory of real per-batch training-loss curves.

Layout of a bank directory::

    manifest.json      format, version, family rules, one record per curve (and, only while a writer adds
                       one or after it was interrupted, ``pending``: the curves whose arrays are being written)
    <family>.npz       one float32 array of per-batch losses per curve, keyed "<split>_<index:03d>"

Only per-batch losses are stored; the cumulative-average curve L(s) (mean of the first s per-batch losses) is derived on load in float64, so it is exact up to float32 storage of the raw losses.

Every write is atomic (temporary file + ``os.replace``) so an interrupted generator never leaves a torn file,
and the manifest is always written after the arrays it describes.  This module is pure NumPy: the simulator
imports it and must never pull in torch.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "mara-curve-bank"
VERSION = 1
SPLITS = ("train", "val", "test")
ROLES = ("id", "ood")
MANIFEST = "manifest.json"
PENDING = "pending"  # manifest key: curves whose array is being written
LOCK = ".lock"
DEFAULT_BANK = Path(__file__).resolve().parent / "bank"


class BankError(ValueError):
    """A bank file is missing, corrupt or inconsistent; the message names the file and the curve."""


@dataclass(frozen=True)
class CurveRecord:
    """The recipe that produced one curve, enough to regenerate it with ``curves.generate``."""

    family: str
    split: str
    index: int
    seed: int
    data_seed: int
    batch_size: int
    lr: float
    preset: str
    source: str
    length: int
    generator_commit: str = "unknown"

    @property
    def id(self) -> str:
        """Stable identifier ``family/split/index`` used by workloads to reference a curve."""
        return f"{self.family}/{self.split}/{self.index:03d}"

    @property
    def key(self) -> str:
        """Array name inside the family's NPZ file."""
        return f"{self.split}_{self.index:03d}"


@dataclass(frozen=True)
class FamilySpec:
    """A task family and its calibrated task rules.

    ``eps`` is ``{"kind": "scaled", "base": b, "low": 0.9, "high": 1.1}`` (ε = b·U[low, high]) or
    ``{"kind": "loguniform", "low": a, "high": b}`` (the paper's per-family rules, Table 6); ``crossing``
    is ``{"low": a, "high": b, "early_batches": 4, "early_margin": m}``, the parameters of the default
    per-task rule (:class:`curves.targets.CrossingRule`); ``budget`` is ``{"kind": "interval", "low": a,
    "high": b}`` (integer, inclusive) or ``{"kind": "set", "values": [...]}``.  All are ``None`` until the
    family is calibrated, and a workload cannot be drawn from an uncalibrated family.
    """

    name: str
    role: str
    modality: str
    dataset: str
    model: str
    eps: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    notes: str = ""
    crossing: dict[str, Any] | None = None

    @property
    def max_budget(self) -> int:
        """The largest available time this family's rule can draw (curves are generated to twice this)."""
        if self.budget is None:
            raise BankError(f"family {self.name!r} has no calibrated budget rule")
        if self.budget["kind"] == "interval":
            return int(self.budget["high"])
        return int(max(self.budget["values"]))


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


def _read_manifest(root: Path) -> dict[str, Any]:
    return read_versioned_json(root / MANIFEST, FORMAT, VERSION, BankError, "curve bank manifest",
                               " (generate one with `python -m curves.generate`)")


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise BankError(f"{path}: curve array file is missing")
    name = None
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {}
            for name in archive.files:
                arrays[name] = archive[name]
            return arrays
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        member = "" if name is None else f" (array {name!r})"
        raise BankError(f"{path}: corrupt curve array file{member}: {exc}") from exc


def _read_family_npz(path: Path, members: list[CurveRecord]) -> dict[str, np.ndarray]:
    """Read a family's NPZ; on corruption, name the curve whose array failed (or the curves the file holds)."""
    try:
        return _read_npz(path)
    except BankError as exc:
        failed = [rec.id for rec in members if f"(array {rec.key!r})" in str(exc)]
        named = failed or [rec.id for rec in members]
        shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        raise BankError(f"{exc}; curve{'s' if len(named) > 1 else ''} affected: {shown}") from exc


def _parse_record(raw: Mapping[str, Any], where: str) -> CurveRecord:
    names = {f.name for f in dataclasses.fields(CurveRecord)}
    missing = names - set(raw) - {"generator_commit"}
    if missing:
        raise BankError(f"{where}: curve record lacks fields {sorted(missing)}")
    record = CurveRecord(**{k: raw[k] for k in names if k in raw})
    if record.split not in SPLITS:
        raise BankError(f"{where}: curve {record.id}: split {record.split!r} is not one of {SPLITS}")
    return record


def _parse_family(name: str, raw: Mapping[str, Any], where: str) -> FamilySpec:
    try:
        spec = FamilySpec(name=name, **raw)
    except TypeError as exc:
        raise BankError(f"{where}: family {name!r}: {exc}") from exc
    if spec.role not in ROLES:
        raise BankError(f"{where}: family {name!r}: role {spec.role!r} is not one of {ROLES}")
    return spec


def cumulative_average(per_batch: np.ndarray) -> np.ndarray:
    """L(s) = mean of the first s per-batch losses, s = 1..n, in float64."""
    losses = np.asarray(per_batch, dtype=np.float64)
    return np.cumsum(losses) / np.arange(1, losses.size + 1)


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


def validate_curve(per_batch: np.ndarray, where: str) -> None:
    """Reject curves that no simulator could use: wrong shape, non-finite or negative losses."""
    if per_batch.ndim != 1 or per_batch.size == 0:
        raise BankError(f"{where}: expected a non-empty 1-D loss array, got shape {per_batch.shape}")
    if not np.all(np.isfinite(per_batch)):
        bad = int(np.flatnonzero(~np.isfinite(per_batch))[0])
        raise BankError(f"{where}: non-finite loss at batch {bad + 1}")
    if np.any(per_batch < 0):
        raise BankError(f"{where}: negative loss at batch {int(np.flatnonzero(per_batch < 0)[0]) + 1}")
    if not np.all(cumulative_average(per_batch) > 0):
        raise BankError(f"{where}: the cumulative-average loss must be positive")


def load_bank(root: str | os.PathLike[str] = DEFAULT_BANK) -> CurveBank:
    """Load and validate a bank; any problem raises :class:`BankError` naming the file and the curve."""
    root = Path(root)
    manifest = _read_manifest(root)
    where = str(root / MANIFEST)
    families = {name: _parse_family(name, raw, where) for name, raw in manifest.get("families", {}).items()}
    records: dict[str, CurveRecord] = {}
    for raw in manifest.get("curves", []):
        record = _parse_record(raw, where)
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
        arrays = _read_family_npz(path, members)
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
            manifest = _read_manifest(self.root)
            if not isinstance(manifest.setdefault("families", {}), dict) or not isinstance(
                    manifest.setdefault("curves", []), list) or not isinstance(manifest.get(PENDING, []), list):
                raise BankError(f"{path}: malformed curve bank manifest (families must be an object, curves and "
                                f"{PENDING} lists)")
            return manifest
        held = {npz.name: len(_read_npz(npz)) for npz in sorted(self.root.glob("*.npz"))}
        held = {name: count for name, count in held.items() if count}
        if held:
            files = ", ".join(list(held)[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise BankError(f"{path} is missing but {self.root} holds {sum(held.values())} curve arrays ({files}); "
                            f"the writer never deletes curves it cannot account for: restore the manifest (for the "
                            f"shipped bank `git checkout -- curves/bank/{MANIFEST}`) or move the .npz files aside")
        return {"format": FORMAT, "version": VERSION, "families": {}, "curves": []}

    def _records(self) -> list[CurveRecord]:
        return [_parse_record(raw, str(self.root / MANIFEST)) for raw in self.manifest["curves"]]

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
            arrays = _read_npz(path)
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
        body = dataclasses.asdict(spec)
        del body["name"]
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
        arrays = _read_npz(path) if path.exists() else {}
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
