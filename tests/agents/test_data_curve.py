"""The data curve's measurement (``studies.data_curve``) on the synthetic bank."""

from __future__ import annotations

import json

import pytest

from studies.data_curve import run


@pytest.fixture(scope="module")
def scored(bank_dir, fm_checkpoint, trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("data_curve")
    argv = [f"5={fm_checkpoint}", f"12={fm_checkpoint}:{trained.checkpoint}", "--bank", str(bank_dir),
            "--held-out", "6:12", "--loads", "0.3", "--roots", "2", "--episodes", "1", "--out", str(out)]
    assert run(argv) == 0
    return out, argv


def test_every_point_is_scored_on_the_same_val_curves(scored):
    out, _ = scored
    points = json.loads((out / "data_curve.json").read_text())["points"]
    assert sorted(points) == ["12", "5"]
    # the same FM on the same val curves gives the same scores, whatever the point
    assert points["5"]["all_val"] == points["12"]["all_val"]
    assert points["5"]["held_out_val"]["curves"] < points["5"]["all_val"]["curves"]
    slack, learned = points["12"]["success"]["0.3"]["slack"], points["12"]["success"]["0.3"]["learned"]
    assert sorted(slack) == sorted(learned) == ["0", "1"]
    paired = points["12"]["success"]["0.3"]["learned_minus_slack"]
    assert paired["roots"] == 2
    assert paired["mean"] == pytest.approx(sum(learned[r] - slack[r] for r in slack) / 2)
    assert "learned" not in points["5"]["success"]["0.3"]  # a point without members scores FM-slack only


def test_the_table_and_figure_are_written_and_a_rerun_scores_nothing(scored, capsys):
    out, argv = scored
    rows = (out / "data_curve.md").read_text().splitlines()
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| 5", "| 12"]
    assert (out / "data_curve.png").stat().st_size > 0
    before = (out / "data_curve.json").read_text()
    assert run(argv) == 0
    assert "scoring" not in capsys.readouterr().out and (out / "data_curve.json").read_text() == before


def test_a_malformed_point_is_one_line_and_status_2(bank_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        run(["12:fm.pt", "--bank", str(bank_dir), "--out", str(tmp_path)])
    assert stop.value.code == 2 and "must be N=FM.pt[:MEMBER.pt+MEMBER.pt...]" in capsys.readouterr().err
