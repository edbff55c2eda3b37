"""What every ``python -m curves.X`` command shares: one-line usage errors, and the same end on a bad file or
an interruption.

:class:`Parser` prints a refused flag as one line ``error: ...`` with exit status 2 (``--help`` shows the
usage); :func:`parse` returns that status instead of raising ``SystemExit``, so ``main(argv)`` can be called
in-process.  :func:`run` runs a command's work: a bank, workload or data file it cannot use is one line and
status 2; SIGINT or SIGTERM stops it with status 130 and one line saying what was saved (every bank write is
atomic, so what is saved is whole).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

from curves.bank import BankError
from curves.data.errors import DataMissingError

INTERRUPTED = 130


class InputError(ValueError):
    """A file a command reads cannot be used; the message names the file (and the line, for line formats)."""


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


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run(work: Callable[[], int], saved: Callable[[], str]) -> int:
    """``work()``'s exit status; a :class:`BankError`, :class:`InputError`, missing data set or failed file
    operation is ``error: ...`` and status 2,
    and SIGINT or SIGTERM is ``interrupted: <saved()>`` and status 130."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        return work()
    except (BankError, DataMissingError, InputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: {saved()}", file=sys.stderr)
        return INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
