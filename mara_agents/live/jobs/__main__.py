"""``python -m mara_agents.live.jobs run FILE``: schedule the jobs a Python or TOML file describes, live on Ray.

``python -m mara_agents.live.jobs check FILE`` runs one step of each job here, before any Ray
(:mod:`mara_agents.live.jobs.check`); ``run`` does the same first unless given ``--no-check``.
``python -m mara_agents.live.jobs forecast FILE`` runs each job offline to twice its budget, prints where each
job's series crosses its target alone (and the target that would put the crossing at ``--fraction`` of its
budget), and scores the FM and WLS forecasts on it as Table 1 does (:mod:`mara_agents.live.jobs.forecast`);
``--jobs PATTERN`` keeps the jobs whose names match.
``python -m mara_agents.live.jobs bank SOURCE... --out BANK`` turns recorded runs or job files into a bank with
train/val/test splits that ``train.py fm`` fine-tunes FM on (:mod:`mara_agents.live.jobs.bank`).

Shows the jobs table while they run (``--no-progress`` hides it), then prints the final table, writes the
jobs' bank, the timeline and their outcomes into ``--out`` (default: a new scratch folder, named on the last
line) and replays the decisions in the simulator.  A bad file, field, setting or first step is one line and
exit status 2; a Ray cluster that cannot be reached is one line and exit status 1; Ctrl-C or SIGTERM stops the
jobs, saves what was recorded, says so in one line and exits with status 130.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mara_common.ray_support import require_ray
from mara_agents.allocators.registry import POLICIES
from mara_common.cli import raise_interrupt
from mara_agents.live.jobs.bank import add_bank_command, bank_command, jobs_matching
from mara_agents.live.jobs.check import CheckedJob, check_all, format_checks
from mara_agents.live.jobs.files import JobFileError, load_jobs
from mara_agents.live.jobs.schedule import schedule
from mara_agents.live.jobs.twin import TWIN_POLICIES, complete, load_recorded, run_twin, twin_table
from mara_agents.live.command import writable_folder
from mara_env.live.jobs import Job


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
    run.add_argument("--no-check", action="store_true", help="skip running one step of each job here first")
    run.add_argument("--fm-checkpoint", default="",
                     help="FM checkpoint of the policies that read FM (default: the shipped one)")
    check = commands.add_parser("check", help="run one step of each job here, before any Ray")
    check.add_argument("file", help="a .py or .toml job file")
    twin = commands.add_parser("twin", help="replay recorded jobs in the simulator under many arrival sequences")
    twin.add_argument("folders", nargs="+", help="recorded runs: the --out folders of jobs runs")
    twin.add_argument("--nodes", type=int, nargs="+", default=[2], help="node counts M to compare at")
    twin.add_argument("--loads", type=float, nargs="+", default=[0.2, 0.5], help="arrival probabilities per step")
    twin.add_argument("--sequences", type=int, default=50, help="arrival sequences per load")
    twin.add_argument("--policies", nargs="+", default=list(TWIN_POLICIES), help="allocators to compare")
    twin.add_argument("--seed", type=int, default=0, help="seed of the arrival sequences")
    twin.add_argument("--complete", default=None, metavar="FILE",
                      help="the job file that was run: records that stop short are completed by running it here")
    twin.add_argument("--fm-checkpoint", default="",
                      help="FM checkpoint of the policies that read FM (default: the shipped one)")
    forecast = commands.add_parser("forecast", help="FM and WLS forecast error on the jobs (Table 1's protocol)")
    forecast.add_argument("file", help="a .py or .toml job file")
    forecast.add_argument("--fm-checkpoint", default="", help="FM checkpoint (default: the shipped one)")
    forecast.add_argument("--no-bank", action="store_true", help="leave out the bank's test curves")
    forecast.add_argument("--fraction", type=float, default=0.5,
                          help="print the target that puts each job's crossing at this fraction of its budget")
    forecast.add_argument("--crossings-only", action="store_true", help="print the crossings alone, not Table 1")
    forecast.add_argument("--jobs", nargs="+", default=[], metavar="PATTERN", help="only the jobs matching (globs)")
    add_bank_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (see the module docstring for the exit statuses)."""
    args = _parser().parse_args(argv)
    if args.command == "forecast":
        return _forecast(args)
    if args.command == "check":
        return _check(args.file)
    if args.command == "twin":
        return _twin(args)
    if args.command == "bank":
        return bank_command(args)
    try:
        require_ray("python -m mara_agents.live.jobs")
        jobs = load_jobs(args.file)
        existing_checkpoint(args.fm_checkpoint)
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="mara-jobs-"))
        writable_folder(out, "--out")
    except (ModuleNotFoundError, JobFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.no_check and _checked(jobs, args.file) is None:
        return 2
    try:
        result = schedule(jobs, args.policy, args.nodes, args.address, out=out, max_active=args.max_active,
                          max_steps=args.max_steps, attempts=args.attempts, progress=not args.no_progress,
                          fm_checkpoint=args.fm_checkpoint)
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
    from mara_agents.live.jobs.forecast import crossing_table, forecast_table, offline_losses

    if not 0 < args.fraction <= 2:
        print(f"error: --fraction must be in (0, 2] (of each job's budget), got {args.fraction}", file=sys.stderr)
        return 2
    try:
        jobs = load_jobs(args.file)
        jobs = jobs_matching(jobs, args.jobs, "--jobs") if args.jobs else jobs
    except (JobFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    losses = offline_losses(jobs)
    print(crossing_table(jobs, losses, args.fraction))
    if not args.crossings_only:
        print()
        print(forecast_table(jobs, fm_checkpoint=args.fm_checkpoint, with_bank=not args.no_bank, losses=losses))
    return 0


def _twin(args: argparse.Namespace) -> int:
    """``twin FOLDER ...``: the table of every policy on the recorded jobs; writes nothing."""
    try:
        if any(m < 1 for m in args.nodes):
            raise ValueError(f"--nodes must be positive, got {args.nodes}")
        existing_checkpoint(args.fm_checkpoint)
        recorded = load_recorded(args.folders)
        short = {job.task.family for job in recorded.jobs + recorded.unrecorded if not job.exact}
        if args.complete is not None:
            recorded = complete(recorded, load_jobs(args.complete))
        cells = run_twin(recorded, args.nodes, args.loads, args.sequences, args.policies, args.seed,
                         fm_checkpoint=args.fm_checkpoint)
    except (ValueError, TypeError, RuntimeError) as exc:  # RuntimeError: a checkpoint that does not load
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    completed = sorted(short - {job.task.family for job in recorded.jobs + recorded.unrecorded if not job.exact})
    short = [job.task.family for job in recorded.jobs if not job.exact]
    unrecorded = ", ".join(job.task.family for job in recorded.unrecorded)
    print(f"{len(recorded.jobs)} recorded jobs from {len(args.folders)} folder(s)"
          + (f"; never ran, left out: {unrecorded}" if unrecorded else ""))
    if completed:
        print(f"completed by running {args.complete} here: {', '.join(completed)}")
    print(f"records that stop before their target and budget (continued with their last loss): "
          f"{', '.join(short) if short else 'none'}\n")
    print(twin_table(cells, len(recorded.jobs)))
    return 0


def existing_checkpoint(path: str) -> None:
    """``ValueError`` naming ``--fm-checkpoint`` if it names no file (``""``, the shipped FM, passes)."""
    if path and not Path(path).is_file():
        raise ValueError(f"--fm-checkpoint: no such file {path}")


def _check(file: str) -> int:
    """``check FILE``: the jobs' first steps as a table, or one line per job that cannot run and exit 2."""
    try:
        jobs = load_jobs(file)
    except JobFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    checked = _checked(jobs, file)
    if checked is None:
        return 2
    print(format_checks(checked))
    print(f"{len(checked)} jobs ran one step each here")
    return 0


def _checked(jobs: Sequence[Job], file: str) -> list[CheckedJob] | None:
    """One step of each job run here; ``None``, after one line per job that cannot run, if any cannot."""
    checked = check_all(jobs, file)
    for row in checked:
        if row.problem:
            print(f"error: {row.problem}", file=sys.stderr)
    return None if any(row.problem for row in checked) else checked


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, raise_interrupt)
    raise SystemExit(main())
