"""Ray is an optional extra (``pip install -e '.[ray]'``; ``make test`` installs it, ``make run`` does not).

Every Ray entry point — curve banks built on Ray, the live backend, the evaluation's ``--ray`` — imports it
through :func:`require_ray`, so a machine without it gets one sentence naming what to install, not a traceback.
"""

from __future__ import annotations

from types import ModuleType


def require_ray(purpose: str) -> ModuleType:
    """The ``ray`` module, or ModuleNotFoundError saying that ``purpose`` needs the ``ray`` extra."""
    try:
        import ray
    except ImportError as exc:
        raise ModuleNotFoundError(f"{purpose} needs Ray, an optional extra: pip install -e '.[ray]'") from exc
    return ray
