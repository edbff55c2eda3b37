"""What every example checks at the door, as argparse ``type=`` functions, and where it logs to TensorBoard.

A bad value (``--n-envs 0``, ``--workload /no/such.json``, an ``--out`` that cannot be written) ends the
command with argparse's one-line usage error naming the flag and the value (exit status 2) before any
environment is built or any step is trained.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mara_common import checks

DEFAULT_LOGDIR = Path(__file__).resolve().parents[1] / "runs"  # gitignored
MAX_SEED = 2**32 - 1  # numpy's legacy seeding, which SB3 uses, takes no more


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (no upper bound when ``high`` is None)."""
    return checks.argparse_type(checks.integer, None, int, low=low, high=high)


def number(low: float, high: float | None = None, open_low: bool = False) -> Callable[[str], float]:
    """A finite number in [low, high], or in (low, high] with ``open_low``."""
    return checks.argparse_type(checks.number, None, float, low=low, high=high, low_open=open_low)


def _as_text(check: Callable[[str, object], Path]) -> Callable[[str, object], str]:
    """A path check whose result is the path as text, which env options and JSON manifests take as given."""
    return lambda name, value: str(check(name, value))


seed = integer(0, MAX_SEED)
existing_dir = checks.argparse_type(_as_text(checks.existing_dir))
existing_file = checks.argparse_type(_as_text(checks.existing_file))
# A directory that exists and takes files, or can be made; probed with a real file (read-only mounts, /proc, root).
writable_dir = checks.argparse_type(checks.writable_dir)


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


FORECASTS = ("none", "fm", "wls")
FORECAST_KINDS = ("median", "samples")
forecast = checks.argparse_type(checks.choice, None, str, choices=FORECASTS)
forecast_kind = checks.argparse_type(checks.choice, None, str, choices=FORECAST_KINDS)


BC_EXPERTS = ("slack-fm",)  # experts a learner can clone (FM-slack: mara_agents.training.behaviour_cloning)
bc_expert = checks.argparse_type(checks.choice, None, str, choices=BC_EXPERTS)


def add_forecast_flags(parser: argparse.ArgumentParser) -> None:
    """``--forecast`` and ``--forecast-kind``: train on ``MARA-Forecast-v0`` with a frozen predictor's features."""
    parser.add_argument("--forecast", type=forecast, default="none",
                        help="append this frozen predictor's forecast features (MARA-Forecast-v0); none: MARA-v0")
    parser.add_argument("--forecast-kind", type=forecast_kind, default="median",
                        help="median: 6 + M features per slot; samples (with --forecast fm): 3 more from FM's samples")


def forecast_env(parser: argparse.ArgumentParser, predictor: str, kind: str) -> tuple[str, dict[str, Any]]:
    """(env id, forecast options) of the ``--forecast``/``--forecast-kind`` values; a usage error for a
    combination the env refuses (samples need FM's per-sample estimates)."""
    if kind != "median" and predictor != "fm":
        parser.error(f"--forecast-kind {kind} needs --forecast fm, got --forecast {predictor}")
    if predictor == "none":
        return "MARA-v0", {}
    from mara_agents.envs.forecast import ENV_ID  # importing mara_agents registers it

    return ENV_ID, {"predictor": predictor, "forecast": kind}


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
