"""``evaluate.py extensions``: every allocator in each setting beyond the paper, beside the Oracle and the
Clairvoyant bound, on the ID test workloads at p = 0.04 and 0.07.

A setting (:mod:`mara_agents.evaluation.extension_settings`) is played by the one harness
(:func:`~mara_agents.evaluation.harness.evaluate`) with its env options and ``fairness_metrics=True``, so its
episodes are cached and resumed like every other experiment's, under keys that name the options.  Per setting
the tables show every hand-written allocator (:data:`HAND_WRITTEN`), the learned allocators the settings file
names for it (a missing checkpoint is refused before any work; one that cannot be built is left out with a
note), the bounds, and the fairness columns: the mean over episodes of the lowest per-family success rate and
of Jain's index over families (``mara_env.fairness``; the bounds' from their per-family outcomes).  The
summary pairs the best learned allocator with the best hand-written one by evaluation root
(:func:`~mara_agents.evaluation.stats.paired_difference`), and gives each one's gap to the Clairvoyant bound,
paired the same way.

Written to ``extensions.csv`` (one row per setting, method and episode), ``extensions.md`` and
``extensions.json``; ``--readme`` splices :data:`HEADING`'s section into a Markdown file, apart from the paper's
"Results" section.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mara_common.atomic import atomic_write_text
from mara_agents.evaluation.extension_settings import NamedSetting, check_checkpoints
from mara_agents.evaluation.grid import Grid, markdown
from mara_agents.evaluation.harness import Settings, evaluate
from mara_agents.evaluation.methods import CLAIRVOYANT, ORACLE
from mara_agents.evaluation.report import label_of, skipped_lines, sorted_rows, write_table
from mara_agents.evaluation.stats import Cell, Stat, paired_difference, paper_stat
from mara_env.fairness import JAIN_KEY, MIN_KEY, jain_index

HAND_WRITTEN = ("fifo", "edf", "lara", "lara-fm", "slack-fm")
LOADS = (0.04, 0.07)
TASK_SET = "id"
HEADING = "## Beyond the paper: node speeds and switching costs"
FAIRNESS = ((MIN_KEY, "min family (%)", 100.0), (JAIN_KEY, "Jain", 1.0))
COLUMNS = ("setting", "method", "label", "seed", "task_set", "load", "root", "episode", "tasks", "successes",
           "success_rate", MIN_KEY, JAIN_KEY, "utilisation", "setup")
FILES = ("extensions.csv", "extensions.md", "extensions.json")
TEXT = ("Settings beyond the paper (docs/research/extensions.md says how they were chosen, on `val` curves only): node "
        "speeds (`node_speeds`, batches per step of each node) and a switching cost (`switch_cost`, setup steps "
        "before a task runs on a node that did not serve it the step before), on the ID test workloads. The "
        "hand-written allocators use their extensions of docs/agents.md; the learned ones were trained with the "
        "setting's options. Fairness: per episode, the lowest success rate over the task families present and "
        "Jain's index over them, averaged over the run's episodes.")


@dataclasses.dataclass
class Played:
    """One setting's rows, the learned allocators played in it, and what was left out and why."""

    setting: NamedSetting
    rows: list[dict[str, Any]]
    hand_written: list[str]
    learned: list[str]
    notes: list[str]


def env_options(setting: NamedSetting) -> tuple[tuple[str, Any], ...]:
    """The harness's env options of a setting, fairness metrics on."""
    return tuple(sorted({**setting.env_options(), "fairness_metrics": True}.items()))


def learned_methods(setting: NamedSetting) -> list[str]:
    """The learned allocators of a setting, as harness policies; a missing checkpoint is a ``ValueError``
    naming it (:func:`~mara_agents.evaluation.extension_settings.check_checkpoints`), never a dropped row."""
    check_checkpoints([setting], "the settings")
    return [entry.import_path() for entry in setting.learned]


def bound_fairness(row: dict[str, Any]) -> dict[str, Any]:
    """A bound's row with the fairness metrics of its per-family outcomes (families without a task left out)."""
    rates = [won / tasks for tasks, won in (row.get("families") or {}).values() if tasks]
    if not rates:
        return {**row, MIN_KEY: float("nan"), JAIN_KEY: float("nan")}
    return {**row, MIN_KEY: min(rates), JAIN_KEY: jain_index(rates)}


def play_setting(setting: NamedSetting, base: Settings, loads: Sequence[float],
                 hand_written: Sequence[str] = HAND_WRITTEN) -> Played:
    """The hand-written allocators and the setting's learned ones, with the bounds, at each load."""
    learned = learned_methods(setting)
    settings = dataclasses.replace(base, env=env_options(setting), strict=False)
    requests = [(method, TASK_SET, load) for method in (*hand_written, *learned) for load in loads]
    results = evaluate(requests, settings)
    skipped = {s.method for s in results.skipped}
    notes = [f"{setting.name}: {line.removeprefix('- ')}" for line in skipped_lines(results.skipped)]
    rows = [{**(bound_fairness(row) if row["method"] in (ORACLE, CLAIRVOYANT) else row), "setting": setting.name}
            for row in sorted_rows(results.rows, [*hand_written, *learned])]
    return Played(setting, rows, [m for m in hand_written if m not in skipped],
                  [m for m in learned if m not in skipped], notes)


def best_of(rows: list[dict[str, Any]], methods: Sequence[str], cell: Cell) -> tuple[str, Stat] | None:
    """The method with the highest mean success in ``cell`` (ties: the later label), with its statistic."""
    stats = [(m, s) for m in methods if (s := paper_stat(rows, m, [cell])) is not None]
    return max(stats, key=lambda item: (item[1].mean, label_of(item[0]))) if stats else None


def setting_grid(played: Played, loads: Sequence[float]) -> Grid:
    """One setting: a row per allocator and bound, success and the fairness columns per load."""
    methods = [*played.hand_written, *played.learned, ORACLE, CLAIRVOYANT]
    cols = [f"{name} p = {load:.2f}" for load in loads for name in ("success (%)", *(f[1] for f in FAIRNESS))]
    grid = Grid(f"extensions_{played.setting.name}", f"{played.setting.name} ({played.setting.describe()}): ID test "
                "workloads, mean ± sample std over roots", "Method", [label_of(m) for m in methods], cols,
                decimals={c: 3 for c in cols if c.startswith("Jain")})
    for method, row in zip(methods, grid.rows):
        for load in loads:
            cell = [(TASK_SET, load)]
            grid.set(row, f"success (%) p = {load:.2f}", paper_stat(played.rows, method, cell))
            for metric, name, scale in FAIRNESS:
                grid.set(row, f"{name} p = {load:.2f}", paper_stat(played.rows, method, cell, metric, scale))
    return grid


def summary_grid(every: Sequence[Played], loads: Sequence[float]) -> Grid:
    """Per setting and load: the best hand-written and the best learned allocator, their difference paired by
    root, and each one's gap to the Clairvoyant bound (paired the same way)."""
    cols = ["best hand-written", "hand-written (%)", "best learned", "learned (%)", "learned − hand-written",
            "Clairvoyant − hand-written", "Clairvoyant − learned"]
    grid = Grid("extensions", "Best learned minus best hand-written allocator per setting, paired by evaluation "
                "root: success-rate points, mean ± sample std over roots", "Setting, load", [], cols,
                note="The best of each kind is the one with the highest mean success in the cell; the differences "
                     "pair its per-root success with the other's on the same episodes. " + " ".join(
                         note for played in every for note in played.notes))
    for played in every:
        for load in loads:
            cell, row = (TASK_SET, load), f"{played.setting.name}, p = {load:.2f}"
            grid.rows.append(row)
            hand, learned = best_of(played.rows, played.hand_written, cell), best_of(played.rows, played.learned, cell)
            for who, offset in ((hand, 0), (learned, 2)):
                grid.set(row, cols[offset], label_of(who[0]) if who else "none")
                grid.set(row, cols[offset + 1], who[1] if who else None)
            if hand:
                grid.set(row, cols[5], paired_difference(played.rows, CLAIRVOYANT, hand[0], [cell]))
            if hand and learned:
                grid.set(row, cols[4], paired_difference(played.rows, learned[0], hand[0], [cell]))
                grid.set(row, cols[6], paired_difference(played.rows, CLAIRVOYANT, learned[0], [cell]))
    return grid


def run_extensions(settings: Sequence[NamedSetting], base: Settings, loads: Sequence[float] = LOADS,
                   hand_written: Sequence[str] = HAND_WRITTEN) -> tuple[list[Played], dict[str, Grid]]:
    """Play every setting and build its table and the summary."""
    every = [play_setting(setting, base, loads, hand_written) for setting in settings]
    grids = {"extensions": summary_grid(every, loads)}
    grids.update({f"extensions_{p.setting.name}": setting_grid(p, loads) for p in every})
    return every, grids


def section(grids: dict[str, Grid], command: str, record: dict[str, Any], episodes_csv: Path) -> str:
    """The Markdown section (:data:`HEADING`): what the settings are, how it was generated, every table."""
    parts = [HEADING, "", TEXT, "", f"Generated by `{command}` ({record['roots']} roots × {record['episodes']} "
             f"episode(s) per load; settings from `{record['settings_file']}`). Per-episode data: "
             f"`{os.path.relpath(episodes_csv, Path.cwd())}`.", ""]
    parts += [markdown(grid) for grid in grids.values()]
    return "\n".join(parts).rstrip() + "\n"


def write_extensions(out: Path, every: Sequence[Played], grids: dict[str, Grid], command: str,
                     record: dict[str, Any]) -> str:
    """extensions.csv, extensions.md and extensions.json under ``out``; returns the Markdown section."""
    out.mkdir(parents=True, exist_ok=True)
    write_table([row for played in every for row in played.rows], COLUMNS, out / "extensions.csv")
    text = section(grids, command, record, out / "extensions.csv")
    atomic_write_text(out / "extensions.md", text)
    summary = {"command": command, "settings": record,
               "setting_options": [p.setting.to_json() for p in every],
               "grids": {name: grid.to_json() for name, grid in grids.items()}}
    atomic_write_text(out / "extensions.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    return text
