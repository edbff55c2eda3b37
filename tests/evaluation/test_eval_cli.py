"""``python evaluate.py --quick`` end to end on the synthetic bank: structure and sanity of everything it writes."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

from mara_agents.evaluation.experiments import BOUND_NOTE
from mara_agents.evaluation.report import SECTIONS

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
TOY = "eval_toy_policy:ToyPolicy"
SECTION_HEADINGS = dict(SECTIONS)
# Table 1 and Table 5 always use the shipped FM and MAT checkpoints, which would make this smoke test slow;
# they have tests of their own.  skipping unavailable methods is tested in
# test_eval_harness.py.
EXPERIMENTS = ["table2", "table3", "fig4", "table4", "families", "clairvoyant", "compare"]


def page_of(out: Path) -> Path:
    """The Markdown page whose "Results" section a quick run rewrites (in a folder of its own under ``out``)."""
    return out / "pages" / "results.md"


def quick_command(bank_dir: Path, workloads_dir: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)])}
    command = [sys.executable, "evaluate.py", *EXPERIMENTS, "--quick", "--bank", str(bank_dir), "--workloads",
               str(workloads_dir), "--out", str(out), "--methods", "fifo", "edf",
               "--policy", TOY, "--no-progress", "--readme", str(page_of(out))]
    return command, env


@pytest.fixture(scope="module")
def quick_run(bank_dir: Path, workloads_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """One quick run with FIFO, EDF and a user policy (learned methods would make the suite slow)."""
    out = tmp_path_factory.mktemp("results")
    page_of(out).parent.mkdir()
    page_of(out).write_text("# Results page\n\nKept as written.\n")
    command, env = quick_command(bank_dir, workloads_dir, out)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, out


def read_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "episodes.csv") as handle:
        return list(csv.DictReader(handle))


def test_it_prints_table_2_with_every_method_and_both_bounds(quick_run):
    stdout, _ = quick_run
    header = next(line for line in stdout.splitlines() if line.startswith("| Task set"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["Task set", "FIFO", "EDF", "ToyPolicy", "Oracle",
                                                                  "Clairvoyant"]
    for task_set in ("ID", "RL OOD", "ViT OOD", "Average"):
        assert f"| {task_set} |" in stdout


def test_every_episode_row_has_every_metric_and_rates_in_unit_interval(quick_run):
    _, out = quick_run
    rows = read_rows(out)
    cells = {(r["method"], r["task_set"], r["load"], r["root"], r["episode"]) for r in rows}
    assert len(cells) == len(rows)
    methods = {r["method"] for r in rows}
    assert methods == {"fifo", "edf", TOY, "oracle", "clairvoyant"}
    played = [r for r in rows if r["method"] not in ("oracle", "clairvoyant")]
    # 2 roots × 1 episode × (3 task sets × 2 loads + stress) per method
    assert len(played) == 3 * 2 * (3 * 2 + 1)
    for row in played:
        for metric in ("success_rate", "utilisation", "queue_full"):
            assert 0.0 <= float(row[metric]) <= 1.0
        assert float(row["waiting"]) >= 0 and float(row["ready"]) >= 0


def test_oracle_bounds_clairvoyant_bounds_every_method_per_episode(quick_run):
    _, out = quick_run
    successes = defaultdict(dict)
    for row in read_rows(out):
        successes[row["task_set"], row["load"], row["root"], row["episode"]][row["method"]] = float(row["successes"])
    for episode in successes.values():
        assert episode["oracle"] >= episode["clairvoyant"]
        assert all(episode["clairvoyant"] >= value for method, value in episode.items() if method != "oracle")


def test_it_writes_every_table_figure_and_the_summary(quick_run):
    _, out = quick_run
    for name in ("table2", "table3", "table4", "fig4", "families", "clairvoyant", "compare"):
        assert (out / f"{name}.md").read_text().startswith("**")
    assert (out / "fig4_load_generalisation.png").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sanity_violations"] == []
    table2 = summary["grids"]["table2"]
    assert table2["cells"]["Average"]["Oracle"]["runs"] == 2


def test_the_page_gets_a_results_section_with_each_shared_note_once_and_figures_that_resolve(quick_run):
    _, out = quick_run
    page = page_of(out).read_text()
    assert page.startswith("# Results page\n\nKept as written.\n\n## Results\n\nThis run: ")
    assert page.count(BOUND_NOTE) == 1
    assert page.index(BOUND_NOTE) < page.index("### Main results")
    assert "../fig4_load_generalisation.png" in page and (page_of(out).parent / "../fig4_load_generalisation.png").is_file()
    assert BOUND_NOTE in (out / "table2.md").read_text()  # each table's own file keeps its whole note


def test_the_page_shows_the_papers_experiments_and_links_the_other_tables_to_their_files(quick_run):
    _, out = quick_run
    page = page_of(out).read_text()
    headings = [line[4:] for line in page.splitlines() if line.startswith("### ")]
    assert headings == [SECTION_HEADINGS[name] for name in ("table2", "table3", "fig4", "table4")] + [
        "More tables", "Reproduce"]
    linked = re.findall(r"^- \[[^]]+\]\(([^)]+)\)$", page, re.M)
    assert linked == [f"../{name}.md" for name in ("compare", "families", "clairvoyant")]
    for target in linked:  # each link opens the table's own file, note and all
        assert (page_of(out).parent / target).read_text() == (out / Path(target).name).read_text()
    assert "| Table 2 · ID · FIFO |" not in page  # the long tables stay in their files
    assert "(../fig4.md)" in page and "| Load |" not in page  # Figure 4 is its plot, its numbers a link


def read_family_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "families.csv") as handle:
        return list(csv.DictReader(handle))


def test_per_family_outcomes_add_up_to_each_episode_and_stay_within_the_oracle(quick_run):
    _, out = quick_run
    totals = defaultdict(lambda: [0, 0])
    oracle = {}
    for row in read_family_rows(out):
        episode = (row["method"], row["seed"], row["task_set"], row["load"], row["root"], row["episode"])
        totals[episode][0] += int(row["tasks"])
        totals[episode][1] += int(row["successes"])
        if row["method"] == "oracle":
            oracle[episode[2:], row["family"]] = int(row["successes"])
    episodes = read_rows(out)
    assert len(totals) == len(episodes)
    for row in episodes:
        tasks, successes = totals[row["method"], row["seed"], row["task_set"], row["load"], row["root"],
                                  row["episode"]]
        assert (tasks, successes) == (float(row["tasks"]), float(row["successes"]))
    for row in read_family_rows(out):
        assert int(row["successes"]) <= oracle[(row["task_set"], row["load"], row["root"], row["episode"]),
                                                row["family"]]


def test_the_family_table_pools_each_runs_tasks_of_a_family(quick_run):
    _, out = quick_run
    grid = json.loads((out / "summary.json").read_text())["grids"]["families"]
    pooled = defaultdict(lambda: [0, 0])
    for row in read_family_rows(out):
        if row["method"] == "fifo" and row["task_set"] != "stress" and float(row["load"]) == 0.04:
            pooled[row["family"], row["root"]][0] += int(row["tasks"])
            pooled[row["family"], row["root"]][1] += int(row["successes"])
    assert grid["rows"] == sorted({family for family, _ in pooled})
    for family in grid["rows"]:
        shares = [100 * won / tasks for (f, _), (tasks, won) in pooled.items() if f == family and tasks]
        assert grid["cells"][family]["FIFO"]["mean"] == pytest.approx(sum(shares) / len(shares))
        assert grid["cells"][family]["Oracle"]["mean"] >= grid["cells"][family]["FIFO"]["mean"]


def test_the_paper_comparison_lists_published_cells_beside_ours(quick_run):
    _, out = quick_run
    compare = (out / "compare.md").read_text()
    assert "| Table 2 · ID · FIFO | 51.54 ± 4.09 |" in compare
    assert "| Table 3 · EDF · Success rate (%) |" in compare


def test_a_second_run_reuses_the_cache_and_writes_identical_files(quick_run, bank_dir, workloads_dir):
    stdout, out = quick_run
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".csv", ".md", ".json")}
    command, env = quick_command(bank_dir, workloads_dir, out)
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "0 episodes computed" in again.stdout
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".csv", ".md", ".json")}
    assert after == before
