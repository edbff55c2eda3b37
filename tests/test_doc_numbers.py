"""Doc numbers (tools/doc_numbers.py): every marked figure and generated block in the tracked Markdown agrees
with the generated file it names, and a disagreement is named by file and line."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from doc_numbers import disagreements, marker_problem, source_value, write_blocks  # noqa: E402

CELL = "results/summary.json#grids/paired/cells/Average/MARA − LARA"


def _repository(tmp_path: Path) -> Path:
    (tmp_path / "results").mkdir()
    cells = {"Average": {"MARA − LARA": {"mean": 5.4963, "std": 0.9829, "runs": 5}}}
    (tmp_path / "results" / "summary.json").write_text(json.dumps({"grids": {"paired": {"cells": cells}}}))
    (tmp_path / "results" / "table2.md").write_text(
        "**Table 2. Title**\n\n| Task set | A | B | C | D | E |\n|---|---:|---:|---:|---:|---:|\n"
        "| ID | 1.00 | 2.00 | 3.00 | 4.00 | 5.00 |\n\nA note.\n")
    return tmp_path


def test_every_doc_number_and_generated_block_agrees_with_its_source():
    problems = [str(d) for d in disagreements(ROOT)]
    assert not problems, "doc numbers that disagree with their source:\n" + "\n".join(problems)


def test_a_number_is_compared_at_the_decimals_it_shows():
    cell = {"mean": 5.4963, "std": 0.9829}
    assert marker_problem("leads LARA by 5.5 ± 1.0", cell) is None
    assert marker_problem("leads LARA by **5.50 ± 0.98** ", cell) is None
    assert marker_problem("MARA − FM-slack is −3.7", {"mean": -3.69, "std": 0.6}) is None
    assert marker_problem("leads LARA by 5.4 ± 1.0", cell) == "written 5.4 ± 1.0, the source says 5.5 ± 1.0"
    assert marker_problem("a bank of 732", list(range(732))) is None
    assert marker_problem("a bank of 540", list(range(732))) == "written 540, the source says 732"
    assert marker_problem("Version 0.1.0", "0.2.0") == "the source says '0.2.0'"


def test_a_wrong_number_a_missing_key_and_a_stale_block_are_named_by_file_and_line(tmp_path):
    root = _repository(tmp_path)
    page = root / "page.md"
    page.write_text(f"Right: 5.5<!-- number: {CELL} -->.\nWrong: 8.5<!-- number: {CELL} -->.\n"
                    "Gone: 1.0<!-- number: results/summary.json#grids/nowhere -->.\n"
                    f"```\nAn example: 9.9<!-- number: {CELL} -->\n```\n"
                    "<!-- begin numbers: make-run-sample -->\nstale\n<!-- end numbers -->\n")
    found = [(d.path, d.line, d.what) for d in disagreements(root, [page])]
    assert found == [
        ("page.md", 2, f"written 8.5, the source says 5.5 ({CELL})"),
        ("page.md", 3, "results/summary.json#grids/nowhere: no 'nowhere' there "
                       "(results/summary.json#grids/nowhere)"),
        ("page.md", 8, "a numbers block differs from its source (python tools/doc_numbers.py --write)")]


def test_writing_the_blocks_regenerates_them_from_their_source(tmp_path):
    root = _repository(tmp_path)
    page = root / "page.md"
    page.write_text("Before.\n<!-- begin numbers: make-run-sample -->\nstale\n<!-- end numbers -->\nAfter.\n")
    assert write_blocks(root) == [page]
    text = page.read_text()
    assert "| Task set | A | B | … | D | E |" in text and "| ID | 1.00 | 2.00 | … | 4.00 | 5.00 |" in text
    assert text.startswith("Before.\n") and text.endswith("<!-- end numbers -->\nAfter.\n")
    assert disagreements(root, [page]) == []


def test_the_citation_file_gives_the_version_pyproject_gives():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f'version: "{version}"' in (ROOT / "CITATION.cff").read_text().splitlines()


def test_the_feature_reference_lists_every_feature_the_env_builds_in_order():
    from doc_numbers import observation_features

    from mara_env import features

    listed = [line.split("|")[3].strip().strip("`") for line in observation_features(ROOT).splitlines()[2:]]
    assert listed == [*features.TASK_FEATURES, *features.GLOBAL_FEATURES, *features.NODE_FEATURES,
                      *features.SLOT_NODE_FEATURES]


def test_the_options_reference_lists_every_config_field_in_order_with_its_default():
    import dataclasses

    from doc_numbers import config_options

    from mara_env.config import MARAConfig

    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in config_options(ROOT).splitlines()[2:]]
    fields = dataclasses.fields(MARAConfig)
    assert [row[0].strip("`") for row in rows] == [field.name for field in fields]
    assert [row[1].strip("`") for row in rows] == [repr(field.default) for field in fields]
    assert all(row[2].endswith(".") for row in rows)  # each meaning is a whole sentence of the field's docstring


def test_a_name_holding_a_slash_is_written_as_in_json_pointer(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"cells": {"Tasks/episode": 20.2, "a~b": 1.0}}))
    assert source_value(tmp_path, "s.json", "cells/Tasks~1episode") == 20.2
    assert source_value(tmp_path, "s.json", "cells/a~0b") == 1.0
