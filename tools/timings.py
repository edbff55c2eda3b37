"""How long the README's commands take: measured wall times kept in ``docs/timings.json``, which the README
quotes through doc-number markers (``<!-- number: docs/timings.json#make run/wall_min -->``).

Each entry records the command, its wall time in seconds (and minutes, as the README writes it), the date, the
commit, a description of the host and, for a test run, how many tests passed.  Two ways to fill one:

    python tools/timings.py run "make run" -- make run      # runs the command here, times it, records it
    python tools/timings.py set ci --command .ci/run --wall-s S --tests N --commit SHA \\
        --date YYYY-MM-DD --host "..."                     # a figure measured elsewhere (a clean clone)
    python tools/timings.py                                  # prints what is recorded

``run`` records only a command that exits 0, and returns its status; the file is rewritten atomically, so an
interrupted command leaves the previous figures.  Bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from doc_links import ROOT

from mara_common.atomic import atomic_write_text

TIMINGS = ROOT / "docs" / "timings.json"
_PASSED = re.compile(r"\b(\d+) passed\b")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def load(path: Path = TIMINGS) -> dict[str, dict[str, Any]]:
    """The recorded entries by name (none when the file does not exist yet)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def entry(command: str, wall_s: float, date: str, host: str, commit: str, tests: int | None) -> dict[str, Any]:
    """One measured figure, with the wall time in whole seconds and in minutes to one decimal."""
    record: dict[str, Any] = {"command": command, "wall_s": round(wall_s), "wall_min": round(wall_s / 60, 1),
                              "date": date, "commit": commit, "host": host}
    if tests is not None:
        record["tests"] = tests
    return record


def record(name: str, value: dict[str, Any], path: Path = TIMINGS) -> None:
    """Write ``value`` under ``name``, keeping the other entries, atomically."""
    entries = load(path)
    entries[name] = value
    atomic_write_text(path, json.dumps(dict(sorted(entries.items())), indent=1, ensure_ascii=False) + "\n")


def tests_passed(output: str) -> int | None:
    """The count of pytest's last "N passed" in ``output``, or None when the command ran no pytest."""
    found = _PASSED.findall(output)
    return int(found[-1]) if found else None


def head_commit() -> str:
    """The checkout's short commit ("unknown" outside git)."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def this_host(note: str) -> str:
    """This machine in words (CPU model and cores), with ``note`` (e.g. "busy") after it."""
    from mara_agents.evaluation.report import machine_description

    return machine_description() + (f", {note}" if note else "")


def run_and_time(command: Sequence[str]) -> tuple[int, float, str]:
    """Run ``command`` in the repository root, echoing its output; its status, wall seconds and output.

    The command runs in a process group of its own; when this process is interrupted or terminated, the group
    gets SIGINT (a command's own clean stop: ``evaluate.py`` keeps its finished episodes) and, if it has not
    ended 30 s later, SIGKILL, so nothing is left running."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    previous = signal.signal(signal.SIGTERM, _interrupted)
    lines = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
        return process.wait(), time.perf_counter() - start, "".join(lines)
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop_group(process)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop_group(process: subprocess.Popen) -> None:
    """SIGINT to ``process``'s group if it still runs, SIGKILL after 30 s."""
    for stop, grace in ((signal.SIGINT, 30.0), (signal.SIGKILL, None)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, stop)
            process.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python tools/timings.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=TIMINGS, help="the timings file (default: docs/timings.json)")
    actions = parser.add_subparsers(dest="action")
    run = actions.add_parser("run", help="run a command here, time it and record it")
    run.add_argument("name", help='the entry, e.g. "make run"')
    run.add_argument("--host-note", default="", help='what else the host was doing, e.g. "busy"')
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    put = actions.add_parser("set", help="record a figure measured elsewhere")
    put.add_argument("name")
    put.add_argument("--command", required=True)
    put.add_argument("--wall-s", type=float, required=True)
    put.add_argument("--date", required=True, help="YYYY-MM-DD")
    put.add_argument("--host", required=True, help="the machine in words, and whether it was busy")
    put.add_argument("--commit", required=True)
    put.add_argument("--tests", type=int, help="tests passed, for a test run")
    return parser


def _problem(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot be recorded, or None."""
    if args.action == "run" and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if args.action == "run" and not args.command:
        return "run: name the command after --"
    if args.action == "run" and shutil.which(args.command[0]) is None \
            and not (ROOT / args.command[0]).is_file():
        return f"run: no such command {args.command[0]!r} (options go before the entry's name)"
    if args.action == "set" and (args.wall_s <= 0 or not _DATE.match(args.date)):
        return f"set: --wall-s must be positive and --date YYYY-MM-DD, got {args.wall_s} and {args.date!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = _problem(args)
    if problem:
        print(f"timings: {problem}", file=sys.stderr)
        return 2
    if args.action == "set":
        record(args.name, entry(args.command, args.wall_s, args.date, args.host, args.commit, args.tests), args.file)
    elif args.action == "run":
        try:  # before the command runs, so that a long run is never timed in vain
            host = this_host(args.host_note)
        except ImportError as exc:
            print(f"timings: {exc}: run it with the project's Python (.venv/bin/python tools/timings.py)",
                  file=sys.stderr)
            return 2
        try:
            status, wall_s, output = run_and_time(args.command)
        except KeyboardInterrupt:
            print(f"timings: interrupted; {' '.join(args.command)} stopped, nothing recorded", file=sys.stderr)
            return 130
        if status != 0:
            print(f"timings: {' '.join(args.command)} exited {status}; nothing recorded", file=sys.stderr)
            return status
        record(args.name, entry(" ".join(args.command), wall_s, datetime.date.today().isoformat(),
                                host, head_commit(), tests_passed(output)), args.file)
    for name, value in load(args.file).items():
        print(f"{name}: {value['wall_s']} s ({value['command']}, {value['date']}, {value['host']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
