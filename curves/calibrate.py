"""Calibrate each family's ε rules so that feasibility alone is near the paper's 0.7: ``python -m curves.calibrate``.

The default rule places each task's crossing on its own curve (:mod:`curves.targets`); its upper crossing
fraction ``high`` is found per family by bisection on the exact feasibility of the family's ``train`` and
``val`` curves (test curves never inform a choice).  The paper's per-family rules are calibrated too, for
the ``*_paper`` task sets:
ID families keep the paper's form ε = base × U[0.9, 1.1]; ``base`` is found by bisection (feasibility is
monotone in it).  OOD families draw ε log-uniformly from [a, b]; the range's log-width is the inter-quartile
spread of the families' reachable losses (so tasks differ) capped at ×/÷ 1.1, and its position is found by
bisection.  Budget
rules are the paper's (Table 6) and stay fixed: curve lengths depend on them.  The rules go into the manifest
through ``BankWriter.declare_family``; ``--datasheet`` also rewrites the calibration tables in curves/tables.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from curves.bank import DEFAULT_BANK, MANIFEST, SPLITS, BankWriter, CurveBank, load_bank
from mara_common.atomic import atomic_write_text
from mara_common.checks import argparse_type, existing_dir, integer, number, writable_dir, writable_file
from mara_common.cli import FILE_ERRORS, Parser, parse, run_command
from curves.feasibility import (best_losses, crossing_regime, early_feasibility, feasibility, median_loss_drop,
                                per_curve_feasibility)
from curves.targets import CROSSING, CrossingRule

TARGET = 0.70  # the paper's share of tasks feasible alone
# OOD ε ranges span at most ×/÷ 1.1 around their centre, like the ID rule's U[0.9, 1.1]: wider ranges (a family
# whose curves differ a lot) would reach above the first-batch loss and make some tasks trivially feasible.
MAX_HALF_WIDTH = math.log(1.1)
DATASHEET = Path(__file__).resolve().parent / "tables.md"  # the generated tables the datasheet links
START, END = "<!-- calibration:start -->", "<!-- calibration:end -->"
CROSSING_START, CROSSING_END = "<!-- crossing:start -->", "<!-- crossing:end -->"
CHOICE_SPLITS = ("train", "val")


def _bisect(fn: Any, lo: float, hi: float, target: float, iters: int = 80) -> float:
    """Solve fn(x) = target for increasing fn on [lo, hi] (geometric bisection: x is a loss scale)."""
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def calibrate_id(cumavg: list[np.ndarray], budget: dict[str, Any], target: float = TARGET) -> dict[str, Any]:
    """The ``scaled`` ε rule whose feasibility equals ``target``."""
    best = best_losses(cumavg, budget)
    rule = lambda base: {"kind": "scaled", "base": base, "low": 0.9, "high": 1.1}  # noqa: E731
    base = _bisect(lambda b: feasibility(cumavg, rule(b), budget), best.min() / 2, best.max() * 2, target)
    return rule(round(base, 4))


def calibrate_ood(cumavg: list[np.ndarray], budget: dict[str, Any], target: float = TARGET) -> dict[str, Any]:
    """A ``loguniform`` ε rule (inter-quartile log-width, capped) whose feasibility equals ``target``."""
    logs = np.log(best_losses(cumavg, budget))
    half = float(np.clip((np.quantile(logs, 0.75) - np.quantile(logs, 0.25)) / 2, 0.01, MAX_HALF_WIDTH))
    rule = lambda c: {"kind": "loguniform", "low": c * math.exp(-half), "high": c * math.exp(half)}  # noqa: E731
    centre = _bisect(lambda c: feasibility(cumavg, rule(c), budget), math.exp(logs.min()) / 2,
                     math.exp(logs.max()) * 2, target)
    found = rule(centre)
    return {"kind": "loguniform", "low": round(found["low"], 4), "high": round(found["high"], 4)}


def crossing_rule(params: dict[str, Any]) -> CrossingRule:
    """The :class:`CrossingRule` a manifest's ``crossing`` entry describes."""
    return CrossingRule(**params)


def calibrate_crossing(cumavg: list[np.ndarray], budget: dict[str, Any], target: float = TARGET,
                       base: CrossingRule = CROSSING) -> dict[str, Any]:
    """The crossing rule (``base`` with its ``high`` re-fitted) whose exact feasibility equals ``target``.

    Feasibility falls as ``high`` grows (more tasks cross after their deadline).  ``high`` stays ≥ 1, so every
    family keeps tasks that cross late; where even ``high = 1`` gives less than ``target`` (a family whose
    curves often never fall below their first four batches' loss), ``high`` is 1.
    """
    def feasible(high: float) -> float:
        rule = dataclasses.replace(base, high=high)
        return crossing_regime(cumavg, budget, rule, base.early_batches)["feasibility"]
    lo, hi = 1.0, 4.0
    if feasible(lo) > target:
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if feasible(mid) > target else (lo, mid)
    params = dataclasses.asdict(base)
    params["high"] = round((lo + hi) / 2 if lo > 1.0 else 1.0, 4)
    return params


def family_curves(bank: CurveBank, name: str, splits: tuple[str, ...] | None = None,
                  first: Mapping[str, int] | None = None) -> list[np.ndarray]:
    """The family's curves of ``splits`` (default: all; the paper rules apply to every split's tasks), limited
    to the first ``first[split]`` indices of each split ``first`` names."""
    limit = first or {}
    return [bank.cumavg(cid) for cid in bank.ids(name, splits)
            if bank.records[cid].index < limit.get(bank.records[cid].split, math.inf)]


RECORDED = "recorded"
"""``calibrate_bank(first=RECORDED)``: fit each family on the curves its manifest entry names (``calibrated_on``)."""


def calibrate_bank(root: str | Path = DEFAULT_BANK, target: float = TARGET, min_curves: int = 4,
                   first: Mapping[str, int] | str | None = RECORDED) -> list[dict[str, Any]]:
    """Calibrate every family with at least ``min_curves`` curves, write the rules, return one summary row each.

    ``first`` picks the curves the rules are fitted on: ``{split: n}`` (the first ``n`` of each named split,
    recorded as the family's ``calibrated_on``, so that the rules stay put as the bank grows), ``None`` (every
    curve), or :data:`RECORDED` (what each family's manifest entry says, every curve where it says nothing).
    """
    bank = load_bank(root)
    writer = BankWriter(root)
    rows = []
    for name, spec in sorted(bank.families.items()):
        on = spec.calibrated_on if first == RECORDED else first
        curves = family_curves(bank, name, first=on)
        if len(curves) < min_curves or spec.budget is None:
            continue
        eps = (calibrate_id if spec.role == "id" else calibrate_ood)(curves, spec.budget, target)
        choice = family_curves(bank, name, CHOICE_SPLITS, on)
        crossing = calibrate_crossing(choice, spec.budget, target) if choice else None
        spec = dataclasses.replace(spec, eps=eps, crossing=crossing, calibrated_on=dict(on) if on else None)
        writer.declare_family(spec)
        bank.families[name] = spec
        rows.append(summarise(bank, name, eps))
    return rows


def summarise(bank: CurveBank, name: str, eps: dict[str, Any]) -> dict[str, Any]:
    """One calibration-table row for a family under the ε rule ``eps``."""
    spec = bank.families[name]
    curves = family_curves(bank, name)
    per_curve = per_curve_feasibility(curves, eps, spec.budget)
    return {"family": name, "role": spec.role, "curves": len(curves), "eps": eps, "budget": spec.budget,
            "feasibility": feasibility(curves, eps, spec.budget), "curve_spread": float(per_curve.std()),
            "mixed_curves": float(np.mean((per_curve > 0.05) & (per_curve < 0.95))),
            "early": early_feasibility(curves, eps), "loss_drop": median_loss_drop(curves, spec.budget)}


def crossing_rows(root: str | Path = DEFAULT_BANK) -> list[dict[str, Any]]:
    """Per family, the exact task statistics of its crossing rule on train+val curves and on test curves."""
    bank = load_bank(root)
    rows = []
    for name, spec in sorted(bank.families.items()):
        if spec.crossing is None or spec.budget is None:
            continue
        rule = crossing_rule(spec.crossing)
        row: dict[str, Any] = {"family": name, "role": spec.role, "high": rule.high}
        for label, splits in (("choice", CHOICE_SPLITS), ("test", ("test",))):
            curves = family_curves(bank, name, splits)
            row[label] = crossing_regime(curves, spec.budget, rule, rule.early_batches) if curves else None
            row[f"{label}_curves"] = len(curves)
        rows.append(row)
    return rows


def crossing_table(rows: list[dict[str, Any]]) -> str:
    """The datasheet's table of the default (crossing) rule: feasibility, needed/B and early share per split."""
    def cells(stats: dict[str, float] | None) -> str:
        if stats is None:
            return "– | – | –"
        return f"{100 * stats['feasibility']:.1f} | {stats['needed']:.2f} | {100 * stats['early']:.1f}"
    lines = ["| family | role | u range | train+val curves | feasibility (%) | median needed/B | ≤ 4 batches (%) "
             "| test curves | feasibility (%) | median needed/B | ≤ 4 batches (%) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['role'].upper()} | U[{CROSSING.low}, {r['high']:.4f}] | "
                     f"{r['choice_curves']} | {cells(r['choice'])} | {r['test_curves']} | {cells(r['test'])} |")
    return "\n".join(lines)


def current_rows(root: str | Path = DEFAULT_BANK) -> list[dict[str, Any]]:
    """Table rows for the rules already in the manifest (no writing: safe while a build runs)."""
    bank = load_bank(root)
    return [summarise(bank, name, spec.eps) for name, spec in sorted(bank.families.items())
            if spec.eps is not None and bank.ids(name)]


def _fmt_rule(rule: dict[str, Any]) -> str:
    if rule["kind"] == "scaled":
        return f"{rule['base']:.4f} × U[{rule['low']}, {rule['high']}]"
    if rule["kind"] == "loguniform":
        return f"log-U[{rule['low']:.4f}, {rule['high']:.4f}]"
    if rule["kind"] == "interval":
        return f"[{rule['low']}, {rule['high']}]"
    return "{" + ", ".join(str(v) for v in rule["values"]) + "}"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The datasheet's calibration table (a test parses the family, feasibility and ≤ 4 batches columns)."""
    lines = ["| family | role | curves | ε rule | available time | feasibility (%) | per-curve sd | mixed curves (%) "
             "| reached in ≤ 4 batches (%) | loss drop in window (%) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['role'].upper()} | {r['curves']} | {_fmt_rule(r['eps'])} | "
                     f"{_fmt_rule(r['budget'])} | {100 * r['feasibility']:.1f} | {r['curve_spread']:.2f} | "
                     f"{100 * r['mixed_curves']:.0f} | {100 * r['early']:.1f} | {100 * r['loss_drop']:.0f} |")
    return "\n".join(lines)


def replace_block(path: Path, start: str, end: str, body: str) -> None:
    """Replace the text between two marker lines of a Markdown file (appending the block if absent)."""
    block = f"{start}\n{body}\n{end}"
    text = path.read_text() if path.exists() else ""
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    atomic_write_text(path, text)


def write_datasheet(rows: list[dict[str, Any]], crossing: list[dict[str, Any]], path: Path = DATASHEET) -> None:
    """Rewrite the two calibration tables (paper rules, crossing rule) of the datasheet's generated tables."""
    replace_block(path, START, END, markdown_table(rows))
    replace_block(path, CROSSING_START, CROSSING_END, crossing_table(crossing))


def _check_outputs(args: argparse.Namespace) -> None:
    """The bank must hold a manifest, and the files a run writes must be writable before it starts: the bank
    (unless ``--report-only``) and, with ``--datasheet``, curves/tables.md."""
    if not args.report_only:
        writable_dir("--bank", args.bank)
    if not (args.bank / MANIFEST).is_file():
        raise ValueError(f"--bank: {args.bank} holds no curve bank ({MANIFEST} not found)")
    if args.datasheet:
        writable_file("--datasheet", DATASHEET)
    args.calibrate_on = calibration_curves(args.calibrate_on)
    if args.report_only and args.calibrate_on != RECORDED:
        raise ValueError("--calibrate-on needs a calibration; drop --report-only")


def calibration_curves(values: list[str] | None) -> dict[str, int] | str | None:
    """``--calibrate-on``'s value as :func:`calibrate_bank`'s ``first``: ``SPLIT=N`` pairs, ``all`` or nothing."""
    if values is None:
        return RECORDED
    if values == ["all"]:
        return None
    counts: dict[str, int] = {}
    for value in values:
        split, _, count = value.partition("=")
        if split not in SPLITS or split in counts or not count.isdigit():
            raise ValueError(f"--calibrate-on: {value!r} must be SPLIT=N with a split of {SPLITS}, each once, "
                             f"or 'all' alone")
        counts[split] = integer("--calibrate-on", int(count), low=1)
    return counts


def main(argv: list[str] | None = None) -> int:
    """CLI: calibrate, print the table, optionally rewrite the datasheet's table.  Flags and the files they
    name are checked before any work (one line, exit status 2); SIGINT/SIGTERM exits 130."""
    parser = Parser(prog="python -m curves.calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("--bank", default=str(DEFAULT_BANK), type=argparse_type(existing_dir, "--bank"))
    parser.add_argument("--target", default=TARGET, help="feasibility to aim for, in (0, 1)",
                        type=argparse_type(number, "--target", float, low=0.0, high=1.0, low_open=True))
    parser.add_argument("--datasheet", action="store_true", help="rewrite the calibration tables in curves/tables.md")
    parser.add_argument("--report-only", action="store_true",
                        help="tabulate the manifest's current rules without recalibrating (writes no bank file)")
    parser.add_argument("--calibrate-on", nargs="+", default=None, metavar="SPLIT=N",
                        help="fit the rules on the first N curves of each named split and record it, so that "
                             "they stay put as the bank grows (e.g. train=30 val=6 test=24); 'all' fits on "
                             "every curve; default: what each family's manifest entry records")
    args = parse(parser, argv, _check_outputs)
    if isinstance(args, int):
        return args

    def work() -> int:
        rows = current_rows(args.bank) if args.report_only else calibrate_bank(args.bank, args.target,
                                                                              first=args.calibrate_on)
        crossing = crossing_rows(args.bank)
        print("Paper rules (task sets *_paper):")
        print(markdown_table(rows))
        print("\nDefault crossing rule (exact, per split):")
        print(crossing_table(crossing))
        if args.datasheet:
            write_datasheet(rows, crossing)
        return 0

    return run_command(work, FILE_ERRORS,
                       lambda: "each family's rules are written whole as it is calibrated; run the command again "
                               "to calibrate the rest")


if __name__ == "__main__":
    sys.exit(main())
