"""Ray is an optional extra (``pip install -e '.[ray]'``; ``make test`` installs it, ``make run`` does not).

Every Ray entry point — curve banks built on Ray, the live backend and user jobs, the evaluation's ``--ray`` —
imports it through :func:`require_ray`, so a machine without it gets one sentence naming what to install, not a
traceback, and starts or reaches Ray through :func:`connect`, which fails fast on an address nobody answers.
"""

from __future__ import annotations

import signal
import socket
import threading
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
    ``ray://HOST:PORT``) fail at once (a refused port) or after ``timeout`` (a silent host).  ``auto`` is
    resolved as Ray resolves it (``RAY_ADDRESS``, then a cluster started here); ``local`` passes.
    """
    if address == "local":
        return
    target = address
    if address == "auto":
        from ray._private.services import canonicalize_bootstrap_address

        target = canonicalize_bootstrap_address("auto") or ""
        if not target:
            raise ConnectionError("no running Ray cluster found for address 'auto' (RAY_ADDRESS is unset and "
                                  "none runs here)")
    host, colon, port = target.removeprefix("ray://").rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConnectionError(f"Ray address {address!r} must look like HOST:PORT, ray://HOST:PORT, local or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConnectionError(f"nothing answers at {address} ({reason.lower()}); start the cluster with "
                              "`ray start --head` or check the address") from None


def connect(address: str, num_cpus: int | None = None, purpose: str = "Ray",
            timeout: float = CONNECT_TIMEOUT_S) -> ModuleType:
    """``ray.init`` once and return ``ray``: ``"local"`` starts a new local Ray with ``num_cpus`` logical CPUs
    (never a cluster that ``RAY_ADDRESS`` or a running ``ray start`` happens to name), any other address is
    probed by :func:`check_reachable` and then joined.  Every failure is one ``ConnectionError`` naming the
    address.  The caller's SIGTERM handler is kept: ``ray.init`` installs its own, which would turn SIGTERM
    into a plain exit instead of an interruption.  An already connected Ray is used as it is.
    """
    ray = require_ray(purpose)
    if ray.is_initialized():
        return ray
    main_thread = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        check_reachable(address, timeout)
        ray.init(address=address, num_cpus=num_cpus if address == "local" else None, include_dashboard=False)
    except (ConnectionError, OSError, ValueError, RuntimeError) as exc:
        ray.shutdown()
        where = "start a local Ray" if address == "local" else f"reach the Ray cluster at {address}"
        text = str(exc).strip()
        raise ConnectionError(f"cannot {where}: {text.splitlines()[0] if text else type(exc).__name__}") from None
    except BaseException:
        ray.shutdown()
        raise
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)
    return ray
