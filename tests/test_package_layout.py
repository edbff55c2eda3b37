"""The installed packages hold the product, grouped by role (docs/layout.md), over a bottom layer that loads
nothing else of the project; the old import paths of moved modules keep working for one release with a
``DeprecationWarning``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from mara_common import moved

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = ("mara_common", "curves", "mara_env", "mara_agents")
# The commands the installed packages keep: the documented user commands (live, jobs, bank building; train.py
# and evaluate.py sit at the top) and the ones that write or check what those read (docs/layout.md).
COMMANDS = {
    "curves/build_bank.py", "curves/calibrate.py", "curves/datasheet.py", "curves/generate.py",
    "curves/subset_bank.py", "mara_agents/live/__main__.py", "mara_agents/live/jobs/__main__.py",
    "mara_env/fixed_workloads.py", "mara_agents/predictors/answer_files.py", "mara_agents/predictors/bench.py",
    "mara_agents/predictors/train.py",
    "mara_agents/training/validation.py",
}


def _runs_as_command(path: Path) -> bool:
    if path.name == "__main__.py":
        return True
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return True
    return False


def test_only_the_listed_commands_run_from_the_installed_packages():
    found = {path.relative_to(ROOT).as_posix() for package in INSTALLED for path in (ROOT / package).rglob("*.py")
             if _runs_as_command(path)}
    assert found == COMMANDS


def test_every_installed_folder_of_modules_is_a_package():
    folders = {path.parent for package in INSTALLED for path in (ROOT / package).rglob("*.py")}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()) == []


def test_mara_agents_has_at_most_three_loose_modules():
    loose = [path.name for path in (ROOT / "mara_agents").glob("*.py") if path.name != "__init__.py"]
    assert len(loose) <= 3, loose


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_import_path_gives_the_new_module_with_a_deprecation_warning(old):
    sys.modules.pop(old, None)
    finder = next(finder for finder in sys.meta_path if isinstance(finder, moved.MovedModules))
    finder.warned.discard(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(moved.MOVED[old])
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == [
        f"{old} has moved to {moved.MOVED[old]}; the old path goes in the next release"]


def test_every_old_path_is_gone_and_every_new_path_exists():
    for old, new in moved.MOVED.items():
        place = ROOT / old.replace(".", "/")
        assert not place.with_suffix(".py").exists() and not place.is_dir(), old
        target = ROOT / new.replace(".", "/")
        assert target.with_suffix(".py").is_file() or (target / "__init__.py").is_file(), new


def test_the_old_jobs_command_still_runs():
    done = subprocess.run([sys.executable, "-m", "mara_agents.jobs", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m mara_agents.live.jobs")


def test_the_bottom_layer_loads_neither_torch_nor_ray_nor_another_project_package():
    probe = ("import importlib, pkgutil, sys, mara_common\n"
             "for m in pkgutil.iter_modules(mara_common.__path__, 'mara_common.'):\n"
             "    importlib.import_module(m.name)\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & "
             "{'torch', 'ray', 'curves', 'mara_env', 'mara_agents'}))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
