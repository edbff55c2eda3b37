"""Workloads: episodes of task arrivals that reference curves in a bank, and their file format.

An episode lists for each task its arrival step, the curve it follows (a bank curve id), its target loss ε
and its available time B.  Evaluation workloads are fixed JSON files in the repository so that
every method faces exactly the same arrivals and curves.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from curves.bank import CurveBank
from mara_common.atomic import atomic_write_json, read_versioned_json

FORMAT = "mara-workload"
VERSION = 1


class WorkloadError(ValueError):
    """A workload file is missing, malformed, or refers to curves the bank does not hold."""


@dataclass(frozen=True)
class Episode:
    """One episode's tasks, sorted by arrival step (ties keep their listed order, which is queue order)."""

    arrival: np.ndarray  # (n,) int64
    curve: tuple[str, ...]  # (n,) bank curve ids
    eps: np.ndarray  # (n,) float64 target losses
    budget: np.ndarray  # (n,) int64 available time B
    root: int = 0
    index: int = 0

    def __post_init__(self) -> None:
        n = len(self.curve)
        arrays = {"arrival": self.arrival, "eps": self.eps, "budget": self.budget}
        for name, array in arrays.items():
            if np.shape(array) != (n,):
                raise WorkloadError(f"episode {self.root}/{self.index}: {name} has shape {np.shape(array)}, "
                                    f"expected ({n},)")
        for name in ("arrival", "budget"):
            if np.asarray(arrays[name]).dtype.kind not in "iu":
                raise WorkloadError(f"episode {self.root}/{self.index}: {name} must be an integer array, got dtype "
                                    f"{np.asarray(arrays[name]).dtype}")
        if n and (np.any(np.diff(self.arrival) < 0) or self.arrival[0] < 0):
            raise WorkloadError(f"episode {self.root}/{self.index}: arrivals must be non-negative and sorted")
        if n and np.any(self.budget < 1):
            raise WorkloadError(f"episode {self.root}/{self.index}: every budget B must be >= 1")
        if n and not np.all(np.isfinite(self.eps) & (self.eps > 0)):
            raise WorkloadError(f"episode {self.root}/{self.index}: every target loss must be finite and > 0")
        if not all(isinstance(cid, str) for cid in self.curve):
            bad = next(cid for cid in self.curve if not isinstance(cid, str))
            raise WorkloadError(f"episode {self.root}/{self.index}: curve ids must be strings, got {bad!r}")

    @classmethod
    def from_lists(cls, arrival: Sequence[int], curve: Sequence[str], eps: Sequence[float],
                   budget: Sequence[int], root: int = 0, index: int = 0) -> Episode:
        """Build an episode from plain lists (as stored in JSON)."""
        where = f"episode {root}/{index}"
        return cls(_whole_numbers(arrival, "arrival", where), tuple(curve),
                   np.asarray(eps, dtype=np.float64).reshape(-1), _whole_numbers(budget, "budget", where), root, index)

    def __len__(self) -> int:
        return len(self.curve)

    def to_json(self) -> dict[str, Any]:
        """The JSON form.  ε keeps every digit (JSON floats round-trip exactly): a target placed on a curve's
        value at batch s* must still be first reached at s* after a save and load."""
        return {"root": self.root, "index": self.index, "arrival": self.arrival.tolist(),
                "curve": list(self.curve), "eps": self.eps.tolist(),
                "budget": self.budget.tolist()}

    def check_against(self, bank: CurveBank, where: str) -> None:
        """Every curve must exist and be long enough to cover the task's budget."""
        for cid, budget in zip(self.curve, self.budget.tolist()):
            record = bank.records.get(cid)
            if record is None:
                raise WorkloadError(f"{where}: episode {self.root}/{self.index} uses curve {cid!r}, "
                                    f"which bank {bank.root} does not hold")
            if record.length < budget:
                raise WorkloadError(f"{where}: curve {cid} has {record.length} batches, fewer than budget {budget}")


def _whole_numbers(values: Sequence[int], name: str, where: str) -> np.ndarray:
    """``values`` as int64, refusing fractions and non-numbers (a cast would truncate 1.5 to 1 silently)."""
    array = np.asarray(values)
    fractional = array.dtype.kind == "f" and not np.all(np.mod(array, 1) == 0)
    if array.size and (array.dtype.kind not in "iuf" or fractional):
        raise WorkloadError(f"{where}: {name} must hold whole numbers, got {array.reshape(-1).tolist()[:5]}")
    return array.astype(np.int64).reshape(-1)


@dataclass(frozen=True)
class Workload:
    """A named list of episodes (e.g. 5 roots × 12 episodes of one task set at one load)."""

    episodes: tuple[Episode, ...]
    task_set: str = "custom"
    arrival_prob: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document written by :func:`save_workload`."""
        return {"format": FORMAT, "version": VERSION, "task_set": self.task_set,
                "arrival_prob": self.arrival_prob, "episodes": [ep.to_json() for ep in self.episodes]}


def save_workload(path: str | os.PathLike[str], workload: Workload) -> None:
    """Write a workload file atomically."""
    atomic_write_json(Path(path), workload.to_json())


def load_workload(path: str | os.PathLike[str], bank: CurveBank | None = None) -> Workload:
    """Read and validate a workload file; with a bank, also check every curve reference."""
    path = Path(path)
    data = read_versioned_json(path, FORMAT, VERSION, WorkloadError, "workload file")
    try:
        episodes = tuple(Episode.from_lists(ep["arrival"], ep["curve"], ep["eps"], ep["budget"],
                                            ep.get("root", 0), ep.get("index", i))
                         for i, ep in enumerate(data["episodes"]))
    except WorkloadError as exc:
        raise WorkloadError(f"{path}: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise WorkloadError(f"{path}: malformed episode entry: {exc!r}") from exc
    if not episodes:
        raise WorkloadError(f"{path}: the workload holds no episode")
    if bank is not None:
        for episode in episodes:
            episode.check_against(bank, str(path))
    return Workload(episodes, data.get("task_set", "custom"), data.get("arrival_prob"))


def file_checksum(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes: pins the fixed evaluation workloads and keys evaluation caches."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
