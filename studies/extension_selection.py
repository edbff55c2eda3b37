"""Choose the settings beyond the paper by the rule of ``docs/research/extensions.md``:
``python -m studies.extension_selection select --bank B --fm-checkpoint F --out DIR``.

Every candidate of the rule (:data:`CANDIDATES`: node speeds that keep the default's 7 batches per step on
fewer nodes, and switching costs on the default 7 unit nodes), and the default for reference, is played on
the ID task set's check workloads (``val`` curves drawn with
:data:`~mara_agents.training.validation.CHECK_SEED`, as ``python -m mara_agents.training.validation`` draws them): FIFO,
EDF, LARA over FM, FM-slack and the Clairvoyant bound, at each load.  :func:`choose` then applies the rule per
kind, and the chosen settings — the speeds, the switching cost, and both together — are written as a settings
file (:mod:`mara_agents.evaluation.extension_settings`).

``<out>/selection.json`` is saved after each measurement (a rerun skips what is there); then
``<out>/selection.md`` (the table) and ``<out>/chosen_settings.json``.  No ``test`` workload is played.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mara_common import checks
from curves.bank import BankError
from mara_common.atomic import atomic_write_text
from mara_agents.allocators.registry import POLICIES, make_policy
from mara_agents.play.checkpoints import CheckpointError, bank_checksum
from mara_agents.evaluation.clairvoyant import clairvoyant_successes
from studies.data_curve import check_workloads
from mara_agents.evaluation.extension_settings import NamedSetting, save_settings
from mara_agents.mat.setting import Setting
from mara_common.cli import run_command
from mara_agents.play.lockstep import evaluate_workload
from mara_env.engine import cached_bank, cached_workload
from mara_env.workload import file_checksum

DEFAULT = NamedSetting("default")
SPEEDS, SWITCH = "speeds", "switch cost"
CANDIDATES: dict[str, tuple[NamedSetting, ...]] = {
    SPEEDS: (NamedSetting("speeds-m6", Setting(6, (1, 1, 1, 1, 1, 2))),
             NamedSetting("speeds-m5", Setting(5, (1, 1, 1, 2, 2))),
             NamedSetting("speeds-m4", Setting(4, (1, 1, 1, 4))), NamedSetting("speeds-m3", Setting(3, (1, 2, 4)))),
    SWITCH: (NamedSetting("switch-c1", Setting(switch_cost=1)), NamedSetting("switch-c2", Setting(switch_cost=2)),
             NamedSetting("switch-c4", Setting(switch_cost=4))),
}
HAND_WRITTEN = ("fifo", "edf", "lara-fm", "slack-fm")
RULE_LOAD = 0.04  # the rule reads p = 0.04 only; p = 0.07 is played and shown
SCORES = "measured"  # selection.json's key of the candidates' scores; standards: definition
BAND = (20.0, 80.0)  # best hand-written success (%) must lie in here: neither hopeless nor saturated
NEAR = 1.0  # points of headroom within which the candidate closer to the default wins


@dataclass(frozen=True)
class Candidate:
    """What the rule reads of a candidate: its best hand-written success and its Clairvoyant bound at
    p = 0.04 (%), and how far it is from the default (``num_nodes``, ``switch_cost``)."""

    name: str
    best: float
    bound: float
    num_nodes: int = 7
    switch_cost: int = 0

    @property
    def headroom(self) -> float:
        return self.bound - self.best


def choose(candidates: Sequence[Candidate]) -> Candidate | None:
    """The rule of ``docs/research/extensions.md`` for one kind: of the candidates whose best hand-written success lies
    in :data:`BAND`, the one with the largest headroom — unless one within :data:`NEAR` point of it is closer
    to the default (more nodes, smaller c), which is then chosen (the closest such).  None if none is in band."""
    band = [c for c in candidates if BAND[0] <= c.best <= BAND[1]]
    if not band:
        return None
    top = max(c.headroom for c in band)
    near = [c for c in band if c.headroom >= top - NEAR - 1e-9]
    return min(near, key=lambda c: (-c.num_nodes, c.switch_cost, -c.headroom, c.name))


def _mean(values: Sequence[float]) -> float:
    return float(np.nanmean(values)) if values else float("nan")


def play(name: str, fm: Path, setting: NamedSetting, workload: Path, bank: Path) -> dict[str, Any]:
    """One hand-written allocator's success (%) on a workload in a setting, overall and per root, with the
    fairness metrics' means."""
    policy = make_policy(name, fm_checkpoint=str(fm)) if name.endswith("-fm") else make_policy(name)
    rows = evaluate_workload(policy, workload, bank=bank, fairness_metrics=True, **setting.env_options())
    by_root: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        by_root[int(row["root"])].append(100.0 * row["success_rate"])
    return {"success": _mean([100.0 * r["success_rate"] for r in rows]),
            "by_root": {str(root): _mean(v) for root, v in sorted(by_root.items())},
            "min_family": _mean([100.0 * r["min_family_success_rate"] for r in rows]),
            "jain": _mean([r["jain_index"] for r in rows]),
            "oracle": _mean([100.0 * r["oracle_rate"] for r in rows])}


def bound(setting: NamedSetting, workload: Path, bank: Path) -> float:
    """The Clairvoyant bound's mean success (%) over the workload's episodes, in the setting."""
    curves = cached_bank(str(bank))
    rates = [clairvoyant_successes(ep, curves, setting.num_nodes, setting.node_speeds, setting.switch_cost).mean()
             for ep in cached_workload(str(workload), str(bank)).episodes if len(ep)]
    return 100.0 * _mean(rates)


def every_candidate() -> list[NamedSetting]:
    """The default, then each kind's candidates."""
    return [DEFAULT, *(s for kind in CANDIDATES.values() for s in kind)]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Measure whatever ``<out>/selection.json`` lacks, saving after each measurement; returns all of it."""
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "selection.json"
    inputs = {"bank": str(args.bank), "bank_checksum": bank_checksum(args.bank), "fm_checkpoint": str(args.fm),
              "fm_checksum": file_checksum(args.fm), "roots": args.roots, "episodes": args.episodes,
              "loads": list(args.loads)}
    results = json.loads(path.read_text()) if path.is_file() else {**inputs, SCORES: {}}
    if {key: results.get(key) for key in inputs} != inputs:
        raise ValueError(f"--out {args.out}: selection.json holds scores from other inputs "
                         f"({ {k: results.get(k) for k in inputs if results.get(k) != inputs[k]} }); name another --out")
    workloads = check_workloads(args.bank, args.out, args.loads, args.roots, args.episodes)
    for load in args.loads:  # p = 0.04 first: the rule can be applied before p = 0.07 is done
        for setting in every_candidate():
            entry = results[SCORES].setdefault(setting.name, {}).setdefault(f"{load:g}", {})
            for name in (*HAND_WRITTEN, "clairvoyant"):
                if name in entry:
                    continue
                print(f"{setting.name} ({setting.describe()}), p = {load:g}: {name} ...", flush=True)
                entry[name] = (bound(setting, workloads[load], args.bank) if name == "clairvoyant"
                               else play(name, args.fm, setting, workloads[load], args.bank))
                atomic_write_text(path, json.dumps(results, indent=1) + "\n")
    return results


def best_hand_written(entry: dict[str, Any]) -> tuple[str, float]:
    """The hand-written allocator with the highest success in one measurement, and that success."""
    return max(((name, entry[name]["success"]) for name in HAND_WRITTEN), key=lambda item: (item[1], item[0]))


def candidate(setting: NamedSetting, results: dict[str, Any]) -> Candidate:
    entry = results[SCORES][setting.name][f"{RULE_LOAD:g}"]
    return Candidate(setting.name, best_hand_written(entry)[1], entry["clairvoyant"], setting.num_nodes,
                     setting.switch_cost)


def chosen_settings(results: dict[str, Any]) -> dict[str, NamedSetting | None]:
    """The rule applied per kind, and "both" from the two choices (None where a kind has no candidate in band)."""
    picks: dict[str, NamedSetting | None] = {}
    for kind, settings in CANDIDATES.items():
        pick = choose([candidate(s, results) for s in settings])
        picks[kind] = next((s for s in settings if pick is not None and s.name == pick.name), None)
    speeds, switch = picks[SPEEDS], picks[SWITCH]
    picks["both"] = (NamedSetting("both", Setting(speeds.num_nodes, speeds.node_speeds, switch.switch_cost))
                     if speeds is not None and switch is not None else None)
    return picks


def table(results: dict[str, Any], loads: Sequence[float], picks: dict[str, NamedSetting | None]) -> str:
    """A row per candidate: every allocator's success, the best, the bound and the headroom at each load."""
    head = ["kind", "setting"]
    for load in loads:
        head += [f"{POLICIES[n].label} p={load:g}" for n in HAND_WRITTEN]
        head += [f"best p={load:g}", f"Clairvoyant p={load:g}", f"headroom p={load:g}"]
    lines = ["| " + " | ".join([*head, "in band", "chosen"]) + " |", "|---|---|" + "---:|" * (len(head) - 2) + "---|---|"]
    chosen = {s.name for s in picks.values() if s is not None}
    for kind, settings in (("default", (DEFAULT,)), *CANDIDATES.items()):
        for setting in settings:
            cells = [kind, f"{setting.name}: {setting.describe()}"]
            for load in loads:
                entry = results[SCORES].get(setting.name, {}).get(f"{load:g}", {})
                if not all(name in entry for name in (*HAND_WRITTEN, "clairvoyant")):
                    cells += ["—"] * (len(HAND_WRITTEN) + 3)
                    continue
                best = best_hand_written(entry)[1]
                cells += [f"{entry[n]['success']:.2f}" for n in HAND_WRITTEN]
                cells += [f"{best:.2f}", f"{entry['clairvoyant']:.2f}", f"{entry['clairvoyant'] - best:+.2f}"]
            rule = results[SCORES].get(setting.name, {}).get(f"{RULE_LOAD:g}", {})
            in_band = "clairvoyant" in rule and BAND[0] <= best_hand_written(rule)[1] <= BAND[1]
            picked = setting.name in chosen and kind != "default"
            lines.append("| " + " | ".join([*cells, "yes" if in_band else "no", "**yes**" if picked else ""]) + " |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studies.extension_selection",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    select = commands.add_parser("select", help="measure the candidates on val check workloads and apply the rule")
    select.add_argument("--bank", required=True, type=checks.argparse_type(checks.existing_dir),
                        help="the bank whose val curves the check workloads draw")
    select.add_argument("--fm-checkpoint", dest="fm", required=True, type=checks.argparse_type(checks.existing_file),
                        help="the FM checkpoint LARA-FM and FM-slack read")
    select.add_argument("--out", required=True, type=checks.argparse_type(checks.writable_dir),
                        help="where selection.json, selection.md, chosen_settings.json and the workloads go")
    select.add_argument("--loads", nargs="+", default=[0.04, 0.07],
                        type=checks.argparse_type(checks.number, None, float, low=0.0, high=1.0, low_open=True),
                        help="arrival probabilities (default 0.04 0.07; the rule reads 0.04)")
    select.add_argument("--roots", type=checks.argparse_type(checks.integer, None, int, low=1), default=4,
                        help="roots of each check workload (default 4, as mara_agents.training.validation)")
    select.add_argument("--episodes", type=checks.argparse_type(checks.integer, None, int, low=1), default=12,
                        help="episodes per root (default 12, as mara_agents.training.validation)")
    select.add_argument("--threads", type=checks.argparse_type(checks.integer, None, int, low=1), default=1)
    args = parser.parse_args(argv)
    if RULE_LOAD not in args.loads:
        parser.error(f"--loads {' '.join(f'{p:g}' for p in args.loads)}: must include {RULE_LOAD:g}, the load the "
                     "rule reads")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Score the candidates, apply the rule, print the table and write the chosen settings."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    results = measure(args)
    picks = chosen_settings(results)
    text = table(results, args.loads, picks)
    atomic_write_text(args.out / "selection.md", text + "\n")
    names = {kind: None if s is None else s.name for kind, s in picks.items()}
    chosen = [NamedSetting(kind.replace(" ", "-"), s.setting)
              for kind, s in picks.items() if s is not None]
    save_settings(args.out / "chosen_settings.json", chosen,
                  {"chosen_by": "docs/research/extensions.md, the rule; python -m studies.extension_selection select",
                   "candidates": names})
    print(text)
    print("chosen: " + ", ".join(f"{kind}: {name or 'none in band'}" for kind, name in names.items()))
    print(f"written to {args.out}")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: 0; 2 with one line for an unusable bank, checkpoint or output; 130 on an
    interruption."""
    return run_command(lambda: main(argv), (BankError, CheckpointError, OSError, ValueError),
                       "the measurements so far are in selection.json; rerun to resume")


if __name__ == "__main__":
    sys.exit(run())
