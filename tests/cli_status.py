"""Run a command's in-process entry point as a user's shell would see it: exit status, stdout and stderr."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest


def exit_status(main: Callable[[list[str]], object], argv: Sequence[str],
                capsys: pytest.CaptureFixture) -> tuple[object, str, str]:
    """(exit status, stdout, stderr) of ``main(argv)``, whether it returns its status or exits through argparse."""
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err
