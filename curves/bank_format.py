"""The curve bank's on-disk format: its records and family rules, and reading and checking its files.

A bank directory holds ``manifest.json`` (format, version, family rules, one :class:`CurveRecord` per curve)
and one ``<family>.npz`` of per-batch losses per family; :mod:`curves.bank` describes the layout.  Everything
here is what both the loader (:func:`curves.bank.load_bank`) and the writer
(:class:`curves.bank_writer.BankWriter`) need, so that they read the same format the same way.  Pure NumPy:
the simulator imports it.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mara_common import checks
from mara_common.atomic import read_versioned_json
from mara_common.cli import InputError

FORMAT = "mara-curve-bank"
VERSION = 1
SPLITS = ("train", "val", "test")
ROLES = ("id", "ood")
MANIFEST = "manifest.json"
PENDING = "pending"  # manifest key: curves whose array is being written


class BankError(InputError):
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
    family is calibrated, and a workload cannot be drawn from an uncalibrated family.  ``calibrated_on``
    ``{split: n}`` says the rules were fitted on the first ``n`` curves of each named split only (a bank grown
    after calibration keeps its tasks); ``None`` means on every curve.
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
    calibrated_on: dict[str, int] | None = None

    @property
    def max_budget(self) -> int:
        """The largest available time this family's rule can draw (curves are generated to twice this)."""
        if self.budget is None:
            raise BankError(f"family {self.name!r} has no calibrated budget rule")
        if self.budget["kind"] == "interval":
            return int(self.budget["high"])
        return int(max(self.budget["values"]))


CALIBRATED_FIELDS = ("eps", "budget", "crossing", "calibrated_on")
"""The :class:`FamilySpec` fields :mod:`curves.calibrate` sets (a generator re-declaring a family keeps them)."""


def family_body(spec: FamilySpec) -> dict[str, Any]:
    """A family's manifest entry: every field but the name, ``calibrated_on`` only when it limits the curves."""
    body = dataclasses.asdict(spec)
    del body["name"]
    if body["calibrated_on"] is None:
        del body["calibrated_on"]
    return body


def read_manifest(root: Path) -> dict[str, Any]:
    return read_versioned_json(root / MANIFEST, FORMAT, VERSION, BankError, "curve bank manifest",
                               " (generate one with `python -m curves.generate`)")


def read_npz(path: Path) -> dict[str, np.ndarray]:
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


def read_family_npz(path: Path, members: list[CurveRecord]) -> dict[str, np.ndarray]:
    """Read a family's NPZ; on corruption, name the curve whose array failed (or the curves the file holds)."""
    try:
        return read_npz(path)
    except BankError as exc:
        failed = [rec.id for rec in members if f"(array {rec.key!r})" in str(exc)]
        named = failed or [rec.id for rec in members]
        shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        raise BankError(f"{exc}; curve{'s' if len(named) > 1 else ''} affected: {shown}") from exc


def parse_record(raw: Mapping[str, Any], where: str) -> CurveRecord:
    names = {f.name for f in dataclasses.fields(CurveRecord)}
    missing = names - set(raw) - {"generator_commit"}
    if missing:
        raise BankError(f"{where}: curve record lacks fields {sorted(missing)}")
    record = CurveRecord(**{k: raw[k] for k in names if k in raw})
    if record.split not in SPLITS:
        raise BankError(f"{where}: curve {record.id}: split {record.split!r} is not one of {SPLITS}")
    return record


def parse_family(name: str, raw: Mapping[str, Any], where: str) -> FamilySpec:
    try:
        spec = FamilySpec(name=name, **raw)
    except TypeError as exc:
        raise BankError(f"{where}: family {name!r}: {exc}") from exc
    if spec.role not in ROLES:
        raise BankError(f"{where}: family {name!r}: role {spec.role!r} is not one of {ROLES}")
    if spec.budget is not None:
        try:
            check_budget_rule(spec.budget)
        except (TypeError, ValueError) as exc:
            raise BankError(f"{where}: family {name!r}: {exc}") from exc
    return spec


def check_budget_rule(rule: Any) -> None:
    """Refuse a budget rule no task could be drawn from (``ValueError``/``TypeError`` naming the field): an
    interval needs integers 1 ≤ low ≤ high, a set a non-empty list of positive integers."""
    kind = rule.get("kind") if isinstance(rule, Mapping) else None
    if kind == "interval":
        low = checks.integer("budget low", rule.get("low"), low=1)
        high = checks.integer("budget high", rule.get("high"), low=1)
        if low > high:
            raise ValueError(f"budget interval has low {low} > high {high}")
    elif kind == "set":
        values = rule.get("values")
        if not isinstance(values, list) or not values:
            raise ValueError(f"budget set needs a non-empty list of values, got {values!r}")
        for value in values:
            checks.integer("budget value", value, low=1)
    else:
        raise ValueError(f"budget rule must be {{\"kind\": \"interval\", ...}} or {{\"kind\": \"set\", ...}}, "
                         f"got {rule!r}")


def cumulative_average(per_batch: np.ndarray) -> np.ndarray:
    """L(s) = mean of the first s per-batch losses, s = 1..n, in float64."""
    losses = np.asarray(per_batch, dtype=np.float64)
    return np.cumsum(losses) / np.arange(1, losses.size + 1)


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
