"""What every example checks at the door, as argparse ``type=`` functions, and where it logs to TensorBoard.

A bad value (``--n-envs 0``, ``--workload /no/such.json``, an ``--out`` that cannot be written) ends the
command with argparse's one-line usage error naming the flag and the value (exit status 2) before any
environment is built or any step is trained.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_LOGDIR = Path(__file__).resolve().parents[1] / "runs"  # gitignored
MAX_SEED = 2**32 - 1  # numpy's legacy seeding, which SB3 uses, takes no more


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (no upper bound when ``high`` is None)."""
    span = f"≥ {low}" if high is None else f"in [{low}, {high}]"

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be an integer {span}, got {text!r}")
        return value

    convert.__name__ = "integer"
    return convert


def number(low: float, high: float = math.inf, open_low: bool = False) -> Callable[[str], float]:
    """A finite number in [low, high], or in (low, high] with ``open_low``."""
    span = f"in {'(' if open_low else '['}{low}, {high}]" if high < math.inf else f"{'>' if open_low else '≥'} {low}"

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number {span}, got {text!r}") from None
        if not math.isfinite(value) or value < low or value > high or (open_low and value == low):
            raise argparse.ArgumentTypeError(f"must be a finite number {span}, got {text!r}")
        return value

    convert.__name__ = "number"
    return convert


seed = integer(0, MAX_SEED)


def existing_dir(text: str) -> str:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"no such directory: {text!r}")
    return text


def existing_file(text: str) -> str:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    return text


def writable_dir(text: str) -> Path:
    """A directory that exists and takes files, or can be made: its nearest existing ancestor takes files.

    Probed by making (and at once removing) a temporary file there, which also catches what permission bits
    cannot show (a read-only mount, ``/proc``, running as root).
    """
    if not text:
        raise argparse.ArgumentTypeError("must name a directory, got '' (it would be the working directory)")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"cannot make {text!r}: {str(ancestor)!r} is a file, not a directory")
    try:
        tempfile.TemporaryFile(dir=ancestor).close()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write under {text!r}: {str(ancestor)!r} takes no new files "
                                         f"({exc.strerror or exc})") from None
    return path


def add_env_flags(parser: argparse.ArgumentParser) -> None:
    """``--bank``, ``--arrival-window`` and ``--seed``, which every training example takes."""
    parser.add_argument("--bank", type=existing_dir, default=None,
                        help="curve bank directory (default: the shipped bank)")
    parser.add_argument("--arrival-window", type=integer(1), default=500,
                        help="T, steps during which tasks arrive")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the envs and the networks")


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The env options the flags of :func:`add_env_flags` set (no ``bank`` key for the shipped bank)."""
    return {"arrival_window": args.arrival_window, **({"bank": args.bank} if args.bank else {})}


def add_logdir(parser: argparse.ArgumentParser) -> None:
    """``--logdir``: where the TensorBoard event files go."""
    parser.add_argument("--logdir", type=writable_dir, default=DEFAULT_LOGDIR,
                        help=f"TensorBoard directory; each run writes a new NAME_N folder in it "
                             f"(default: {DEFAULT_LOGDIR})")


def new_run_dir(logdir: Path, name: str) -> Path:
    """The first ``logdir/name_N`` (N = 1, 2, …) that does not exist yet, as SB3 numbers its runs."""
    index = 1
    while (logdir / f"{name}_{index}").exists():
        index += 1
    return logdir / f"{name}_{index}"


def check_before_work(parser: argparse.ArgumentParser, check: Callable[[], Any]) -> Any:
    """``check()``'s result; typically it builds one environment from the parsed options, so that a setting
    the env refuses (an unreadable workload, an ``--arrival-window`` out of range) ends the command with a
    usage error naming it instead of a traceback after training."""
    try:
        return check()
    except (ValueError, TypeError, OSError) as exc:
        parser.error(str(exc))
