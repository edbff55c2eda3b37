"""How every command of the project stops: SIGINT and SIGTERM alike, with exit status 130 and one line.

A command's body runs under :func:`run_command`: SIGTERM is turned into the ``KeyboardInterrupt`` that SIGINT
raises (and SIGINT is made to raise it too, whatever handler an imported library left behind), so one ``except KeyboardInterrupt`` (or ``finally``) in the body saves what it can and stops its
workers for both signals; then the command prints one line saying what was kept and exits with
:data:`INTERRUPTED` (128 + SIGINT, the shell's status for Ctrl-C).  Errors the command expects from bad input
(a bad file, a refused setting) are one ``error: …`` line and exit status 2.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable

INTERRUPTED = 130
USAGE_ERROR = 2


def raise_interrupt(_signum: int, _frame: object) -> None:
    """A signal handler that stops the main thread as Ctrl-C does."""
    raise KeyboardInterrupt


def run_command(body: Callable[[], object], errors: tuple[type[BaseException], ...],
                interrupted: str | Callable[[], str]) -> int:
    """Run ``body`` with SIGINT and SIGTERM raising ``KeyboardInterrupt``; returns its exit status (0 when it
    returns anything but an int), 2 after one of ``errors`` (printed as one line), or 130 after SIGINT or
    SIGTERM (printing ``interrupted``, or what it returns).  The previous handlers are restored afterwards."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = ({signum: signal.signal(signum, raise_interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
                if main_thread else {})
    try:
        status = body()
        return status if isinstance(status, int) and not isinstance(status, bool) else 0
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        message = interrupted() if callable(interrupted) else interrupted
        print(f"\ninterrupted: {message}", file=sys.stderr)
        return INTERRUPTED
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
