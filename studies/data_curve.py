"""How much more training data buys: ``python -m studies.data_curve``.

Each *point* is a training-set size: the FM predictor, and the learned allocator's members, trained on the
first N ``train`` curves per ID family (docs/research/data_curve.md gives the protocol and its rules). Every point is
scored on the same ``val`` curves (never ``test``):

* FM's capped MAE and budget-success accuracy, with curve-bootstrap confidence intervals, on all the chosen
  ``val`` curves and, apart, on the held-out index range that no FM selected a step on
  (:mod:`studies.curve_scores`);
* FM-slack's (over that point's FM) and the learned allocator's success on ``val`` workloads of the ID
  mixture at each load, drawn once per bank with the check seed, and the learned allocator minus FM-slack,
  paired by root (mean and t confidence interval over roots; every interval here has level 0.95).

Results go to ``<out>/data_curve.json`` point by point (a rerun skips the points already there), then to
``data_curve.md`` and ``data_curve.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mara_common import checks
from curves.bank import BankError, load_bank
from mara_common.atomic import atomic_write_text
from mara_agents.allocators.registry import make_policy
from mara_agents.play.checkpoints import CheckpointError, bank_checksum
from mara_agents.evaluation.stats import half_width
from mara_common.cli import run_command
from mara_agents.training.validation import CHECK_SEED, validation_workload
from studies.curve_scores import score
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.play.lockstep import evaluate_workload


@dataclass(frozen=True)
class Point:
    """One training-set size: its FM checkpoint and the learned allocator's member checkpoints."""

    train_curves: int
    fm: str
    members: tuple[str, ...]


def parse_point(value: str) -> Point:
    """``N=FM.pt`` or ``N=FM.pt:MEMBER.pt+MEMBER.pt+...``."""
    size, sep, rest = value.partition("=")
    fm, _, members = rest.partition(":")
    if not sep or not size.isdigit() or int(size) < 1 or not fm:
        raise argparse.ArgumentTypeError(f"{value!r} must be N=FM.pt[:MEMBER.pt+MEMBER.pt...]")
    paths = [fm, *(members.split("+") if members else [])]
    for path in paths:
        checks.argparse_type(checks.existing_file)(path)
    return Point(int(size), fm, tuple(paths[1:]))


def fm_scores(bank_dir: Path, point: Point, held_out: range) -> dict[str, Any]:
    """FM's capped MAE and accuracy (with curve-bootstrap intervals) on every ``val`` curve and on ``held_out``."""
    bank, predictor = load_bank(bank_dir), {"FM": load_predictor(point.fm)}
    every = score(bank, predictor, "ID", ("val",))[0][0]
    apart = score(bank, predictor, "ID", ("val",), held_out)[0][0]
    return {"all_val": asdict(every), "held_out_val": asdict(apart)}


def success_by_root(policy: Any, workload: Path, bank_dir: Path) -> dict[int, float]:
    """Per root, the mean success rate (%) of the policy's episodes of a workload."""
    by_root: dict[int, list[float]] = defaultdict(list)
    for row in evaluate_workload(policy, workload, bank=bank_dir):
        by_root[int(row["root"])].append(100.0 * float(row["success_rate"]))
    return {root: float(np.mean(values)) for root, values in sorted(by_root.items())}


def allocator_scores(bank_dir: Path, point: Point, workloads: dict[float, Path]) -> dict[str, Any]:
    """FM-slack's and the learned allocator's success per load, and learned − FM-slack paired by root."""
    slack = make_policy("slack-fm", fm_checkpoint=point.fm)
    learned = (make_policy("mat-il-ens", checkpoints=list(point.members), fm_checkpoint=point.fm)
               if point.members else None)
    out = {}
    for load, workload in workloads.items():
        entry: dict[str, Any] = {"slack": success_by_root(slack, workload, bank_dir)}
        if learned is not None:
            entry["learned"] = success_by_root(learned, workload, bank_dir)
            diff = [entry["learned"][r] - entry["slack"][r] for r in entry["slack"]]
            entry["learned_minus_slack"] = {"mean": float(np.mean(diff)), "half_width": half_width(diff),
                                            "roots": len(diff)}
        out[f"{load:g}"] = entry
    return out


def check_workloads(bank_dir: Path, out: Path, loads: Sequence[float], roots: int, episodes: int) -> dict[float, Path]:
    """The ``val`` workloads of the ID mixture at each load, drawn once from the bank with the check seed."""
    tag = f"{roots}x{episodes}_seed{CHECK_SEED}_bank{bank_checksum(bank_dir)[:10]}"
    return {load: validation_workload(out / f"id_p{load:g}_{tag}.json", str(bank_dir), "id", load, roots, episodes,
                                      CHECK_SEED) for load in loads}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Score every point not yet in ``<out>/data_curve.json``, saving after each; returns all results."""
    path = args.out / "data_curve.json"
    results = json.loads(path.read_text()) if path.is_file() else {"bank": str(args.bank), "points": {}}
    workloads = check_workloads(args.bank, args.out, args.loads, args.roots, args.episodes)
    for point in args.points:
        key = str(point.train_curves)
        if key in results["points"]:
            continue
        print(f"scoring {point.train_curves} train curves per family ...", flush=True)
        results["points"][key] = {"fm_checkpoint": point.fm, "members": list(point.members),
                                  **fm_scores(args.bank, point, args.held_out),
                                  "success": allocator_scores(args.bank, point, workloads)}
        atomic_write_text(path, json.dumps(results, indent=1) + "\n")
    return results


def _interval(entry: dict[str, float]) -> str:
    return f"{entry['value']:.2f} [{entry['low']:.2f}, {entry['high']:.2f}]"


def _over_roots(by_root: dict[str, float]) -> str:
    """Mean success over roots ± the half-width of its t interval."""
    values = list(by_root.values())
    return f"{np.mean(values):.2f} ± {half_width(values):.2f}"


def table(results: dict[str, Any], loads: Sequence[float]) -> str:
    """One row per point: FM's MAE and accuracy (all and held-out ``val``), success per load, learned − slack."""
    head = ["train curves / family", "FM MAE (val)", "FM Acc. % (val)", "FM MAE (held-out)", "FM Acc. % (held-out)"]
    for load in loads:
        head += [f"FM-slack p={load:g}", f"learned p={load:g}", f"learned − FM-slack p={load:g}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for key, point in sorted(results["points"].items(), key=lambda item: int(item[0])):
        cells = [key, _interval(point["all_val"]["mae"]), _interval(point["all_val"]["accuracy"]),
                 _interval(point["held_out_val"]["mae"]), _interval(point["held_out_val"]["accuracy"])]
        for load in loads:
            entry = point["success"][f"{load:g}"]
            cells.append(_over_roots(entry["slack"]))
            if "learned" in entry:
                diff = entry["learned_minus_slack"]
                cells += [_over_roots(entry["learned"]), f"{diff['mean']:+.2f} ± {diff['half_width']:.2f}"]
            else:
                cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: dict[str, Any], loads: Sequence[float], path: Path) -> None:
    """FM's accuracy and MAE, the allocators' success and learned − FM-slack (paired by root), against train
    curves per family (log axis)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = sorted(results["points"].items(), key=lambda item: int(item[0]))
    sizes = np.array([int(key) for key, _ in points])
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, metric, label in ((axes[0], "accuracy", "FM budget-success accuracy (%)"),
                              (axes[1], "mae", "FM capped MAE (batches)")):
        for split, style in (("all_val", "-o"), ("held_out_val", "--s")):
            values = [p[split][metric] for _, p in points]
            mid = np.array([v["value"] for v in values])
            err = np.array([[v["value"] - v["low"] for v in values], [v["high"] - v["value"] for v in values]])
            ax.errorbar(sizes, mid, yerr=err, fmt=style, capsize=3, label=split.replace("_", " "))
        ax.set(xscale="log", xlabel="train curves per ID family", ylabel=label)
        ax.legend()
    for load in loads:
        for who, style in (("slack", "-o"), ("learned", "--s")):
            by_root = [p["success"][f"{load:g}"][who].values() for _, p in points if who in p["success"][f"{load:g}"]]
            if by_root:
                axes[2].errorbar(sizes[:len(by_root)], [np.mean(list(v)) for v in by_root],
                                 yerr=[half_width(list(v)) for v in by_root], fmt=style, capsize=3,
                                 label=f"{'FM-slack' if who == 'slack' else 'learned'} p={load:g}")
        diffs = [p["success"][f"{load:g}"]["learned_minus_slack"] for _, p in points
                 if "learned_minus_slack" in p["success"][f"{load:g}"]]
        if diffs:
            axes[3].errorbar(sizes[:len(diffs)], [d["mean"] for d in diffs], yerr=[d["half_width"] for d in diffs],
                             fmt="-o", capsize=3, label=f"p={load:g}")
    axes[2].set(xscale="log", xlabel="train curves per ID family", ylabel="val success (%), t CI over roots")
    axes[3].axhline(0.0, color="grey", linewidth=0.8)
    axes[3].set(xscale="log", xlabel="train curves per ID family", ylabel="learned − FM-slack (points), paired")
    for ax in axes[2:]:
        ax.legend(fontsize=8)
    for ax in axes:
        ax.minorticks_off()
        ax.set_xticks(sizes, [str(s) for s in sizes])
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    tmp.replace(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studies.data_curve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("points", nargs="+", type=parse_point, metavar="N=FM.pt[:MEMBER.pt+...]",
                        help="a training-set size with its FM and learned-allocator members")
    parser.add_argument("--bank", required=True, type=checks.argparse_type(checks.existing_dir),
                        help="the bank whose val curves every point is scored on")
    parser.add_argument("--held-out", default="10:20", metavar="START:STOP",
                        help="val indices no FM selected a step on (default 10:20)")
    parser.add_argument("--loads", nargs="+", default=[0.04, 0.07],
                        type=checks.argparse_type(checks.number, None, float, low=0.0, high=1.0, low_open=True))
    parser.add_argument("--roots", type=checks.argparse_type(checks.integer, None, int, low=2), default=10)
    parser.add_argument("--episodes", type=checks.argparse_type(checks.integer, None, int, low=1), default=12)
    parser.add_argument("--out", required=True, type=checks.argparse_type(checks.writable_dir))
    parser.add_argument("--threads", type=checks.argparse_type(checks.integer, None, int, low=1), default=1)
    args = parser.parse_args(argv)
    start, _, stop = args.held_out.partition(":")
    if not (start.isdigit() and stop.isdigit() and int(start) < int(stop)):
        parser.error(f"--held-out {args.held_out!r} must be START:STOP with START < STOP")
    args.held_out = range(int(start), int(stop))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    results = measure(args)
    text = table(results, args.loads)
    atomic_write_text(args.out / "data_curve.md", text + "\n")
    plot(results, args.loads, args.out / "data_curve.png")
    print(text)
    print(f"written to {args.out}")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: 0; 2 with one line for an unusable bank, checkpoint or selection; 130 on
    an interruption."""
    return run_command(lambda: main(argv), (BankError, CheckpointError, OSError, ValueError),
                       "the points scored so far are in data_curve.json; rerun to resume")


if __name__ == "__main__":
    sys.exit(run())
