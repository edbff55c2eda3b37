"""The typed-in paper numbers line up with the tables we produce, so every published cell gets compared."""

from __future__ import annotations

from mara_agents.evaluation.experiments import ALLOCATION_EXPERIMENTS, Selection, build_grids
from mara_agents.evaluation.grid import Grid
from mara_agents.evaluation.paper import comparison, paper_numbers
from mara_agents.evaluation.predictor_table import COLUMNS
from mara_agents.evaluation.stats import Stat
from mara_agents.predictors.bench import TASK_SETS as PREDICTOR_TASK_SETS
from mara_env.fixed_workloads import EVAL_LOADS, EVAL_TASK_SETS

FULL = Selection(None, (), (*EVAL_TASK_SETS, "stress"), EVAL_LOADS)


def test_every_published_allocation_cell_names_a_row_and_column_of_our_tables():
    grids = build_grids(ALLOCATION_EXPERIMENTS, FULL, rows=[], skipped=set())
    for name, published in paper_numbers().items():
        if name == "table1":
            continue
        for row, cols in published["cells"].items():
            assert row in grids[name].rows, (name, row)
            assert set(cols) <= set(grids[name].cols), (name, row, cols)


def test_every_published_predictor_cell_names_a_row_and_column_of_our_table_1():
    rows = {f"{task_set} {model}" for task_set in PREDICTOR_TASK_SETS for model in ("WLS", "FM")}
    labels = {label for _, label, _, _ in COLUMNS}
    for row, cols in paper_numbers()["table1"]["cells"].items():
        assert row in rows and set(cols) <= labels


def test_the_comparison_puts_ours_beside_the_paper_and_their_difference():
    ours = Grid("table3", "t", "Method", ["MARA"], ["Success rate (%)"])
    ours.set("MARA", "Success rate (%)", Stat(60.0, 1.0, 15))
    grid = comparison({"table3": ours}, {"table3"})
    row = "Table 3 · MARA · Success rate (%)"
    assert grid.get(row, "Paper").mean == 65.0 and grid.get(row, "Ours").mean == 60.0
    assert grid.get(row, "Ours − paper").mean == -5.0
    assert grid.rows == [row]  # published cells outside this run (other methods) are left out


def test_the_reference_allocator_follows_the_papers_methods_and_its_tables_say_it_is_not_the_papers():
    grids = build_grids(ALLOCATION_EXPERIMENTS, FULL, rows=[], skipped=set())
    assert grids["table2"].cols == ["MARA", "MARA-WLS", "LARA", "LARA-FM", "FIFO", "EDF", "FM-slack",
                                    "MAT-IL ensemble (ours)", "MaskablePPO (SB3, third-party)",
                                    "MaskablePPO + FM forecast (SB3, third-party)",
                                    "CleanRL PPO + FM forecast (third-party)", "Oracle", "Clairvoyant"]
    assert "MaskablePPO is a third-party trainer, not in the paper" in grids["table2"].note
    assert "MARA-Forecast-v0" in grids["table2"].note and "MARA-Forecast-v0" in grids["fig4"].note
    # what the forecast buys the same learner, paired by root
    assert "MaskablePPO + FM forecast (SB3, third-party) − MaskablePPO (SB3, third-party)" in \
        grids["paired_third_party"].cols
    assert "MaskablePPO" not in grids["table3"].note + " ".join(grids["table3"].rows)
    assert grids["table3"].rows[6] == "FM-slack" and "MARA − FM-slack" in grids["paired"].cols
    for name in ("table2", "table3", "fig4", "paired"):
        assert "FM-slack is not in the paper" in grids[name].note, name
    for name in ("table2", "table3", "fig4", "table4", "families", "paired", "paired_ours", "paired_third_party"):
        assert "MAT-IL ensemble is ours, not the paper's" in grids[name].note, name
    assert grids["paired_ours"].cols[:2] == ["MAT-IL ensemble (ours) − MARA", "MAT-IL ensemble (ours) − MARA-WLS"]
    assert "MAT-IL ensemble (ours) − FM-slack" in grids["paired_ours"].cols
    assert "MAT-IL" not in grids["table5"].note + " ".join(grids["table5"].cols)
    for name in ("table4", "table5"):  # the paper's method sets only
        assert "FM-slack" not in grids[name].note and "FM-slack" not in grids[name].rows + grids[name].cols
    chosen = Selection(("fifo",), (), FULL.task_sets, FULL.loads)
    assert "FM-slack" not in build_grids(["table2"], chosen, rows=[], skipped=set())["table2"].note
