"""The import order of the project's packages: each module imports only its own layer and the layers below it,
and no two packages import each other.

:data:`LAYERS` declares the order, lowest first (``docs/layout.md`` says what each layer holds).  Every import
of every module counts — module level, inside functions, ``from X import Y`` where ``Y`` is a module — read
with :mod:`ast` from the source, so an import that only runs on some path is checked too.  A package's
``__init__`` is the package's own face: importing ``mara_agents.rules.slack`` runs ``mara_agents/__init__``,
but only the imports written in a module are its dependencies.

``python tests/test_layering_order.py [ROOT]`` prints the violations of the tree at ROOT (default: this one).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first.  A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("mara_common",),
    ("curves",),
    ("mara_env",),
    ("mara_agents.play",),
    ("mara_agents.predictors",),
    ("mara_agents.rules",),
    ("mara_agents.envs",),
    ("mara_agents.mat",),
    ("mara_agents.allocators",),
    ("mara_agents.training",),
    ("mara_agents.evaluation",),
    ("mara_agents.live",),
    ("mara_agents",),
    ("train", "evaluate", "studies", "benchmarks", "tools"),
)
TOP_LEVEL = ("mara_common", "curves", "mara_env", "mara_agents", "studies", "benchmarks", "tools")
ENTRY_POINTS = ("train.py", "evaluate.py")


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the project under ``root`` by dotted name (a package by its ``__init__``)."""
    files = [path for top in TOP_LEVEL if (root / top).is_dir() for path in (root / top).rglob("*.py")]
    files += [root / name for name in ENTRY_POINTS if (root / name).is_file()]
    modules = {}
    for path in files:
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """The project modules ``name`` (read from ``path``) imports anywhere in its source, sorted, each once."""
    return sorted(set(_imports(name, path, modules)))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        yield from (target for target in targets if target.split(".")[0] in TOP_LEVEL + ("train", "evaluate"))


def _prefix(name: str) -> tuple[int, str] | None:
    """(layer index, prefix) of the longest prefix in :data:`LAYERS` naming ``name``; None when none does."""
    named = [(len(prefix), index, prefix) for index, prefixes in enumerate(LAYERS) for prefix in prefixes
             if name == prefix or name.startswith(prefix + ".")]
    return None if not named else max(named)[1:]


def layer_of(name: str) -> int | None:
    """The index in :data:`LAYERS` of the layer ``name`` belongs to; None when no layer names it."""
    found = _prefix(name)
    return None if found is None else found[0]


def upward_imports(root: Path) -> list[str]:
    """One line per import that runs up :data:`LAYERS` (or from a module no layer names)."""
    modules = module_files(root)
    found = []
    for name, path in sorted(modules.items()):
        here = layer_of(name)
        if here is None:
            found.append(f"{name}: no layer declared for it")
            continue
        for target in imported_names(name, path, modules):
            there = layer_of(target)
            if there is not None and there > here:
                found.append(f"{name} (layer {LAYERS[here][0]}) imports {target} (layer {LAYERS[there][0]})")
    return found


def package_cycles(root: Path) -> list[str]:
    """One line per pair of packages (the prefixes of :data:`LAYERS`, each with its subpackages) that import
    each other, directly or through other packages."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = _prefix(name)
        for target in imported_names(name, path, modules):
            there = _prefix(target)
            if source is not None and there is not None and there[1] != source[1]:
                graph.setdefault(source[1], set()).add(there[1])
    reach = {package: _reachable(package, graph) for package in graph}
    return [f"{a} <-> {b}" for a in sorted(reach) for b in sorted(reach[a]) if a < b and a in reach.get(b, ())]


def _reachable(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_module_imports_only_its_layer_and_the_layers_below():
    assert upward_imports(ROOT) == []


def test_no_two_packages_import_each_other():
    assert package_cycles(ROOT) == []


def test_the_check_sees_function_level_and_relative_imports(tmp_path):
    low, high = tmp_path / "mara_common", tmp_path / "curves"
    low.mkdir(), high.mkdir()
    (high / "__init__.py").write_text("")
    (high / "bank.py").write_text("X = 1\n")
    (low / "__init__.py").write_text("")
    (low / "checks.py").write_text("def f():\n    from curves import bank\n    return bank\n")
    (high / "reader.py").write_text("from . import bank\nfrom mara_common import checks\n")
    assert upward_imports(tmp_path) == ["mara_common.checks (layer mara_common) imports curves.bank (layer curves)"]
    assert package_cycles(tmp_path) == ["curves <-> mara_common"]
    modules = module_files(tmp_path)
    assert imported_names("curves.reader", modules["curves.reader"], modules) == ["curves.bank", "mara_common.checks"]


if __name__ == "__main__":
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    print("\n".join(upward_imports(tree) + package_cycles(tree)) or "no violations")
