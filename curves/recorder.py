"""CurveRecorder: wrap any training loop and store its per-batch losses as one curve of a bank.

    from curves import CurveRecorder, FamilySpec
    spec = FamilySpec("my_mlp", role="id", modality="tabular", dataset="mine", model="MLP",
                      budget={"kind": "interval", "low": 285, "high": 315})
    with CurveRecorder("my_bank", spec, split="train", index=0, seed=1, data_seed=2, batch_size=32, lr=1e-3) as rec:
        for x, y in loader:
            loss = loss_fn(model(x), y); ...; rec.log(loss)

The curve is written (atomically) only when the block exits normally, so a crashed job never leaves half a
curve in the bank.  Run :mod:`curves.calibrate` afterwards to set the family's ε rule.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from curves.bank import BankWriter, CurveRecord, FamilySpec
from curves.bank_format import CALIBRATED_FIELDS, family_body


def generator_commit() -> str:
    """The git commit of the code that produced a curve (``unknown`` outside a git checkout or before a commit)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class CurveRecorder:
    """Collects per-batch losses and writes them as ``family/split/index`` into a bank on successful exit.

    ``family`` is a :class:`FamilySpec` (declared in the bank if new; rules already in the bank are kept) or
    the name of a family the bank already declares.  ``length`` optionally requires an exact number of
    batches, so a loop that stopped early is rejected instead of stored short.
    """

    def __init__(self, root: str | os.PathLike[str], family: FamilySpec | str, split: str, index: int, *, seed: int,
                 data_seed: int, batch_size: int, lr: float, preset: str = "custom", source: str = "user",
                 length: int | None = None, commit: str | None = None, writer: BankWriter | None = None):
        self.writer = writer if writer is not None else BankWriter(root)
        self.family = family if isinstance(family, str) else family.name
        if isinstance(family, FamilySpec):
            declare_keeping_rules(self.writer, family)
        elif family not in self.writer.manifest["families"]:
            raise ValueError(f"family {family!r} is not declared in {self.writer.root}; pass a FamilySpec")
        self.fields: dict[str, Any] = dict(split=split, index=index, seed=seed, data_seed=data_seed,
                                           batch_size=batch_size, lr=lr, preset=preset, source=source)
        self.length = length
        self.commit = commit if commit is not None else generator_commit()
        self.losses: list[float] = []

    def log(self, loss: Any) -> None:
        """Record one batch's mean training loss (a float or a scalar tensor)."""
        value = float(loss.detach()) if hasattr(loss, "detach") else float(loss)
        if not np.isfinite(value):
            raise FloatingPointError(f"{self.family}/{self.fields['split']}/{self.fields['index']}: "
                                     f"non-finite loss at batch {len(self.losses) + 1}")
        self.losses.append(value)

    def __enter__(self) -> "CurveRecorder":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 _tb: TracebackType | None) -> None:
        if exc_type is not None:
            return
        if self.length is not None and len(self.losses) != self.length:
            raise ValueError(f"{self.family}: recorded {len(self.losses)} batches, expected {self.length}")
        record = CurveRecord(family=self.family, length=len(self.losses), generator_commit=self.commit, **self.fields)
        self.writer.add(record, np.asarray(self.losses, dtype=np.float32))


def declare_keeping_rules(writer: BankWriter, spec: FamilySpec) -> None:
    """Declare ``spec`` but keep every calibrated rule the bank already has where ``spec`` leaves it ``None``.

    This lets a generator re-declare its families on every run without wiping calibrated rules.
    """
    existing = writer.manifest["families"].get(spec.name, {})
    kept = {name: existing.get(name) for name in CALIBRATED_FIELDS if getattr(spec, name) is None}
    new = dataclasses.replace(spec, **{name: value for name, value in kept.items() if value is not None})
    if existing != family_body(new):
        writer.declare_family(new)
