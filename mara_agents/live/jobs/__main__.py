"""``python -m mara_agents.live.jobs run FILE``: schedule the jobs a Python or TOML file describes, live on Ray.

``python -m mara_agents.live.jobs forecast FILE`` runs each job offline to twice its budget and scores the FM and
WLS forecasts on it as Table 1 does, beside the bank's test curves (:mod:`mara_agents.live.jobs.forecast`).

Shows the jobs table while they run (``--no-progress`` hides it), then prints the final table, writes the
jobs' bank, the timeline and their outcomes into ``--out`` (default: a new scratch folder, named on the last
line) and replays the decisions in the simulator.  A bad file, field or setting is one line and exit status 2;
a Ray cluster that cannot be reached is one line and exit status 1; Ctrl-C or SIGTERM stops the jobs, saves
what was recorded, says so in one line and exits with status 130.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from mara_common.ray_support import require_ray
from mara_agents.allocators.registry import POLICIES
from mara_common.cli import raise_interrupt
from mara_agents.live.jobs.files import JobFileError, load_jobs
from mara_agents.live.jobs.schedule import schedule
from mara_agents.live.command import writable_folder


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mara_agents.live.jobs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="schedule the jobs of a job file")
    run.add_argument("file", help="a .py file defining JOBS, or a .toml job file (docs/jobs.md)")
    run.add_argument("--policy", default="slack-fm", help=f"registered allocator: {', '.join(sorted(POLICIES))}")
    run.add_argument("--nodes", type=int, default=4, help="M, the nodes the allocator shares out")
    run.add_argument("--max-active", type=int, default=10, help="K, job slots the allocator sees")
    run.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    run.add_argument("--attempts", type=int, default=3, help="tries of a step whose worker raised or died")
    run.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    run.add_argument("--out", default=None, help="output folder (default: a new scratch folder)")
    run.add_argument("--no-progress", action="store_true", help="no refreshing jobs table")
    forecast = commands.add_parser("forecast", help="FM and WLS forecast error on the jobs (Table 1's protocol)")
    forecast.add_argument("file", help="a .py or .toml job file")
    forecast.add_argument("--fm-checkpoint", default="", help="FM checkpoint (default: the shipped one)")
    forecast.add_argument("--no-bank", action="store_true", help="leave out the bank's test curves")
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (see the module docstring for the exit statuses)."""
    args = _parser().parse_args(argv)
    if args.command == "forecast":
        return _forecast(args)
    try:
        require_ray("python -m mara_agents.live.jobs")
        jobs = load_jobs(args.file)
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="mara-jobs-"))
        writable_folder(out, "--out")
    except (ModuleNotFoundError, JobFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = schedule(jobs, args.policy, args.nodes, args.address, out=out, max_active=args.max_active,
                          max_steps=args.max_steps, attempts=args.attempts, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"\ninterrupted: stopped the jobs; what was recorded is saved in {out}", file=sys.stderr)
        return 130
    except ConnectionError as exc:
        print(f"error: --address: {exc}", file=sys.stderr)
        return 1
    except (TypeError, ValueError, RuntimeError) as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    print(result.table())
    print(f"wrote {out}/bank, {out}/episode.json and {out}/jobs.json")
    print(out)
    return 0


def _forecast(args: argparse.Namespace) -> int:
    from mara_agents.live.jobs.forecast import forecast_table

    try:
        jobs = load_jobs(args.file)
    except JobFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(forecast_table(jobs, fm_checkpoint=args.fm_checkpoint, with_bank=not args.no_bank))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, raise_interrupt)
    raise SystemExit(main())
