"""Write an evaluation to disk: the per-episode CSV and its per-family split, one Markdown file per table and
summary.json; and the "Results" section that ``evaluate.py --readme docs/results.md`` splices into a page.

Nothing under ``results/`` carries a timestamp or timing, so a rerun on the same inputs writes identical
files; the machine and wall time of a run go only into the spliced README section.  Every file is written
atomically (temporary file, then rename), so an interrupted run never leaves half a table.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mara_common.atomic import atomic_write_text
from mara_agents.evaluation.experiments import SHARED_NOTES
from mara_agents.evaluation.grid import Grid, markdown
from mara_agents.evaluation.harness import METRICS
from mara_agents.evaluation.methods import BOUND_LABELS, Availability, spec_for

IDENTITY = ("method", "label", "seed", "task_set", "load", "root", "episode")
CSV_COLUMNS = (*IDENTITY, *METRICS)
FAMILY_COLUMNS = ("method", "seed", "task_set", "load", "root", "episode", "family", "tasks", "successes")
SECTIONS = (
    ("table2", "Main results (paper Table 2)"),
    ("table3", "Infeasible-task stress test (paper Table 3)"),
    ("fig4", "Load generalisation (paper Figure 4)"),
    ("table4", "Operational diagnostics (paper Table 4)"),
    ("table5", "Dense vs sparse reward (paper Table 5)"),
    ("table1", "Predictor accuracy and latency (paper Table 1, Figure 3)"),
)
LINKED = (
    ("compare", "Paper vs ours: every published cell next to our number"),
    ("paired", "MARA's lead over each method, paired by evaluation root"),
    ("paired_ours", "Our learned allocator (MAT-IL) against every method, paired by evaluation root"),
    ("paired_third_party", "A third-party learner with FM's forecast against the same learner without it and "
                           "the rest, paired by evaluation root"),
    ("families", "Success by task family"),
    ("clairvoyant", "The Clairvoyant bound beside the Oracle and the best method per workload (an exact "
                    "mixed-integer program over the known curves: `mara_agents/evaluation/clairvoyant.py`)"),
)
FIGURES = {"fig4": ("fig4_load_generalisation.png",), "table1": ("fig3a_forecast.png", "fig3b_mae_by_rank.png")}
PLOTTED = ("fig4",)  # given as a figure in the paper: the page shows the figure and links its numbers


REPRODUCE = (
    "`python evaluate.py` reruns every experiment with the shipped checkpoints on the fixed workloads "
    "(`mara_env/workloads/`) and writes `results/`; finished episodes are cached in `results/cache.sqlite`, so an "
    "interrupted run resumes. Name experiments to run only those (`python evaluate.py table2 fig4`); "
    "`--policy NAME=mypkg.mymod:MyPolicy` adds your allocator (`docs/agents.md`); `docs/reproducing.md` has every "
    "flag and the retraining.")


def label_of(method: str) -> str:
    return BOUND_LABELS.get(method) or spec_for(method).label


def sorted_rows(rows: Sequence[dict[str, Any]], order: Sequence[str]) -> list[dict[str, Any]]:
    """Rows in a fixed order: methods as requested, then the bounds; then seed, task set, load, root, episode."""
    rank = {m: i for i, m in enumerate(order)}
    return sorted(rows, key=lambda r: (rank.get(r["method"], len(rank)), r["method"], -1 if r["seed"] is None
                                       else r["seed"], r["task_set"], -1.0 if r["load"] is None else r["load"],
                                       r["root"], r["episode"]))


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One row per (method, training seed, task set, load, root, episode) with every metric."""
    write_table(rows, CSV_COLUMNS, path)


def write_family_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One row per episode and task family: the family's tasks and successes (the bounds' too)."""
    write_table([{**row, "family": family, "tasks": tasks, "successes": successes}
                  for row in rows for family, (tasks, successes) in (row.get("families") or {}).items()],
                 FAMILY_COLUMNS, path)


def write_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], path: Path) -> None:
    """The rows as CSV with ``columns`` (``label``: each method's table label; None as empty), atomically."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({**{k: "" if row.get(k) is None else row[k] for k in columns},
                         "label": label_of(row["method"])})
    atomic_write_text(path, buffer.getvalue())


def skipped_lines(skipped: Sequence[Availability]) -> list[str]:
    """One line per unavailable (method, seed) with the reason."""
    return [f"- {label_of(s.method)} ({s.method}{'' if s.seed is None else f', seed {s.seed}'}): {s.reason}"
            for s in skipped]


def readme_results(grids: dict[str, Grid], skipped: Sequence[Availability], out: Path, command: str,
                   settings: dict[str, Any], readme_dir: Path) -> str:
    """The "Results" section of a page: the paper's tables and figures, links to the other tables, the skipped
    methods and how to reproduce.

    The paper's experiments (:data:`SECTIONS`) are shown in full, a figure of the paper (:data:`PLOTTED`) as its
    plot; the tables a reader seldom needs (:data:`LINKED`) and a plot's numbers are linked to their own files
    under ``out``, so that the page stays short.  The notes many
    shown tables share (:data:`SHARED_NOTES`: the bounds and the methods not in the paper) are given once,
    above them.  Links and figures are relative to ``readme_dir``, the folder of the Markdown file the section
    goes into, so that they resolve there."""
    shown = [(name, heading) for name, heading in SECTIONS if name in grids]
    shared = [note for note in SHARED_NOTES if any(note in grids[name].note for name, _ in shown)]
    parts = ["## Results", "",
             f"Generated by `{command}` ({settings['roots']} roots × {settings['episodes']} episode(s) per task "
             f"set and load; {settings['seeds']} training seed(s) per MAT method). Every number is a mean ± "
             "sample standard deviation over runs: a run is one evaluation root (× training seed for MAT "
             "methods); each run first averages its episodes' success rates, and averages over task sets give "
             "each task set equal weight (paper §5.1). Per-episode data: "
             f"`{_relative(out / 'episodes.csv')}`.", ""]
    if shared:
        parts += ["Methods and bounds in the tables below: " + " ".join(shared), ""]
    if skipped:
        parts += ["Skipped (not available in this checkout):", "", *skipped_lines(skipped), ""]
    for name, heading in shown:
        figures = [f"![{name}]({_link(out / f, readme_dir)})" for f in FIGURES.get(name, ()) if (out / f).is_file()]
        if name in PLOTTED and figures:
            body = [*figures, "", f"The numbers: [{grids[name].title}]({_link(out / f'{name}.md', readme_dir)})."]
        else:
            body = [markdown(replace(grids[name], note=_without(grids[name].note, shared))), *figures]
        parts += [f"### {heading}", "", *body, ""]
    linked = [f"- [{text}]({_link(out / f'{name}.md', readme_dir)})" for name, text in LINKED if name in grids]
    if linked:
        parts += ["### More tables", "", "Each in its own file, with its notes:", "", *linked, ""]
    parts += ["### Reproduce", "", REPRODUCE]
    return "\n".join(parts).rstrip() + "\n"


def _link(path: Path, page_dir: Path) -> str:
    """``path`` as a Markdown link from a page in ``page_dir``."""
    return Path(os.path.relpath(path, page_dir)).as_posix()


def _without(note: str, shared: Sequence[str]) -> str:
    """``note`` with the ``shared`` notes taken out."""
    for text in shared:
        note = note.replace(text, "")
    return re.sub(" {2,}", " ", note).strip()


def _relative(path: Path) -> str:
    return os.path.relpath(path, Path.cwd())


def written_files(out: Path) -> set[Path]:
    """Every file :func:`write_all` and the figures may write under ``out`` (so that no input is named one)."""
    names = {"episodes.csv", "families.csv", "summary.json",
             *(f"{name}.md" for name, _ in (*SECTIONS, *LINKED)), *(f for figures in FIGURES.values() for f in figures)}
    return {out / name for name in names}


def write_all(out: Path, rows: list[dict[str, Any]], grids: dict[str, Grid], skipped: Sequence[Availability],
              problems: Sequence[str], command: str, settings: dict[str, Any]) -> None:
    """Everything under ``out``: episodes.csv, families.csv, <table>.md and summary.json."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "episodes.csv")
    write_family_csv(rows, out / "families.csv")
    for name, grid in grids.items():
        atomic_write_text(out / f"{name}.md", markdown(grid))
    summary = {"command": command, "settings": settings,
               "skipped": [{"method": s.method, "seed": s.seed, "reason": s.reason} for s in skipped],
               "sanity_violations": list(problems),
               "grids": {name: grid.to_json() for name, grid in grids.items()}}
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")


def machine_description() -> str:
    """CPU model and core count, for the README's note on how long a run took."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        model = names[0] if names else model
    return f"{model}, {os.cpu_count()} cores"


def splice_readme(readme: Path, section: str, run_note: str) -> None:
    """Replace ``readme``'s section of the same heading as ``section``'s first line ("## Results", or another
    experiment's; up to the next "## " heading) with ``section``, with ``run_note`` as its first paragraph; the
    section is appended when the README has none."""
    if not readme.is_file():
        raise FileNotFoundError(f"{readme}: README not found (--readme names the file to update)")
    heading, _, body = section.partition("\n")
    new = f"{heading}\n\n{run_note}\n{body}"
    lines = readme.read_text().splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading.rstrip()), None)
    if start is None:
        text = "".join(lines).rstrip("\n") + "\n\n" + new
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = "".join(lines[end:])
        text = "".join(lines[:start]) + new + ("\n" + tail if tail else "")
    atomic_write_text(readme, text)
