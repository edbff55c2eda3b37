"""The settings beyond the paper (node speeds, switching cost) that ``evaluate.py extensions`` reports.

A :class:`NamedSetting` is a :class:`~mara_agents.mat.setting.Setting` — a node count M with optional node
speeds and a switching cost c (the env options of ``docs/environment.md``, "Beyond the paper") — under a name,
with the learned allocators trained in it.  The reported settings
are kept in a JSON file (:data:`SHIPPED`), chosen by ``python -m studies.extension_selection select``
under the rule of ``docs/research/extensions.md``::

    {"settings": [{"name": "speeds", "num_nodes": 4, "node_speeds": [1, 1, 1, 4], "switch_cost": 0,
                   "learned": [{"label": "MARA", "method": "mara", "checkpoint": "runs/x/best.pt"},
                               {"label": "MAT-IL ensemble", "method": "mat-il-ens",
                                "checkpoints": ["m0.pt", "m1.pt", "m2.pt"]}]}, ...]}

A learned entry names a registered MAT method (its factory loads the checkpoint) and one checkpoint, or an
ensemble's member checkpoints; relative paths are relative to the repository root.  A file that does not parse
or holds a bad value is a ``ValueError`` naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mara_agents.mat.setting import Setting
from mara_common.atomic import atomic_write_text

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED = Path(__file__).with_name("extension_settings.json")
LEARNED_METHODS = {"mara": "checkpoint", "mat-il-ens": "checkpoints"}  # method → the factory argument it takes


@dataclass(frozen=True)
class Learned:
    """A learned allocator trained in a setting: a registered MAT method and its checkpoint(s)."""

    label: str
    method: str
    checkpoints: tuple[str, ...]

    def paths(self) -> list[Path]:
        """The checkpoint files (relative ones under the repository root)."""
        return [path if path.is_absolute() else REPOSITORY / path for path in map(Path, self.checkpoints)]

    def missing(self) -> list[str]:
        """The checkpoints that are not there, as the settings file names them."""
        return [name for name, path in zip(self.checkpoints, self.paths()) if not path.is_file()]

    def import_path(self) -> str:
        """The allocator as the evaluation's ``NAME=module:Factory:key=value,...`` policy (see
        :func:`learned_policy`), so that it is played and cached like any other."""
        return (f"{self.label}={__name__}:learned_policy:method={self.method},"
                f"checkpoints={'+'.join(self.checkpoints)}")

    def to_json(self) -> dict[str, Any]:
        argument = LEARNED_METHODS[self.method]
        value = self.checkpoints[0] if argument == "checkpoint" else list(self.checkpoints)
        return {"label": self.label, "method": self.method, argument: value}


@dataclass(frozen=True)
class NamedSetting:
    """A setting under a name, with the learned allocators trained in it."""

    name: str
    setting: Setting = Setting()
    learned: tuple[Learned, ...] = field(default=(), compare=False)

    @property
    def num_nodes(self) -> int:
        return self.setting.num_nodes

    @property
    def node_speeds(self) -> tuple[int, ...] | None:
        return self.setting.node_speeds

    @property
    def switch_cost(self) -> int:
        return self.setting.switch_cost

    def env_options(self) -> dict[str, Any]:
        """The env keyword arguments of the setting (``num_nodes``, ``node_speeds``, ``switch_cost``)."""
        return self.setting.options()

    def describe(self) -> str:
        """``M = 4, speeds (1, 1, 1, 4), c = 0`` — what the tables show."""
        speeds = "all 1" if self.node_speeds is None else "(" + ", ".join(map(str, self.node_speeds)) + ")"
        return f"M = {self.num_nodes}, speeds {speeds}, c = {self.switch_cost}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, **self.setting.record(), "learned": [entry.to_json() for entry in self.learned]}


def _learned(where: str, entry: Any) -> Learned:
    if not isinstance(entry, dict) or entry.get("method") not in LEARNED_METHODS:
        raise ValueError(f"{where}: a learned entry needs \"method\" among {sorted(LEARNED_METHODS)}, got {entry!r}")
    argument = LEARNED_METHODS[entry["method"]]
    value = entry.get(argument)
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise ValueError(f"{where}: learned {entry['method']!r} needs \"{argument}\" (checkpoint path"
                         f"{'' if argument == 'checkpoint' else 's'}), got {value!r}")
    label = str(entry.get("label") or entry["method"])
    odd = [text for text in (label, *paths) if any(char in text for char in ":,")]
    if odd:
        raise ValueError(f"{where}: a learned label or checkpoint path must not contain ':' or ',', got {odd[0]!r}")
    return Learned(label, entry["method"], tuple(paths))


def setting_from_json(where: str, entry: Any) -> NamedSetting:
    """One setting from its JSON object (``where`` names it in errors)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise ValueError(f"{where}: each setting needs a non-empty \"name\", got {entry!r}")
    speeds = entry.get("node_speeds")
    if speeds is not None and not isinstance(speeds, list):
        raise ValueError(f"{where}: node_speeds must be a list of integers or null, got {speeds!r}")
    learned = entry.get("learned", [])
    if not isinstance(learned, list):
        raise ValueError(f"{where}: learned must be a list, got {learned!r}")
    entries = tuple(_learned(f"{where} {entry['name']}", item) for item in learned)
    labels = [item.label for item in entries]
    if len(set(labels)) != len(labels):
        raise ValueError(f"{where} {entry['name']}: the learned labels must be unique, got {labels}")
    try:
        setting = Setting(entry.get("num_nodes", Setting().num_nodes), None if speeds is None else tuple(speeds),
                          entry.get("switch_cost", 0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {entry['name']}: {exc}") from None
    return NamedSetting(entry["name"], setting, entries)


def load_settings(path: Path = SHIPPED) -> list[NamedSetting]:
    """The settings of a settings file; a bad file is a ``ValueError`` naming it."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"settings file {path}: cannot be read as JSON ({exc})") from None
    entries = data.get("settings") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"settings file {path}: needs a non-empty \"settings\" list")
    settings = [setting_from_json(f"settings file {path}", entry) for entry in entries]
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"settings file {path}: setting names must be unique, got {names}")
    return settings


def check_checkpoints(settings: list[NamedSetting], where: str) -> None:
    """Refuse settings that name a learned allocator whose checkpoint is not there (``where`` names the file in
    the message): the tables would otherwise be made without it."""
    for setting in settings:
        for entry in setting.learned:
            missing = entry.missing()
            if missing:
                raise ValueError(f"{where}: setting {setting.name!r}: {entry.label} checkpoint not found: "
                                 f"{', '.join(missing)} (train and ship it, or remove the entry)")


def save_settings(path: Path, settings: list[NamedSetting], extra: dict[str, Any] | None = None) -> None:
    """Write a settings file atomically (``extra`` keys go beside ``settings``, e.g. how they were chosen)."""
    data = {**(extra or {}), "settings": [s.to_json() for s in settings]}
    atomic_write_text(Path(path), json.dumps(data, indent=1) + "\n")


def learned_policy(method: str, checkpoints: str) -> Any:
    """Build a learned entry's allocator: the registered MAT ``method`` from its ``+``-joined checkpoint(s)
    (relative paths under the repository root)."""
    from mara_agents.allocators.registry import make_policy

    if method not in LEARNED_METHODS:
        raise ValueError(f"method must be one of {sorted(LEARNED_METHODS)}, got {method!r}")
    paths = Learned(method, method, tuple(str(checkpoints).split("+"))).paths()
    argument = LEARNED_METHODS[method]
    return make_policy(method, **{argument: paths[0] if argument == "checkpoint" else paths})
