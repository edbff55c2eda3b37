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


CONNECT_TIMEOUT_S = 30.0  # a cluster address that accepts no connection in this time is given up


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """``ConnectionError`` naming ``address`` unless a TCP connection to it opens within ``timeout`` seconds.

    ``ray.init`` retries an unreachable cluster for minutes; this probe makes a wrong ``HOST:PORT`` (or
    ``ray://HOST:PORT``) fail at once (a refused port) or after ``timeout`` (a silent host).  ``local`` and
    ``auto`` are resolved by Ray itself and pass.  Every command that takes a Ray address calls this first.
    """
    if address in ("local", "auto"):
        return
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConnectionError(f"Ray address {address!r} must look like HOST:PORT, ray://HOST:PORT, local or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConnectionError(f"nothing answers at {address} ({reason.lower()}); start the cluster with "
                              "`ray start --head` or check the address") from None
