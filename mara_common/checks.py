"""Input checks shared by every door of the project: command lines, config dataclasses and constructors.

Each check takes the argument's name and its value and either returns the value in its canonical form or
raises ``ValueError`` (``TypeError`` for a value of the wrong kind) whose one-line message names the argument
and the value.  Config dataclasses call them in ``__post_init__``; command lines built from those dataclasses
(:mod:`mara_common.config_cli`) turn the error into a usage error with exit status 2, and hand-written parsers
wrap a check with :func:`argparse_type`.  Path checks run before any work starts, so a run never trains or
evaluates for minutes and then fails to write its result.

It lives in :mod:`mara_common`, the bottom layer every package may import, so that the curve builder, the
environment and the agents all check their inputs the same way.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")
# Torch CPU threads any setting or flag may ask for.  A fixed bound, not one derived from this machine's cores,
# so that a setting valid where it was written (a training run's record, a cluster build) is valid everywhere;
# more threads than cores only add contention.
MAX_THREADS = 256


def integer(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` in [low, high] (either bound optional); bools and floats are refused."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    _in_range(name, value, low, high)
    return value


def number(name: str, value: object, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> float:
    """``value`` as a finite ``float`` in [low, high] (or (low, high] with ``low_open``); NaN and ±inf are refused."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low_open and low is not None and value <= low:
        raise ValueError(f"{name} must be greater than {low}, got {value!r}")
    _in_range(name, value, low, high)
    return value


def _in_range(name: str, value: float, low: float | None, high: float | None) -> None:
    if low is not None and value < low:
        raise ValueError(f"{name} must be ≥ {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be ≤ {high}, got {value!r}")


def choice(name: str, value: object, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``."""
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return value


def choices(name: str, values: object, allowed: Iterable[str]) -> tuple[str, ...]:
    """A non-empty sequence of names, each one of ``allowed`` (a single string counts as one name)."""
    options = tuple(allowed)
    items = (values,) if isinstance(values, str) else values
    if not isinstance(items, Iterable):
        raise TypeError(f"{name} must be a sequence of names, got {values!r}")
    items = tuple(items)
    if not items:
        raise ValueError(f"{name} must name at least one of {', '.join(options)}")
    unknown = [item for item in items if not isinstance(item, str) or item not in options]
    if unknown:
        raise ValueError(f"{name}: unknown {unknown[0]!r}; choose from {', '.join(options)}")
    return items


def _path(name: str, value: object) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, got {value!r}")
    text = os.fspath(value)
    if not text or not str(text).strip():
        raise ValueError(f"{name} must be a path, got an empty string")
    return Path(text)


def _nearest_existing(path: Path) -> Path:
    """The path itself or its closest ancestor that exists (the directory a new file would be made under)."""
    current = path.absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _creatable(name: str, path: Path) -> None:
    """Refuse a path whose missing parents cannot be made or whose nearest existing parent is not writable."""
    anchor = _nearest_existing(path.parent)
    if not anchor.is_dir():
        raise ValueError(f"{name}: {anchor} is not a directory, so {path} cannot be created")
    if not _can_create_in(anchor):
        raise ValueError(f"{name}: {anchor} is not writable, so {path} cannot be created")


def _can_create_in(directory: Path) -> bool:
    """Whether a file can be made in ``directory``, by making (and removing) one: permission bits alone do
    not say so for root, read-only mounts or pseudo file systems such as /proc."""
    try:
        handle, probe = tempfile.mkstemp(dir=directory, prefix=".write-check-")
    except OSError:
        return False
    os.close(handle)
    os.unlink(probe)
    return True


def existing_file(name: str, value: object) -> Path:
    """A path to a readable regular file."""
    path = _path(name, value)
    if not path.exists():
        raise ValueError(f"{name}: no such file {path}")
    if not path.is_file():
        raise ValueError(f"{name}: {path} is not a file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{name}: {path} is not readable")
    return path


def existing_dir(name: str, value: object) -> Path:
    """A path to a readable directory."""
    path = _path(name, value)
    if not path.exists():
        raise ValueError(f"{name}: no such directory {path}")
    if not path.is_dir():
        raise ValueError(f"{name}: {path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise ValueError(f"{name}: {path} is not readable")
    return path


def writable_file(name: str, value: object) -> Path:
    """A path where a file can be written: an existing writable file, or a new name in a writable place."""
    path = _path(name, value)
    if path.is_dir():
        raise ValueError(f"{name}: {path} is a directory; name a file")
    if path.exists():
        if not os.access(path, os.W_OK) or not _can_create_in(path.parent):
            raise ValueError(f"{name}: {path} is not writable")
    else:
        _creatable(name, path)
    return path


def writable_dir(name: str, value: object) -> Path:
    """A path where files can be written: an existing writable directory, or a new one in a writable place."""
    path = _path(name, value)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{name}: {path} is a file; name a directory")
        if not _can_create_in(path):
            raise ValueError(f"{name}: {path} is not writable")
    else:
        _creatable(name, path)
    return path


def argparse_type(check: Callable[..., T], flag: str | None = None, convert: Callable[[str], Any] = str,
                  **bounds: Any) -> Callable[[str], T]:
    """An argparse ``type=`` that converts the text with ``convert`` and then applies ``check``; any refusal
    becomes a usage error (exit status 2) naming the value.  With ``flag`` the message names the flag as
    well; without it argparse's own prefix (``argument --flag:``) names the flag."""
    name = flag or "value"

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(convert, "a valid value")
            raise argparse.ArgumentTypeError(f"{flag + ' ' if flag else ''}must be {kind}, got {text!r}") from None
        try:
            return check(name, value, **bounds)
        except (TypeError, ValueError) as exc:
            message = str(exc)
            if flag is None:  # argparse's prefix "argument --flag:" already names it
                message = message.removeprefix(name).removeprefix(":").strip()
            elif name not in message:
                message = f"{name}: {message}"
            raise argparse.ArgumentTypeError(message) from None
    parse.__name__ = getattr(check, "__name__", "value")
    return parse


def torch_device(name: str, value: object) -> str:
    """A torch device this machine has: ``cpu``, or ``cuda``/``cuda:i``/``mps`` where torch sees one.

    torch is imported only when the check runs, so modules that never train (the environment) stay free of it.
    """
    import torch

    if not isinstance(value, str):
        raise TypeError(f"{name} must be a device name such as cpu or cuda, got {value!r}")
    try:
        device = torch.device(value)
    except (RuntimeError, ValueError):
        raise ValueError(f"{name} must be a device such as cpu, cuda or cuda:0, got {value!r}") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{name} {value!r}: torch sees no CUDA GPU on this machine")
        if device.index is not None and device.index >= count:
            raise ValueError(f"{name} {value!r}: torch sees {count} CUDA GPU(s), numbered from 0")
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"{name} {value!r}: torch sees no MPS device on this machine")
    elif device.type != "cpu":
        raise ValueError(f"{name} must be cpu, cuda or mps, got {value!r}")
    return value


def optional_file(name: str, value: object) -> str:
    """``""`` (use the default) or a path to a readable regular file, returned as given."""
    if value == "":
        return ""
    existing_file(name, value)
    return str(value)


def boolean(name: str, value: object) -> bool:
    """``value`` if it is ``True`` or ``False`` (numpy booleans too); 0, 1 and strings are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def path(name: str, value: object) -> Path:
    """A non-empty path (``str`` or ``os.PathLike``), whether or not it exists."""
    return _path(name, value)
