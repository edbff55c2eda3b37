"""Old import paths of moved modules: they keep working for one release, with a ``DeprecationWarning``.

:data:`MOVED` maps each old dotted path to its new one; :class:`MovedModules`, a finder placed right after
the standard path finder (so it is asked only when no module file exists at a path, and before an editable
install's finder could find a stale copy), answers an old path with the module at its new path, the same
object, and warns once per path.  The CHANGELOG lists what moved.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "curves.atomic": "mara_common.atomic",
    "curves.checks": "mara_common.checks",
    "curves.cli": "mara_common.cli",
    "curves.ray_support": "mara_common.ray_support",
    "mara_agents.config_cli": "mara_common.config_cli",
    "mara_agents.interrupt": "mara_common.cli",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module already imported (or importable) at its new path."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already executed."""


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds each old path of :data:`MOVED` as an alias of its new path."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} has moved to {new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)  # the importing line: warnings skips the import machinery
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put one :class:`MovedModules` right after ``PathFinder`` in ``sys.meta_path`` (again: no effect)."""
    if any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        return
    after = [i for i, finder in enumerate(sys.meta_path) if finder is importlib.machinery.PathFinder]
    sys.meta_path.insert(after[0] + 1 if after else len(sys.meta_path), MovedModules())
