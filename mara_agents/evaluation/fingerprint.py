"""Content hashes of everything an evaluation result depends on, so cached results are reused only when valid.

A cached episode stays valid while the workload file, the curve bank, the simulator code, the policy's code
and the policy's parameters (its checkpoint weights) are unchanged.  Checkpoints are hashed by *content*:
:func:`policy_fingerprint` walks the freshly built policy object and hashes every torch module's
``state_dict``, every array, every plain setting and the bytes of every file a ``Path`` attribute points to.
That needs no knowledge of where a method keeps its checkpoints, and a retrained checkpoint of one MAT seed
invalidates exactly that seed's cells.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
import types
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

import mara_env
from mara_env.workload import file_checksum

_MAX_DEPTH = 6


def digest(*parts: Any) -> str:
    """SHA-256 of a JSON rendering of ``parts`` (a stable key for the cache)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def files_fingerprint(paths: Iterable[Path]) -> str:
    """SHA-256 over the names and bytes of files, in sorted order."""
    sha = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        sha.update(path.name.encode())
        sha.update(file_checksum(path).encode())
    return sha.hexdigest()


@lru_cache(maxsize=8)
def bank_fingerprint(bank: str) -> str:
    """The manifest and every array file of a curve bank: a regenerated curve changes every result on it."""
    root = Path(bank)
    return files_fingerprint(p for p in root.iterdir() if p.suffix in (".json", ".npz"))


@lru_cache(maxsize=1)
def simulator_fingerprint() -> str:
    """The environment's source: a change of dynamics or metrics invalidates every cached episode."""
    return files_fingerprint(Path(mara_env.__file__).parent.glob("*.py"))


def source_fingerprint(obj: Any) -> str:
    """The source file that defines ``obj`` — a class or function, or an instance's class — so that a
    changed algorithm (an allocator, the bound) invalidates its cached results."""
    defined = obj if isinstance(obj, (type, types.FunctionType)) else type(obj)
    try:
        path = inspect.getsourcefile(defined)
    except TypeError:  # built-in: no source file
        path = None
    return file_checksum(path) if path else defined.__qualname__


# Modules only training imports: building and playing any built-in policy never loads them (a test checks
# this in a fresh interpreter), so editing them must not throw away hours of cached evaluation.
TRAINING_ONLY = ("mat/train.py", "mat/config.py", "mat/validation.py", "mat/ppo.py", "mat/rollout.py",
                 "mat/experts.py", "mat/imitation.py", "mat/il_train.py", "predictors/train.py",
                 "predictors/bench.py", "config_cli.py", "live.py")


@lru_cache(maxsize=1)
def agents_fingerprint() -> str:
    """The source of every allocator and predictor module (``mara_agents`` minus the evaluation package and
    the :data:`TRAINING_ONLY` modules).

    A policy's behaviour depends on more than the file that defines its class — LARA and MAT call the
    predictors, the observation wrapper and the token builder — so any change there invalidates every
    cached episode of a built-in method rather than silently reusing results of the old code.
    """
    root = Path(__file__).resolve().parents[1]
    return files_fingerprint(p for p in root.rglob("*.py") if "evaluation" not in p.relative_to(root).parts
                             and p.relative_to(root).as_posix() not in TRAINING_ONLY)


def policy_fingerprint(policy: Any) -> str:
    """Hash of a policy's class, source, parameters and referenced files (its "checkpoint hash"), and of
    the allocator and predictor code (:func:`agents_fingerprint`)."""
    sha = hashlib.sha256()
    sha.update(source_fingerprint(policy).encode())
    sha.update(agents_fingerprint().encode())
    _feed(sha, policy, 0, set())
    return sha.hexdigest()


def _feed(sha: Any, value: Any, depth: int, seen: set[int]) -> None:
    """Feed a canonical rendering of ``value`` into ``sha`` (depth-limited, cycle-safe)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        sha.update(repr(value).encode())
        return
    if isinstance(value, Path):
        sha.update(file_checksum(value).encode() if value.is_file() else str(value).encode())
        return
    if isinstance(value, np.ndarray):
        sha.update(f"{value.dtype}{value.shape}".encode())
        sha.update(np.ascontiguousarray(value).tobytes())
        return
    if isinstance(value, np.generic):
        sha.update(repr(value.item()).encode())
        return
    if isinstance(value, np.random.Generator):
        sha.update(repr(value.bit_generator.state).encode())
        return
    if depth > _MAX_DEPTH or id(value) in seen or isinstance(value, (types.ModuleType, types.FunctionType)):
        return
    seen.add(id(value))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module):
        for name, tensor in sorted(value.state_dict().items()):
            sha.update(name.encode())
            sha.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return
    if torch is not None and isinstance(value, torch.Tensor):
        sha.update(value.detach().cpu().contiguous().numpy().tobytes())
        return
    sha.update(type(value).__qualname__.encode())
    if isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = sorted(value.items(), key=lambda kv: repr(kv[0]))
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif hasattr(value, "__dict__"):
        items = sorted(vars(value).items())
    else:
        items = ()
    for key, item in items:
        sha.update(repr(key).encode())
        _feed(sha, item, depth + 1, seen)
