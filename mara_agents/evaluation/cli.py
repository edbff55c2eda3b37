"""Command line of ``evaluate.py``: choose experiments and cells, run them, print Table 2, write ``results/``.

Every flag is checked before anything runs, and a bad one is one line and exit status 2: counts must be
positive integers within the fixed workloads, methods must be registered or importable policies, the bank and
workloads must be directories, and ``--out``, ``--cache`` and ``--readme`` must be writable.  Only the full
default run (every experiment, method, task set, load, root and episode, on the shipped bank and workloads)
writes the repository's ``results/``; any other run, ``--quick`` included, writes to a new scratch directory
that its last line names, unless ``--out`` is given — so no run replaces shipped results with a part of them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mara_common import checks
from curves.bank import DEFAULT_BANK, BankError
from mara_agents.play.checkpoints import CheckpointError, portable_path
from mara_agents.evaluation.abandon_table import REQUIRED_LOADS, run_abandon, write_abandon
from mara_agents.evaluation.abandon_table import METHODS as ABANDON_METHODS
from mara_agents.evaluation.abandon_table import FILES as ABANDON_FILES
from mara_agents.evaluation.argument_checks import check_abandon_flags, check_seeds
from mara_agents.evaluation.cache import CacheError, ResultCache
from mara_agents.evaluation.experiments import ALLOCATION_EXPERIMENTS, Selection, build_grids, plan
from mara_agents.evaluation.extension_settings import SHIPPED, check_checkpoints, load_settings
from mara_agents.evaluation.extension_table import FILES as EXTENSION_FILES
from mara_agents.evaluation.extension_table import HAND_WRITTEN
from mara_agents.evaluation.extension_table import LOADS as EXTENSION_LOADS
from mara_agents.evaluation.extension_table import run_extensions, write_extensions
from mara_agents.evaluation.figures import plot_load_generalisation
from mara_agents.evaluation.grid import Grid, markdown
from mara_agents.evaluation.harness import MAX_JOBS, Settings, evaluate
from mara_agents.evaluation.methods import MethodError, is_import_path, parse_user_policy, spec_for
from mara_agents.evaluation.paper import comparison
from mara_agents.evaluation.predictor_table import predictor_table
from mara_agents.evaluation.ray_executor import LOCAL, RayEvaluationError, check_reachable, require_ray
from mara_agents.evaluation.report import (machine_description, readme_results, skipped_lines, sorted_rows,
                                           splice_readme, write_all, written_files)
from mara_agents.evaluation.sanity import violations
from mara_agents.evaluation.workers import worker_pool
from mara_env.fixed_workloads import EPISODES_PER_ROOT, EVAL_LOADS, EVAL_TASK_SETS, ROOTS, WORKLOAD_DIR
from mara_env.workload import WorkloadError

EXPERIMENTS = ("table1", "table2", "table3", "fig4", "table4", "table5", "families", "clairvoyant", "compare")
# Run only when named: the settings beyond the paper and the abandon action replay every hand-written allocator
# under options no other experiment plays (so nothing is shared with the paper's tables), too slow for every run.
OPTIONAL_EXPERIMENTS = ("extensions", "abandon")
QUICK = {"roots": 2, "episodes": 1, "loads": (0.04, 0.07), "seeds": 1}
USAGE_EXAMPLES = """
experiments (default: all):
  table1       predictor accuracy and latency, Figure 3          table2   main results at p = 0.04
  table3       infeasible-task stress test                       fig4     load generalisation, p = 0.04 … 0.07
  table4       operational diagnostics over all loads            table5   dense vs sparse reward
  families     success by task family at p = 0.04                clairvoyant  bounds per workload
  compare      paper vs ours, cell by cell
  extensions   node speeds and switching costs (docs/research/extensions.md), p = 0.04 and 0.07; only when named
  abandon      every hand-written allocator with and without abandoning (docs/research/abandon_rules.md), ID test
               workloads, p = 0.04 … 0.07; only when named

examples:
  python evaluate.py                                    # everything, shipped checkpoints and workloads
  python evaluate.py --quick                            # a small smoke test (2 roots × 1 episode, 1 seed)
  python evaluate.py table2 fig4 --methods lara fifo edf
  python evaluate.py table2 --policy mine=mypkg.mymod:MyPolicy:depth=3,greedy=True
"""
# What stops an evaluation with one line and exit status 2 (an unusable input file, method or cache), and what
# an interrupted one says (mara_common.cli.run_command).
ERRORS = (WorkloadError, BankError, MethodError, CheckpointError, CacheError, OSError)
INTERRUPTED = "finished episodes are cached; run the same command again to resume"
RESULTS = Path(__file__).resolve().parents[2] / "results"  # the repository's shipped results


def count(name: str, largest: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer in [1, largest], with a message naming the flag."""
    return checks.argparse_type(checks.integer, name, int, low=1, high=largest)


def user_policy(text: str) -> str:
    """argparse type: a ``--policy`` that parses and whose module and factory can be imported."""
    try:
        parse_user_policy(text).load_factory()
    except MethodError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def method_name(text: str) -> str:
    """argparse type: a registered method or an importable ``[NAME=]module:Factory[:k=v,...]`` policy."""
    if is_import_path(text):
        return user_policy(text)
    try:
        spec_for(text)
    except MethodError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The checked arguments, every count filled in and ``args.out`` chosen (a scratch directory unless the run
    is the full default one or ``--out`` is given); a bad flag exits with one line and status 2."""
    parser = _parser()
    args = parser.parse_args(argv)
    _check_flags(parser, args)
    full = _is_full_default(args) or _is_full_extensions(args) or _is_full_abandon(args)
    quick = QUICK if args.quick else {}
    defaults = {"roots": quick.get("roots", ROOTS), "episodes": quick.get("episodes", EPISODES_PER_ROOT),
                "loads": quick.get("loads", EVAL_LOADS), "seeds": quick.get("seeds")}
    for name, default in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.loads = tuple(args.loads)
    args.scratch = args.out is None and not full
    args.experiments = list(dict.fromkeys(args.experiments or EXPERIMENTS))
    if not args.scratch:  # a new scratch directory holds nothing the user named
        args.out = args.out or RESULTS
        outputs = {path.resolve() for path in written_files(args.out)}
        for flag, path in (("--cache", args.cache), ("--readme", args.readme)):
            if path is not None and path.resolve() in outputs:
                parser.error(f"{flag} {path}: the run writes this file itself under --out {args.out}; name another")
    else:  # made last, so that a refused command leaves no empty directory behind
        args.out = Path(tempfile.mkdtemp(prefix="mara-quick-" if args.quick else "mara-eval-"))
    return args


def _parser() -> argparse.ArgumentParser:
    """``evaluate.py``'s flags, each checked by its argparse type."""
    parser = argparse.ArgumentParser(prog="evaluate.py", description="Evaluate allocators on the fixed workloads "
                                     "and write the paper's tables and figures.", epilog=USAGE_EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="*", metavar="EXPERIMENT",
                        help=f"which experiments to run: {', '.join(EXPERIMENTS)} (default: all), and "
                             f"{', '.join(OPTIONAL_EXPERIMENTS)} (only when named)")
    parser.add_argument("--methods", nargs="+", metavar="NAME", type=method_name,
                        help="methods for Tables 2–4 and Figure 4 instead of the paper's (registered names or "
                             "package.module:Factory), for extensions instead of every hand-written allocator and for "
                             "abandon instead of every hand-written one with and without abandoning; "
                             "Table 5 always compares mara with mara-sparse")
    parser.add_argument("--policy", action="append", default=[], metavar="[NAME=]MODULE:FACTORY[:K=V,...]",
                        type=user_policy,
                        help="also evaluate your own policy: FACTORY(K=V, ...) imported from MODULE (the current "
                             "directory is searched), shown as NAME (repeatable; see docs/agents.md)")
    parser.add_argument("--task-sets", nargs="+", default=[*EVAL_TASK_SETS, "stress"], metavar="SET",
                        choices=[*EVAL_TASK_SETS, "stress"], help="id rl_ood vit_ood stress (default: all)")
    parser.add_argument("--loads", nargs="+", type=float, choices=EVAL_LOADS, metavar="P",
                        help="arrival probabilities among 0.04 0.05 0.06 0.07 (default: all)")
    parser.add_argument("--roots", type=count("--roots", ROOTS),
                        help=f"evaluation roots per workload, first N (default {ROOTS})")
    parser.add_argument("--episodes", type=count("--episodes", EPISODES_PER_ROOT),
                        help=f"episodes per root, first N (default {EPISODES_PER_ROOT})")
    parser.add_argument("--seeds", type=count("--seeds"), help="training seeds per MAT method, first N (default all)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 2 roots × 1 episode, loads 0.04 and 0.07, one training seed; writes to a "
                             "new scratch directory unless --out is given")
    parser.add_argument("--out", type=checks.argparse_type(checks.writable_dir),
                        help="output directory (default: results/ for the full default run, else a new scratch "
                             "directory named on the last line)")
    parser.add_argument("--bank", type=checks.argparse_type(checks.existing_dir), default=DEFAULT_BANK,
                        help="curve bank directory")
    parser.add_argument("--workloads", type=checks.argparse_type(checks.existing_dir),
                        default=WORKLOAD_DIR,
                        help="fixed workload directory")
    parser.add_argument("--cache", type=checks.argparse_type(checks.writable_file),
                        help="result cache (default OUT/cache.sqlite)")
    parser.add_argument("--jobs", type=count("--jobs", MAX_JOBS), default=os.cpu_count() or 1,
                        help=f"worker processes, one thread each (default: all cores, at most {MAX_JOBS}); with "
                             "--ray, the CPUs of a local Ray")
    parser.add_argument("--ray", nargs="?", const=LOCAL, metavar="ADDRESS",
                        help="run the episodes as Ray tasks: on a local Ray, or on the cluster at ADDRESS (auto, "
                             "HOST:PORT, ray://HOST:PORT); same cache and results (docs/ray.md)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--settings", type=checks.argparse_type(checks.existing_file), default=SHIPPED,
                        metavar="FILE",
                        help="the extensions experiment's settings file (default: the shipped "
                             "mara_agents/evaluation/extension_settings.json)")
    parser.add_argument("--readme", type=checks.argparse_type(checks.writable_file), metavar="FILE",
                        help="also replace FILE's '## Results' section with this run's (with machine and wall time); "
                             "extensions replaces a section of its own")
    return parser


def _check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The checks argparse's types cannot make alone: experiment names, ``--ray``, ``--readme``, and the
    extensions experiment's loads and settings file."""
    known = (*EXPERIMENTS, *OPTIONAL_EXPERIMENTS)
    unknown = [e for e in args.experiments if e not in known]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; choose from {', '.join(known)}")
    if args.ray in known:  # `--ray table2`: the experiment, not an address
        args.experiments.append(args.ray)
        args.ray = LOCAL
    if args.ray is not None:
        try:
            require_ray()
        except RayEvaluationError as exc:
            parser.error(str(exc))
    if args.seeds is not None:
        check_seeds(parser, args.seeds, args.methods)
    if args.readme is not None and not args.readme.is_file():
        parser.error(f"--readme {args.readme}: no such file (name the README whose Results section to replace)")
    check_abandon_flags(parser, args)
    if "extensions" in args.experiments:
        if args.loads and not set(args.loads) & set(EXTENSION_LOADS):
            parser.error(f"--loads {' '.join(map(str, args.loads))}: the extensions experiment reports p = "
                         f"{' and '.join(map(str, EXTENSION_LOADS))}; select at least one of them")
        try:
            check_checkpoints(load_settings(args.settings), str(args.settings))
        except ValueError as exc:
            parser.error(f"--settings: {exc}")


def _is_full_default(args: argparse.Namespace) -> bool:
    """Whether the run covers exactly the default grid on the shipped inputs: only such a run writes results/."""
    return (set(args.experiments) in (set(), set(EXPERIMENTS)) and not args.methods and not args.policy
            and not args.quick and set(args.task_sets) == {*EVAL_TASK_SETS, "stress"}
            and (args.loads is None or set(args.loads) == set(EVAL_LOADS))
            and args.roots in (None, ROOTS) and args.episodes in (None, EPISODES_PER_ROOT) and args.seeds is None
            and Path(args.bank).resolve() == Path(DEFAULT_BANK).resolve()
            and Path(args.workloads).resolve() == Path(WORKLOAD_DIR).resolve())


def _is_full_extensions(args: argparse.Namespace) -> bool:
    """Whether the run is the extensions experiment alone, on its whole default grid and the shipped inputs: such
    a run writes its own files (and only those) under results/."""
    return (args.experiments == ["extensions"] and not args.methods and not args.policy and not args.quick
            and (args.loads is None or set(EXTENSION_LOADS) <= set(args.loads))
            and args.roots in (None, ROOTS) and args.episodes in (None, EPISODES_PER_ROOT)
            and Path(args.settings).resolve() == SHIPPED.resolve()
            and Path(args.bank).resolve() == Path(DEFAULT_BANK).resolve()
            and Path(args.workloads).resolve() == Path(WORKLOAD_DIR).resolve())


def _is_full_abandon(args: argparse.Namespace) -> bool:
    """Whether the run is the abandon experiment alone with every allocator, root and episode, at least at the
    :data:`REQUIRED_LOADS`, on the shipped inputs: such a run writes its own files (and only those) under
    results/."""
    return (args.experiments == ["abandon"] and not args.methods and not args.policy and not args.quick
            and (args.loads is None or set(REQUIRED_LOADS) <= set(args.loads))
            and args.roots in (None, ROOTS) and args.episodes in (None, EPISODES_PER_ROOT)
            and Path(args.bank).resolve() == Path(DEFAULT_BANK).resolve()
            and Path(args.workloads).resolve() == Path(WORKLOAD_DIR).resolve())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen experiments; returns the process exit status (1 if an invariant was violated)."""
    args = parse_args(argv)
    start = time.perf_counter()
    if args.ray not in (None, LOCAL):
        try:
            check_reachable(args.ray)
        except RayEvaluationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    ResultCache(args.cache or args.out / "cache.sqlite").close()  # an unusable cache fails here, before any work
    command = " ".join(["python evaluate.py", *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    try:
        status = _paper_experiments(args, command, start) if set(args.experiments) - set(OPTIONAL_EXPERIMENTS) else 0
        if "extensions" in args.experiments:
            status = max(status, _extensions(args, command, start))
        if "abandon" in args.experiments:
            status = max(status, _abandon(args, command, start))
    except RayEvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return status


def _extensions(args: argparse.Namespace, command: str, start: float) -> int:
    """The extensions experiment: every setting of ``--settings`` played, its files written under ``--out``."""
    loads = tuple(p for p in sorted(args.loads) if p in EXTENSION_LOADS)
    settings = Settings(args.bank, args.workloads, args.roots, args.episodes, None, args.jobs,
                        args.cache or args.out / "cache.sqlite", progress=not args.no_progress, ray=args.ray)
    every, grids = run_extensions(load_settings(args.settings), settings, loads, args.methods or HAND_WRITTEN)
    record = {"roots": args.roots, "episodes": args.episodes, "loads": list(loads),
              "bank": portable_path(args.bank), "workloads": portable_path(args.workloads),
              "settings_file": portable_path(args.settings)}
    text = write_extensions(args.out, every, grids, command, record)
    problems = [problem for played in every for problem in violations(played.rows)]
    print(markdown(grids["extensions"]))
    for problem in problems:
        print(f"INVARIANT VIOLATED: {problem}")
    elapsed = time.perf_counter() - start
    if args.readme:
        splice_readme(args.readme, text, f"This run: {elapsed / 60:.1f} min wall time on {machine_description()} "
                                         f"with {settings.jobs} worker process(es).")
    print(f"extensions: results in {args.out}/ ({', '.join(EXTENSION_FILES)}; {elapsed:.1f} s)")
    return 1 if problems else 0


def _abandon(args: argparse.Namespace, command: str, start: float) -> int:
    """The abandon experiment: every allocator with and without abandoning, its files written under ``--out``."""
    settings = Settings(args.bank, args.workloads, args.roots, args.episodes, None, args.jobs,
                        args.cache or args.out / "cache.sqlite", progress=not args.no_progress, ray=args.ray)
    loads = tuple(sorted(args.loads))
    rows, grids, numbers, notes = run_abandon(settings, loads, args.methods or ABANDON_METHODS)
    record = {"roots": args.roots, "episodes": args.episodes, "loads": list(loads),
              "bank": portable_path(args.bank), "workloads": portable_path(args.workloads)}
    write_abandon(args.out, rows, grids, numbers, notes, command, record)
    problems = violations(rows)
    print(markdown(grids["abandon"]))
    for problem in problems:
        print(f"INVARIANT VIOLATED: {problem}")
    print(f"abandon: results in {args.out}/ ({', '.join(ABANDON_FILES)}; {time.perf_counter() - start:.1f} s)")
    return 1 if problems else 0


def _paper_experiments(args: argparse.Namespace, command: str, start: float) -> int:
    """The paper's experiments (and ours beside them): evaluate, write results, print Table 2."""
    selection = Selection(tuple(args.methods) if args.methods else None, tuple(args.policy), tuple(args.task_sets),
                          tuple(sorted(args.loads)))
    settings = Settings(args.bank, args.workloads, args.roots, args.episodes, args.seeds, args.jobs,
                        args.cache or args.out / "cache.sqlite", progress=not args.no_progress, strict=True,
                        ray=args.ray)
    results = evaluate(plan(args.experiments, selection), settings)
    grids = build_grids(args.experiments, selection, results.rows, {s.method for s in results.skipped
                                                                     if not _has_rows(results.rows, s.method)})
    if "table1" in args.experiments:
        grids["table1"] = _table1(args.bank, args.out, settings.cache)
    if "fig4" in grids:
        plot_load_generalisation(grids["fig4"], list(selection.loads), args.out / "fig4_load_generalisation.png")
    if "compare" in args.experiments:
        at_paper_load = selection.main_load == 0.04
        grids["compare"] = comparison(grids, {n for n in grids if n not in ("table2", "table5") or at_paper_load})
    problems = violations(results.rows)
    record = {"roots": args.roots, "episodes": args.episodes, "seeds": args.seeds or "all",
              "task_sets": list(selection.task_sets), "loads": list(selection.loads),
              "bank": portable_path(args.bank), "workloads": portable_path(args.workloads)}
    rows = _ordered(results.rows, selection, args.experiments)
    write_all(args.out, rows, grids, results.skipped, problems, command, record)

    if "table2" in grids:
        print(markdown(grids["table2"]))
    if results.skipped:
        print("Skipped:\n" + "\n".join(skipped_lines(results.skipped)) + "\n")
    if "table1" in grids and grids["table1"].note:
        print(grids["table1"].note + "\n")
    for problem in problems:
        print(f"INVARIANT VIOLATED: {problem}")
    elapsed = time.perf_counter() - start
    if args.readme:
        splice_readme(args.readme, readme_results(grids, results.skipped, args.out, command, record,
                                                    args.readme.resolve().parent),
                      f"This run: {elapsed / 60:.1f} min wall time on {machine_description()} with {settings.jobs} "
                      f"worker process(es); {results.computed} episodes computed, {results.reused} reused from "
                      f"the cache.")
    where = (" — a scratch directory, as this run covers part of the default grid (--out chooses the place)"
             if args.scratch else "")
    print(f"{results.computed} episodes computed, {results.reused} reused from the cache; "
          f"results in {args.out}/ ({elapsed:.1f} s){where}")
    return 1 if problems else 0


def _table1(bank: Path, out: Path, cache_path: Path) -> Grid:
    """Table 1, or an empty table saying why the predictor benchmark could not run (the rest still reports).

    The benchmark runs in a process of its own: it is the largest step this process would take, and its memory
    is returned when that process ends.
    """
    try:
        with worker_pool(1) as pool:
            return pool.submit(compute_table1, bank, out, cache_path).result()
    except Exception as exc:  # noqa: BLE001 — reported in the table; must not lose the other experiments
        return Grid("table1", "Table 1. Remaining-resource prediction", "Task set / model", [], [],
                    note=f"Table 1 skipped — the predictor benchmark failed: {type(exc).__name__}: {exc}")


def compute_table1(bank: Path, out: Path, cache_path: Path) -> Grid:
    """:func:`predictor_table` with the result cache at ``cache_path``: what Table 1's process runs."""
    cache = ResultCache(cache_path)
    try:
        return predictor_table(bank, out, cache)
    finally:
        cache.close()


def _has_rows(rows: list[dict], method: str) -> bool:
    """A method with some seeds available is shown from those seeds, not as skipped."""
    return any(r["method"] == method for r in rows)


def _ordered(rows: list[dict], selection: Selection, experiments: Sequence[str]) -> list[dict]:
    """CSV order: methods as the experiments list them, then the bounds."""
    order = [m for e in experiments if e in ALLOCATION_EXPERIMENTS for m in selection.methods_for(e)]
    return sorted_rows(rows, list(dict.fromkeys(order)))
