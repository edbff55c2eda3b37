"""Ray is an optional extra (``pip install -e '.[ray]'``; ``make test`` installs it, ``make run`` does not).

Every Ray entry point — curve banks built on Ray, the live backend, the evaluation's ``--ray`` — imports it
through :func:`require_ray`, so a machine without it gets one sentence naming what to install, not a traceback.
"""

from __future__ import annotations

import socket
from types import ModuleType


def require_ray(purpose: str) -> ModuleType:
    """The ``ray`` module, or ModuleNotFoundError saying that ``purpose`` needs the ``ray`` extra."""
    try:
        import ray
    except ImportError as exc:
        raise ModuleNotFoundError(f"{purpose} needs Ray, an optional extra: pip install -e '.[ray]'") from exc
    return ray


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """``ConnectionError`` naming ``address`` unless a TCP connection to it opens within ``timeout`` seconds.

    ``ray.init`` retries an unreachable cluster for minutes; this probe makes a wrong ``HOST:PORT`` (or
    ``ray://HOST:PORT``) fail at once.  ``local`` and ``auto`` (found by Ray itself) are not probed.
    """
    if address in ("local", "auto"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"Ray address {address!r} must look like HOST:PORT, ray://HOST:PORT, local or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} within {timeout:g} s ({exc})") from None
