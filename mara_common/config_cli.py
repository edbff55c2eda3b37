"""Command lines generated from a tree of settings dataclasses (CleanRL style: every field has a default and a
one-line help, and the flags are the field names).

A field whose value is itself a dataclass is a nested group: its fields become flags of the same command line
(``--clip`` sets ``config.ppo.clip``), so flag names must be unique across the tree (checked when the parser
is built).  A nested field may name which of its dataclass's fields are flags, with their help, in its metadata
(``metadata={"flags": {"arrival_prob": "training load p", ...}}``); this is how a training config exposes a few
fields of the environment's :class:`~mara_env.config.MARAConfig` while keeping the env's own defaults.
Otherwise every field with a ``help`` in its metadata is a flag.  Defaults are read from the dataclasses
only, and a value the dataclass rejects (``ValueError`` naming the field) is reported as a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

from mara_common import checks

T = TypeVar("T")
_SCALARS = (bool, int, float, str)


def check_integers(settings: Any, names: Sequence[str], low: int) -> None:
    """Every field ``names`` of ``settings`` is an integer ≥ ``low`` (not a bool), else ``ValueError`` naming it."""
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")


def check_range(name: str, value: object, low: float, high: float, low_open: bool = False) -> None:
    """``value`` is a finite number in [low, high] (or (low, high] with ``low_open``), else ``ValueError``."""
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    inside = math.isfinite(number) and (low < number if low_open else low <= number) and number <= high
    if not inside:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be a number in {bracket}{low:g}, {high:g}], got {value!r}")


def check_run_files(run_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, device: str, threads: int,
                    bank: str | None = None, inputs: dict[str, str] | None = None) -> None:
    """The checks every trainer's settings share, made before any work: the device name and thread count, a
    writable run directory and output file, an existing bank directory (None: the shipped one) and input
    checkpoint files (``""``: the default one).  ``ValueError``/``TypeError`` name the setting."""
    checks.torch_device("device", device)
    checks.integer("threads", threads, 1, checks.MAX_THREADS)
    checks.writable_dir("run_dir", run_dir)
    checks.writable_file("out", out)
    if bank is not None:
        checks.existing_dir("bank", bank)
    for name, value in (inputs or {}).items():
        checks.optional_file(name, value)


def _leaf_type(cls: type, name: str) -> type:
    """The scalar type of a field (``str | None`` reads as ``str``)."""
    hint = typing.get_type_hints(cls)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        hint = options[0] if len(options) == 1 else hint
    if hint not in _SCALARS and hint != tuple[int, ...]:
        raise TypeError(f"{cls.__name__}.{name}: a command-line field must be one of {_SCALARS} or tuple[int, ...], "
                        f"got {hint}")
    return hint


def integer_list(text: str) -> tuple[int, ...]:
    """argparse type converter for ``tuple[int, ...]`` fields, written ``1,1,2,4``."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _default_of(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise TypeError(f"field {field.name!r} has no default; every command-line setting needs one")


def _flags(cls: type, prefix: str, helps: dict[str, str] | None) -> list[tuple[str, str, type, Any, str]]:
    """(flag, dotted destination, type, default, help) of every command-line field under ``cls``."""
    found = []
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        default = _default_of(field)
        if dataclasses.is_dataclass(hints[field.name]):
            found += _flags(hints[field.name], f"{prefix}{field.name}.", field.metadata.get("flags"))
            continue
        text = helps.get(field.name) if helps is not None else field.metadata.get("help")
        if text is None:
            continue
        found.append(("--" + field.name.replace("_", "-"), prefix + field.name, _leaf_type(cls, field.name),
                      default, text))
    return found


def _number(kind: type) -> Any:
    """argparse type converter for ``kind`` with a message naming the expected kind."""
    def convert(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
    convert.__name__ = kind.__name__
    return convert


def build_parser(cls: type, prog: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with one flag per command-line field of ``cls`` (and of its nested groups)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    seen: dict[str, str] = {}
    for flag, dest, kind, default, text in _flags(cls, "", None):
        if flag in seen:
            raise TypeError(f"{flag} is declared twice ({seen[flag]} and {dest}); flag names must be unique")
        seen[flag] = dest
        if kind is bool:
            parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default, help=text)
        else:
            converter = _number(kind) if kind in (int, float) else integer_list if kind == tuple[int, ...] else kind
            metavar = "INT,INT,..." if kind == tuple[int, ...] else kind.__name__.upper()
            parser.add_argument(flag, dest=dest, type=converter, default=default, metavar=metavar,
                                help=f"{text} (default: {default})")
    return parser


def _construct(cls: type[T], values: dict[str, Any], prefix: str) -> T:
    """An instance of ``cls`` from the parsed ``values`` (dotted keys); fields without a flag keep defaults."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        key = prefix + field.name
        if dataclasses.is_dataclass(hints[field.name]):
            kwargs[field.name] = _construct(hints[field.name], values, key + ".")
        elif key in values:
            kwargs[field.name] = values[key]
    return cls(**kwargs)


def parse_config(cls: type[T], argv: Sequence[str] | None, prog: str, description: str) -> T:
    """Parse ``argv`` into a ``cls`` instance; a rejected value exits with a usage error naming the field."""
    parser = build_parser(cls, prog, description)
    values = vars(parser.parse_args(argv))
    try:
        return _construct(cls, values, "")
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits


def flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested ``dataclasses.asdict`` as one level of dotted keys (for comparing saved and current runs)."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def same_path(a: object, b: object) -> bool:
    """Whether two spellings name the same file or directory (``runs/x``, ``./runs/x``, ``/abs/runs/x``);
    empty and None values compare as equal to each other only."""
    if not a or not b:
        return not a and not b
    return os.path.realpath(str(a)) == os.path.realpath(str(b))


def changed_settings(saved: dict[str, Any], current: dict[str, Any], resumable: frozenset[str],
                     paths: frozenset[str]) -> list[str]:
    """The settings (dotted names) that differ between a saved run and this one, except ``resumable`` ones;
    ``paths`` compare by the file they name."""
    saved, current = flatten(saved), flatten(current)
    return sorted(key for key, value in current.items() if key not in resumable
                  and not (same_path(saved.get(key), value) if key in paths else saved.get(key) == value))
