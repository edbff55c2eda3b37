"""Ship a trained MAT policy into the repository: copy its weights unchanged and relabel its manifest.

A policy trained in a scratch directory (``runs/...``) records the scratch paths of its run: the bank, the FM
predictor, the policy it started from, its output file and run directory.  Shipped under
``mara_agents/checkpoints`` its manifest should read as the documented command, so each recorded path is
replaced by the shipped place, but only where the content is the same, judged by the hashes the manifest
recorded when the policy was trained:

* a bank path by the shipped bank (``curves/bank``) when the recorded bank checksum (``data.bank_sha256``)
  equals the shipped bank's;
* an FM path by the shipped FM predictor when the recorded SHA-256 (``predictor.checkpoint_sha256``) equals
  the shipped file's;
* the starting policy (``config.finetune.init_from``, ``initial_policy.checkpoint``) by the file ``--start``
  names (where that start was itself shipped) when its SHA-256 equals ``initial_policy.checkpoint_sha256``;
* ``config.out`` by the destination, ``config.run_dir`` by the destination without its suffix and
  ``checkpoint`` by the destination's file name.

Every other entry, every hash included, is kept.  A path whose content differs, or that can be checked neither
by a recorded hash nor by the file itself, is left as is and the reason printed, except the FM's: a policy
plays only with the FM it was trained with (loading compares the recorded hash), so a policy whose FM is not
the shipped one is refused unless ``--fm`` names where that FM was shipped.  The destination must lie in the
checkpoints folder (``mara_agents/checkpoints``).  The weights are checked
against the manifest's ``checkpoint_sha256`` and copied byte for byte; both files are written atomically.

    python -m tools.ship_checkpoints runs/ext/speeds/member0p.pt mara_agents/checkpoints/extensions/speeds/member0.pt \\
        --start mara_agents/checkpoints/extensions/speeds/il0.pt --dry-run
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace as with_changes
from pathlib import Path
from typing import Any, NamedTuple

from mara_common.atomic import atomic_write_bytes, atomic_write_json
from curves.bank import DEFAULT_BANK
from mara_agents.play.checkpoints import REPOSITORY, bank_checksum, file_sha256, manifest_path, portable_path
from mara_common.cli import run_command
from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT as DEFAULT_FM

MANIFEST_FORMAT = "mara-mat-manifest"
BANK_FIELDS = (("config", "env", "bank"), ("data", "bank"))
FM_FIELDS = (("config", "fm_checkpoint"), ("predictor", "checkpoint"))
START_FIELDS = (("config", "finetune", "init_from"), ("initial_policy", "checkpoint"))
CHECKPOINTS = Path("mara_agents") / "checkpoints"  # inside the repository: where shipped policies live


class ShipError(ValueError):
    """Input that cannot be shipped; the message names the argument and the value."""


@dataclass(frozen=True)
class ShippedPlaces:
    """The repository a policy is shipped into and its shipped bank and FM predictor (the defaults of every
    command), which recorded paths are relabelled to."""

    repository: Path
    bank: Path
    fm: Path

    @property
    def checkpoints(self) -> Path:
        """The folder shipped policies go to."""
        return self.repository / CHECKPOINTS


SHIPPED = ShippedPlaces(REPOSITORY, DEFAULT_BANK, DEFAULT_FM)


@dataclass(frozen=True)
class FieldChange:
    """One recorded path of the manifest: its new value (None: left as is) and why."""

    field: str
    old: str
    new: str | None
    reason: str

    def describe(self) -> str:
        """One line for the user: ``field: old → new (reason)`` or ``field: old left as is (reason)``."""
        if self.new is None:
            return f"{self.field}: {self.old} left as is ({self.reason})"
        return f"{self.field}: {self.old} → {self.new} ({self.reason})"


class ShipPlan(NamedTuple):
    """What shipping writes: the verified weights, the relabelled manifest and the change of each path."""

    weights: bytes
    manifest: dict[str, Any]
    changes: list[FieldChange]


@dataclass(frozen=True)
class _Shipped:
    """Where one input of the run (bank, FM, starting policy) was shipped, how its content is hashed, and the
    hash the manifest recorded for the input the run used."""

    name: str  # in messages: "the shipped bank", "--start mara_agents/..."
    hash_name: str  # "bank checksum", "SHA-256"
    place: Path | None  # None: not shipped (no --start), ``absent`` says why
    recorded: str | None
    digest: Callable[[Path], str]
    absent: str = ""


def _read_source(src: Path) -> tuple[bytes, dict[str, Any]]:
    """The policy's bytes and its manifest, refusing a missing file, a foreign manifest or bytes whose SHA-256
    differs from the recorded ``checkpoint_sha256`` (so only the weights that were trained get shipped)."""
    if not src.is_file():
        raise ShipError(f"SRC: {src} not found")
    manifest_file = manifest_path(src)
    if not manifest_file.is_file():
        raise ShipError(f"SRC: {src} has no manifest {manifest_file.name} beside it")
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, ValueError) as exc:
        raise ShipError(f"SRC: unreadable manifest {manifest_file}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ShipError(f"SRC: {manifest_file} is not a MAT policy manifest (format {MANIFEST_FORMAT!r})")
    weights = src.read_bytes()
    if hashlib.sha256(weights).hexdigest() != manifest.get("checkpoint_sha256"):
        raise ShipError(f"SRC: {src} does not match the checkpoint_sha256 its manifest {manifest_file.name} "
                        "records (corrupt or replaced); nothing shipped")
    return weights, manifest


def _check_destination(src: Path, dest: Path, weights: bytes, places: ShippedPlaces, replace: bool) -> None:
    """Refuse a destination that is not a ``.pt`` file inside the checkpoints folder, is the source itself, or
    holds other weights (unless ``replace``): shipping never loses a shipped policy by accident, nor puts one
    among results or code."""
    if dest.suffix != ".pt":
        raise ShipError(f"DEST: {dest} must name a .pt file")
    if not dest.resolve().is_relative_to(places.checkpoints.resolve()):
        raise ShipError(f"DEST: {dest} lies outside the checkpoints folder {places.checkpoints}; ship policies there")
    if dest.resolve() == src.resolve():
        raise ShipError(f"DEST: {dest} is SRC itself; ship into another file")
    if dest.is_file() and dest.read_bytes() != weights and not replace:
        raise ShipError(f"DEST: {dest} already holds other weights; pass --replace to replace them")


def _check_shipped_file(flag: str, path: Path | None, repository: Path) -> None:
    """Refuse a file named by ``flag`` (``--start``, ``--fm``) that is missing or outside the repository."""
    if path is None:
        return
    if not path.is_file():
        raise ShipError(f"{flag}: {path} not found")
    if not path.resolve().is_relative_to(repository.resolve()):
        raise ShipError(f"{flag}: {path} lies outside the repository {repository}; name where it was shipped")


def _check_start(start: Path | None, manifest: dict[str, Any], repository: Path) -> None:
    """Refuse a ``--start`` that is missing, outside the repository, or given for a policy that records no
    starting policy."""
    _check_shipped_file("--start", start, repository)
    if start is not None and not manifest.get("initial_policy"):
        raise ShipError(f"--start: {start} given, but the policy records no starting policy")


def _lookup(record: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """``record[k1][k2]...``, or None where a level is missing."""
    for key in keys:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record


def _assign(record: dict[str, Any], keys: tuple[str, ...], value: str) -> None:
    """Set ``record[k1][k2]... = value`` (every level exists: the value was just read)."""
    for key in keys[:-1]:
        record = record[key]
    record[keys[-1]] = value


def _recorded_or_hashed(old: str, shipped: _Shipped, repository: Path) -> str | None:
    """The hash the manifest recorded for this input, else the hash of the recorded path as it is now (relative
    paths are read from the repository), else None when that path cannot be read."""
    if shipped.recorded:
        return shipped.recorded
    path = Path(old) if Path(old).is_absolute() else repository / old
    try:
        return shipped.digest(path)
    except OSError:  # gone, or not a bank directory / file
        return None


def _relabel(field: str, old: str, shipped: _Shipped, repository: Path) -> FieldChange:
    """The change of one recorded input path: the shipped place when its content is the same, else as is."""
    if shipped.place is None:
        return FieldChange(field, old, None, shipped.absent)
    recorded = _recorded_or_hashed(old, shipped, repository)
    if recorded is None:
        return FieldChange(field, old, None, f"not found, and the manifest records no {shipped.hash_name}")
    new = portable_path(shipped.place, repository)
    if recorded != shipped.digest(shipped.place):
        return FieldChange(field, old, None, f"its {shipped.hash_name} differs from {shipped.name}'s")
    if new == old:
        return FieldChange(field, old, None, f"already names {shipped.name}")
    return FieldChange(field, old, new, f"its {shipped.hash_name} equals {shipped.name}'s")


def _shipped_fm(manifest: dict[str, Any], places: ShippedPlaces) -> _Shipped:
    """Where the FM was shipped and the SHA-256 the run recorded for the FM it used."""
    return _Shipped(f"the FM {portable_path(places.fm, places.repository)}", "SHA-256", places.fm,
                    _lookup(manifest, ("predictor", "checkpoint_sha256")), file_sha256)


def _check_fm(manifest: dict[str, Any], fm: _Shipped, repository: Path) -> None:
    """Refuse a policy trained with an FM whose content is not the shipped FM's (or ``--fm``'s), or cannot be
    checked: shipped, it would be loaded with that FM, which its recorded hash refuses."""
    trained = _lookup(manifest, ("predictor", "checkpoint"))
    if _lookup(manifest, ("predictor", "name")) != "fm" or not isinstance(trained, str) or not trained:
        return
    digest = _recorded_or_hashed(trained, fm, repository)
    if digest == fm.digest(fm.place):
        return
    why = "cannot be checked (not found, no recorded SHA-256)" if digest is None else f"differs from {fm.name}'s"
    raise ShipError(f"--fm: the policy was trained with the FM {trained}, whose SHA-256 {why}; ship that FM into the "
                    "repository and name it with --fm, so that the policy never plays with another FM")


def _shipped_inputs(manifest: dict[str, Any], start: Path | None,
                   places: ShippedPlaces) -> list[tuple[tuple[str, ...], _Shipped]]:
    """Each input path field with where that input was shipped and the hash the run recorded for it."""
    bank = _Shipped("the shipped bank", "bank checksum", places.bank, _lookup(manifest, ("data", "bank_sha256")),
                    bank_checksum)
    fm = _shipped_fm(manifest, places)
    start_label = f"--start {portable_path(start, places.repository)}" if start else ""
    begin = _Shipped(start_label, "SHA-256", start, _lookup(manifest, ("initial_policy", "checkpoint_sha256")),
                     file_sha256, absent="no --start names where the starting policy was shipped")
    return ([(keys, bank) for keys in BANK_FIELDS] + [(keys, fm) for keys in FM_FIELDS]
            + [(keys, begin) for keys in START_FIELDS])


def _destination_fields(dest: Path, repository: Path) -> list[tuple[tuple[str, ...], str, str]]:
    """The fields that name the exported file and its run, with their shipped values and why."""
    return [(("checkpoint",), dest.name, "the destination's file name"),
            (("config", "out"), portable_path(dest, repository), "the destination"),
            (("config", "run_dir"), portable_path(dest.with_suffix(""), repository), "the destination without suffix")]


def plan_ship(src: str | os.PathLike[str], dest: str | os.PathLike[str], start: str | os.PathLike[str] | None = None,
              *, replace: bool = False, places: ShippedPlaces | None = None,
              fm: str | os.PathLike[str] | None = None) -> ShipPlan:
    """Check the inputs and work out what shipping ``src`` to ``dest`` writes, writing nothing.

    Raises :class:`ShipError` (a ``ValueError``) naming the argument for a missing or corrupt source, a
    destination outside the checkpoints folder, equal to the source or holding other weights (unless
    ``replace``), an unusable ``start`` or ``fm`` (where the policy's FM was shipped, if not the shipped FM),
    or a policy trained with an FM other than that one.
    """
    places = places or SHIPPED
    src, dest = Path(src), Path(dest)
    start = Path(start) if start is not None else None
    weights, manifest = _read_source(src)
    _check_destination(src, dest, weights, places, replace)
    _check_start(start, manifest, places.repository)
    if fm is not None:
        _check_shipped_file("--fm", Path(fm), places.repository)
        places = with_changes(places, fm=Path(fm))
    _check_fm(manifest, _shipped_fm(manifest, places), places.repository)
    found: list[tuple[tuple[str, ...], FieldChange]] = []
    for keys, place in _shipped_inputs(manifest, start, places):
        old = _lookup(manifest, keys)
        if isinstance(old, str) and old:  # "" names the default, which is already the shipped one
            found.append((keys, _relabel(".".join(keys), old, place, places.repository)))
    for keys, new, reason in _destination_fields(dest, places.repository):
        old = _lookup(manifest, keys)
        if isinstance(old, str):
            found.append((keys, FieldChange(".".join(keys), old, None, f"already {reason}") if new == old
                          else FieldChange(".".join(keys), old, new, reason)))
    shipped = copy.deepcopy(manifest)
    for keys, change in found:
        if change.new is not None:
            _assign(shipped, keys, change.new)
    return ShipPlan(weights, shipped, [change for _, change in found])


def write_shipped(dest: Path, plan: ShipPlan) -> None:
    """Write the weights, then their manifest, each atomically, and check the written bytes: a run killed
    between the two leaves weights that their old manifest (or the lack of one) refuses, and shipping
    again completes it."""
    atomic_write_bytes(dest, plan.weights)
    if file_sha256(dest) != plan.manifest["checkpoint_sha256"]:
        raise OSError(f"{dest}: the written weights differ from the source's; nothing else written")
    atomic_write_json(manifest_path(dest), plan.manifest)


def ship_policy(src: str | os.PathLike[str], dest: str | os.PathLike[str],
                start: str | os.PathLike[str] | None = None, *, replace: bool = False, dry_run: bool = False,
                places: ShippedPlaces | None = None, fm: str | os.PathLike[str] | None = None) -> list[FieldChange]:
    """Copy the exported policy ``src`` to ``dest`` inside the checkpoints folder with its manifest relabelled
    (the module docstring gives the rule) and return the change of each recorded path; ``dry_run`` writes
    nothing.  ``start`` names where the policy's starting policy was shipped, ``fm`` where its FM was (when not
    the shipped FM); ``places`` defaults to :data:`SHIPPED`."""
    plan = plan_ship(src, dest, start, replace=replace, places=places, fm=fm)
    if not dry_run:
        write_shipped(Path(dest), plan)
    return plan.changes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.ship_checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="the exported policy (with its .json manifest beside it)")
    parser.add_argument("dest", type=Path, help="where it ships, a .pt file inside mara_agents/checkpoints")
    parser.add_argument("--start", type=Path, default=None,
                        help="where the policy's starting policy (--init-from) was shipped")
    parser.add_argument("--fm", type=Path, default=None,
                        help="where the FM the policy was trained with was shipped (default: the shipped FM)")
    parser.add_argument("--replace", action="store_true", help="replace a destination that holds other weights")
    parser.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    changes = ship_policy(args.src, args.dest, args.start, replace=args.replace, dry_run=args.dry_run, fm=args.fm)
    for change in changes:
        print(change.describe())
    print(f"dry run: nothing written to {args.dest}" if args.dry_run else
          f"shipped {args.src} → {args.dest} (weights unchanged) and {manifest_path(args.dest)}")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: 0, 2 with one line for unusable input, 130 on an interruption."""
    return run_command(lambda: main(argv), (ShipError, OSError),
                       "each file is written atomically; ship again to complete it")


if __name__ == "__main__":
    sys.exit(run())
