"""Table 1 from the predictor benchmark: FM is skipped without a checkpoint, results are cached by content."""

from __future__ import annotations

import math

import torch

from mara_agents.evaluation.cache import ResultCache
from mara_agents.evaluation import cli
from mara_agents.evaluation.cli import _table1
from mara_agents.evaluation.grid import markdown
from mara_agents.evaluation.predictor_table import FIGURES, predictor_table
from mara_agents.predictors.fm.model import FlowMatchingModel
from mara_agents.predictors.fm.predictor import save_checkpoint

CHECKPOINT = "mara_agents.predictors.fm.predictor.DEFAULT_CHECKPOINT"


def test_without_an_fm_checkpoint_table_1_has_wls_rows_and_says_fm_was_skipped(bank_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(CHECKPOINT, tmp_path / "absent.pt")
    grid = predictor_table(bank_dir, tmp_path / "out", ResultCache(None))
    assert "ID WLS" in grid.rows and all(row.endswith("WLS") for row in grid.rows)
    assert "FM skipped" in grid.note and "absent.pt" in grid.note
    assert not (tmp_path / "out" / FIGURES[0]).exists()
    assert 0.0 <= grid.get("ID WLS", "Acc. (%)").mean <= 100.0


def test_with_an_fm_checkpoint_the_table_is_cached_and_figure_3_drawn(bank_dir, tmp_path, monkeypatch):
    torch.manual_seed(0)
    checkpoint = tmp_path / "fm.pt"
    save_checkpoint(checkpoint, FlowMatchingModel())
    monkeypatch.setattr(CHECKPOINT, checkpoint)
    cache = ResultCache(tmp_path / "cache.sqlite")
    first = predictor_table(bank_dir, tmp_path / "out", cache)
    assert {"ID WLS", "ID FM"} <= set(first.rows)
    assert all((tmp_path / "out" / name).stat().st_size > 0 for name in FIGURES)
    again = predictor_table(bank_dir, tmp_path / "out", cache)
    assert again.cells == first.cells  # latency included: read back, not re-measured
    mae = first.get("ID FM", "MAE").mean
    assert math.isfinite(mae) and mae >= 0


def test_a_new_fm_checkpoint_redraws_figure_3_that_an_older_one_drew(bank_dir, tmp_path, monkeypatch):
    cache, out = ResultCache(tmp_path / "cache.sqlite"), tmp_path / "out"
    for seed in (0, 1):
        torch.manual_seed(seed)
        checkpoint = tmp_path / f"fm{seed}.pt"
        save_checkpoint(checkpoint, FlowMatchingModel())
        monkeypatch.setattr(CHECKPOINT, checkpoint)
        predictor_table(bank_dir, out, cache)
        if seed == 0:
            drawn = {name: (out / name).read_bytes() for name in FIGURES}
    assert (out / FIGURES[0]).read_bytes() != drawn[FIGURES[0]]  # the forecast panel shows the new FM


def test_table_1_is_computed_in_a_process_of_its_own_and_a_failure_there_is_reported_in_its_note(bank_dir,
                                                                                                 tmp_path, monkeypatch):
    def not_here(*args):
        raise AssertionError("Table 1 computed in the calling process")

    monkeypatch.setattr(cli, "predictor_table", not_here)  # seen by this process only, not by Table 1's own
    cached = tmp_path / "cache.sqlite"
    grid = _table1(bank_dir, tmp_path / "out", cached)
    assert {"ID WLS", "ID FM"} <= set(grid.rows) and not grid.note
    assert markdown(grid) == markdown(predictor_table(bank_dir, tmp_path / "out", ResultCache(cached)))  # cached
    failed = _table1(tmp_path / "no-bank", tmp_path / "out", cached)
    assert not failed.rows and failed.note.startswith("Table 1 skipped — the predictor benchmark failed")
    assert "no-bank" in failed.note
