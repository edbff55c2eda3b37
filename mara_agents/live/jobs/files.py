"""Job files for ``python -m mara_agents.live.jobs run FILE``: a Python file defining ``JOBS``, or a TOML file.

A **Python** job file is run as a module and must define ``JOBS``, a list of :class:`~mara_env.live.jobs.Job`.

A **TOML** job file lists the jobs and their arrivals; the code stays in Python::

    [defaults]                      # optional: fields every job starts from
    budget = 60
    metric = "cumulative_mean"

    [[job]]
    name = "mlp-a"
    setup = "my_jobs.py:setup_mlp"  # PATH.py:FUNCTION (relative to the TOML file) or module:function
    step = "my_jobs.py:step_mlp"
    data = "my_jobs.py:load_data"   # optional
    target = 0.6
    arrival = 0
    batch_size = 64
    lr = 1e-3

Every other key of a job is a :class:`Job` field (``target``, ``budget``, ``arrival``, ``metric``,
``ema_decay``, ``batch_size``, ``lr``, ``seed``, ``cpus``, ``gpus``, ``step_timeout_s``).  Anything wrong —
a missing file, a syntax error, an unknown key, a bad value — raises :class:`JobFileError` with one line
naming the file and the job.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import tomllib
import traceback
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

from mara_env.live.jobs import Job, check_jobs

CODE_FIELDS = ("setup", "step", "data")
FIELDS = tuple(field.name for field in dataclasses.fields(Job))


class JobFileError(ValueError):
    """A job file that cannot be read or describes invalid jobs (the message is one line naming the file)."""


def load_jobs(path: str | Path) -> tuple[Job, ...]:
    """The jobs a ``.py`` or ``.toml`` job file describes."""
    path = Path(path)
    if not path.is_file():
        raise JobFileError(f"{path}: no such job file")
    if path.suffix == ".toml":
        return _toml_jobs(path)
    if path.suffix == ".py":
        jobs = getattr(_import_file(path), "JOBS", None)
        if jobs is None:
            raise JobFileError(f"{path}: defines no JOBS (a list of mara_agents.live.jobs.Job)")
        try:
            return check_jobs(list(jobs) if isinstance(jobs, (list, tuple)) else jobs)
        except (TypeError, ValueError) as exc:
            raise JobFileError(f"{path}: JOBS: {exc}") from None
    raise JobFileError(f"{path}: a job file is a .py file defining JOBS or a .toml file, got {path.suffix or 'no'} "
                       f"suffix")


def _import_file(path: Path) -> ModuleType:
    """Run a Python file as a module of its own name (registered in ``sys.modules``, so Ray can ship it)."""
    name = f"mara_jobfile_{zlib.crc32(str(path.resolve()).encode()):08x}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise JobFileError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: any error it raises is reported as one line
        del sys.modules[name]
        raise JobFileError(f"{_where(path, exc)}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    return module


def _where(path: Path, exc: BaseException) -> str:
    """``path:LINE``, the line of ``path`` that raised ``exc`` (the last one on its traceback, or a syntax error's
    own line), or ``path`` alone where the file is not on it."""
    resolved = path.resolve()  # a relative path shows up absolute on the traceback
    if isinstance(exc, SyntaxError) and exc.lineno is not None and exc.filename is not None \
            and Path(exc.filename).resolve() == resolved:
        return f"{path}:{exc.lineno}"
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__)
             if Path(frame.filename).resolve() == resolved]
    return f"{path}:{lines[-1]}" if lines else str(path)


def _function(reference: Any, base: Path, where: str) -> Any:
    """The function ``PATH.py:NAME`` (relative to ``base``) or ``module:NAME`` refers to."""
    if not isinstance(reference, str) or reference.count(":") != 1:
        raise JobFileError(f"{where}: expected 'PATH.py:FUNCTION' or 'module:FUNCTION', got {reference!r}")
    source, name = reference.split(":")
    if source.endswith(".py"):
        if not (base / source).is_file():
            raise JobFileError(f"{where}: {base / source} not found (a PATH.py is relative to the TOML file)")
        try:
            module = _import_file(base / source)
        except JobFileError as exc:
            raise JobFileError(f"{where}: {exc}") from None
    else:
        try:
            module = importlib.import_module(source)
        except ImportError as exc:
            raise JobFileError(f"{where}: cannot import {source!r}: {exc}") from None
    if not hasattr(module, name):
        raise JobFileError(f"{where}: {source} has no {name!r}")
    return getattr(module, name)


def _toml_jobs(path: Path) -> tuple[Job, ...]:
    try:
        document = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise JobFileError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(document) - {"defaults", "job"})
    if unknown:
        raise JobFileError(f"{path}: unknown top-level key(s) {unknown}; expected [defaults] and [[job]]")
    defaults, entries = document.get("defaults", {}), document.get("job", [])
    if not isinstance(defaults, dict) or not isinstance(entries, list) or not entries:
        raise JobFileError(f"{path}: expected an optional [defaults] table and at least one [[job]] table")
    jobs = []
    for number, entry in enumerate(entries, 1):
        fields = {**defaults, **entry}
        where = f"{path}: job {number} ({fields.get('name', 'unnamed')!r})"
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise JobFileError(f"{where}: unknown key(s) {unknown}; a job has {', '.join(FIELDS)}")
        missing = [key for key in ("name", "setup", "step", "target", "budget") if key not in fields]
        if missing:
            raise JobFileError(f"{where}: missing {', '.join(missing)}")
        for key in CODE_FIELDS:
            if key in fields:
                fields[key] = _function(fields[key], path.parent, f"{where}: {key}")
        try:
            jobs.append(Job(**fields))
        except (TypeError, ValueError) as exc:
            raise JobFileError(f"{where}: {exc}") from None
    try:
        return check_jobs(jobs)
    except ValueError as exc:
        raise JobFileError(f"{path}: {exc}") from None
