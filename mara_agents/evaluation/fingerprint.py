"""Content hashes of everything an evaluation result depends on, so cached results are reused only when valid.

A cached episode stays valid while the workload file, the curve bank, the simulator code, the policy's code
and the policy's parameters (its checkpoint weights) are unchanged.  Checkpoints are hashed by *content*:
:func:`policy_fingerprint` walks the freshly built policy object and hashes every torch module's
``state_dict``, every array, every plain setting and the bytes of every file a ``Path`` attribute points to.
That needs no knowledge of where a method keeps its checkpoints, and a retrained checkpoint of one MAT seed
invalidates exactly that seed's cells.
"""

from __future__ import annotations

import ast
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
AGENTS_ROOT = Path(__file__).resolve().parents[1]


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


# Modules of mara_env that the evaluation's single-env play never runs: the native vector env, the renderer,
# the PettingZoo front end and the workload generators (a workload's content is hashed on its own).
# Every other module, and any new one, counts as dynamics.
NOT_DYNAMICS = frozenset({"batched.py", "vector_env.py", "render.py", "pettingzoo_env.py", "fixed_workloads.py",
                          "tasksets.py"})


@lru_cache(maxsize=1)
def simulator_fingerprint() -> str:
    """The environment's source: a change of dynamics or metrics invalidates every cached episode."""
    return files_fingerprint(p for p in Path(mara_env.__file__).parent.glob("*.py") if p.name not in NOT_DYNAMICS)


def source_fingerprint(obj: Any) -> str:
    """The source file that defines ``obj`` — a class or function, or an instance's class — so that a
    changed algorithm (an allocator, the bound) invalidates its cached results."""
    defined = obj if isinstance(obj, (type, types.FunctionType)) else type(obj)
    try:
        path = inspect.getsourcefile(defined)
    except TypeError:  # built-in: no source file
        path = None
    return file_checksum(path) if path else defined.__qualname__


def _module_file(name: str) -> Path | None:
    """The source file of ``mara_agents`` module ``name`` (a package's ``__init__.py``), if it exists."""
    parts = name.split(".")
    if parts[0] != "mara_agents":
        return None
    base = AGENTS_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path, package: str) -> set[str]:
    """Modules ``path`` imports anywhere (function-level imports too): for ``from a import b`` the submodule
    ``a.b`` where it exists, else ``a``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                names.add(sub if _module_file(sub) is not None else base)
    return names


@lru_cache(maxsize=64)
def agents_fingerprint(modules: frozenset[str]) -> str:
    """The source of ``modules`` and of every ``mara_agents`` module they import, transitively (read from the
    files, so the set does not depend on what this process happens to have loaded).

    A policy's behaviour depends on more than the file that defines its class — LARA and MAT call the
    predictors, the demand stage and the token builder — so a change anywhere in that closure invalidates the
    policy's cached episodes, while code it never imports (training, the registry's other entries, the
    evaluation package) leaves them valid.  Package ``__init__`` files count only where a module imports the
    package itself: they re-export names and hold no behaviour.
    """
    pending, files = sorted(modules), set()
    while pending:
        name = pending.pop()
        path = _module_file(name)
        if path is None or path in files:
            continue
        files.add(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        pending += sorted(m for m in _imported(path, package) if m.startswith("mara_agents"))
    return files_fingerprint(files)


class _Chunks:
    """Collects what :func:`_feed` renders, so it can be hashed after the code it depends on."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def update(self, data: bytes) -> None:
        self.parts.append(data)


def policy_fingerprint(policy: Any) -> str:
    """Hash of a policy's class, source, parameters and referenced files (its "checkpoint hash"), and of
    the allocator and predictor code it runs: :func:`agents_fingerprint` of the ``mara_agents`` modules that
    define the policy and every object it holds (its demand stage, its torch model, ...)."""
    rendered, modules = _Chunks(), set()
    _feed(rendered, policy, 0, set(), modules)
    sha = hashlib.sha256()
    sha.update(source_fingerprint(policy).encode())
    sha.update(agents_fingerprint(frozenset(m for m in modules if m.split(".")[0] == "mara_agents")).encode())
    for part in rendered.parts:
        sha.update(part)
    return sha.hexdigest()


def _feed(sha: Any, value: Any, depth: int, seen: set[int], modules: set[str]) -> None:
    """Feed a canonical rendering of ``value`` into ``sha`` (depth-limited, cycle-safe), and collect in
    ``modules`` the module of every object's class on the way (a torch model's submodules included)."""
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
    modules.add(type(value).__module__)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module):
        modules.update(type(child).__module__ for child in value.modules())
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
        _feed(sha, item, depth + 1, seen, modules)
