"""The FM throughput benchmark prints one line per batch size, on prefixes drawn from the bank's ID curves."""

from __future__ import annotations

import numpy as np
import pytest

from mara_agents.predictors.base import PredictorQuery
from benchmarks.fm_throughput import main, sample_query


def test_prints_a_row_per_batch_size_with_positive_times(tiny_bank, capsys):
    results = main(["--bank", str(tiny_bank), "--rows", "1", "5", "--repeats", "1", "--seconds", "0.01"])
    lines = capsys.readouterr().out.splitlines()
    assert [rows for rows, _, _ in results] == [1, 5]
    assert all(wall > 0 and cpu > 0 for _, wall, cpu in results)
    assert lines[-2].startswith("| 1 |") and lines[-1].startswith("| 5 |")


def test_sampled_prefixes_are_fixed_and_repeat_when_too_few():
    query = PredictorQuery(np.ones((3, 6)), np.array([4, 5, 6]), np.ones(3), np.ones(3), np.ones(3), np.ones(3))
    picked = sample_query(query, 7)
    assert len(picked) == 7 and set(picked.length.tolist()) == {4, 5, 6}
    assert picked.length.tolist() == sample_query(query, 7).length.tolist()


@pytest.mark.parametrize("argv, message", [(["--rows", "0"], "--rows"), (["--repeats", "0"], "--repeats"),
                                           (["--seconds", "0"], "--seconds")])
def test_bad_settings_are_one_clear_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code != 0 and message in capsys.readouterr().err
