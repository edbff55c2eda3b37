"""How every command of the project parses its flags and stops: one-line usage errors, one-line input errors,
and the same end on SIGINT or SIGTERM.

:class:`Parser` prints a refused flag as one line ``error: ...`` with exit status 2 (``--help`` shows the
usage); :func:`parse` returns that status instead of raising ``SystemExit``, so ``main(argv)`` can be called
in-process.  A command's body runs under :func:`run_command`: SIGTERM is turned into the ``KeyboardInterrupt``
that SIGINT raises (and SIGINT is made to raise it too, whatever handler an imported library left behind), so
one ``except KeyboardInterrupt`` (or ``finally``) in the body saves what it can and stops its workers for both
signals; then the command prints one line saying what was kept and exits with :data:`INTERRUPTED` (128 +
SIGINT, the shell's status for Ctrl-C).  Errors the command expects from bad input (a file it cannot use, a
refused setting; :data:`FILE_ERRORS` for commands that only read and write files) are one ``error: ...`` line
and exit status 2.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

INTERRUPTED = 130
USAGE_ERROR = 2


class InputError(ValueError):
    """A file a command reads cannot be used; the message names the file (and the line, for line formats)."""


FILE_ERRORS: tuple[type[BaseException], ...] = (InputError, OSError)  # a file a command cannot read or write


class Parser(argparse.ArgumentParser):
    """``argparse`` whose usage errors are one line, ``error: <flag> ...``, and exit status 2."""

    def error(self, message: str) -> NoReturn:
        found = re.match(r"argument ([^:]+): (.*)", message, re.DOTALL)
        if found and any(flag in found.group(2) for flag in found.group(1).split("/")):
            message = found.group(2)  # the check already named the flag
        self.exit(2, f"error: {message}\n")


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
          check: Callable[[argparse.Namespace], None] | None = None) -> argparse.Namespace | int:
    """The parsed arguments, or the exit status argparse chose (2 for a usage error, 0 after ``--help``).

    ``check(args)`` runs the checks that span flags or need the parsed values; its ``ValueError`` is a usage
    error too.
    """
    try:
        args = parser.parse_args(argv)
        if check is not None:
            try:
                check(args)
            except ValueError as exc:
                parser.error(str(exc))
        return args
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


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
