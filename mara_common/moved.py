"""Old import paths of moved modules: they keep working for one release, with a ``DeprecationWarning``.

:data:`MOVED` maps each old dotted path to its new one; :class:`MovedModules`, a finder placed right after
the standard path finder (so it is asked only when no module file exists at a path, and before an editable
install's finder could find a stale copy), answers an old path with the module at its new path, the same
object, and warns the first time each old path is used.  An old package path also runs as a command
(``python -m OLD`` runs the new package's ``__main__``).  The CHANGELOG lists what moved.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "curves.atomic": "mara_common.atomic",
    "curves.checks": "mara_common.checks",
    "curves.cli": "mara_common.cli",
    "curves.ray_support": "mara_common.ray_support",
    "mara_agents.behaviour_cloning": "mara_agents.training.behaviour_cloning",
    "mara_agents.checkpoint_io": "mara_agents.play.checkpoints",
    "mara_agents.config_cli": "mara_common.config_cli",
    "mara_agents.forecast_env": "mara_agents.envs.forecast",
    "mara_agents.interrupt": "mara_common.cli",
    "mara_agents.jobs": "mara_agents.live.jobs",
    "mara_agents.policy": "mara_agents.play.policy",
    "mara_agents.runner": "mara_agents.play.lockstep",
    "mara_agents.sb3_vec_env": "mara_agents.envs.sb3_vec",
    "mara_agents.tune": "mara_agents.live.tune",
    "mara_agents.allocators.mat": "mara_agents.mat.policy",
    "mara_agents.allocators.nodes": "mara_agents.rules.nodes",
    "mara_agents.allocators.uncontended": "mara_agents.rules.uncontended",
    "mara_agents.mat.config": "mara_agents.training.config",
    "mara_agents.mat.critic": "mara_agents.training.critic",
    "mara_agents.mat.experts": "mara_agents.training.experts",
    "mara_agents.mat.il_train": "mara_agents.training.il_train",
    "mara_agents.mat.imitation": "mara_agents.training.imitation",
    "mara_agents.mat.ppo": "mara_agents.training.ppo",
    "mara_agents.mat.rollout": "mara_agents.training.rollout",
    "mara_agents.mat.train": "mara_agents.training.train",
    "mara_agents.mat.validation": "mara_agents.training.validation",
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

    def __init__(self) -> None:
        self.warned: set[str] = set()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        if fullname not in self.warned:
            self.warned.add(fullname)
            warnings.warn(f"{fullname} has moved to {new}; the old path goes in the next release",
                          DeprecationWarning, stacklevel=2)  # the importing line: warnings skips the import machinery
        found = importlib.util.find_spec(new)
        package = found is not None and found.submodule_search_locations is not None
        spec = importlib.machinery.ModuleSpec(fullname, _Alias(new), is_package=package)
        if package:  # ``python -m OLD`` then finds OLD.__main__ in the new package's folder
            spec.submodule_search_locations = list(found.submodule_search_locations)
        return spec


def install() -> None:
    """Put one :class:`MovedModules` right after ``PathFinder`` in ``sys.meta_path`` (again: no effect)."""
    if any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        return
    after = [i for i, finder in enumerate(sys.meta_path) if finder is importlib.machinery.PathFinder]
    sys.meta_path.insert(after[0] + 1 if after else len(sys.meta_path), MovedModules())
