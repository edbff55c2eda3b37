"""The code keeps four standards: short functions, no dead code, figures in docs/, and no test assert that cannot
fail (tools/code_standards.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import code_standards  # noqa: E402
from code_standards import (DEFINITION_MARKER, LIBRARY, MAX_FUNCTION_LINES, MAX_MEASUREMENT_LINES,  # noqa: E402
                            long_functions, measurement_lines, vacuous_asserts)


def test_no_library_function_is_longer_than_the_limit():
    assert [str(f) for f in long_functions(ROOT)] == []


def test_no_library_line_reports_a_measurement_run_number_date_or_story():
    assert MAX_MEASUREMENT_LINES == 0
    assert [str(f) for f in measurement_lines(ROOT)] == []


def test_no_test_asserts_only_that_a_call_returned_something():
    assert [str(f) for f in vacuous_asserts(ROOT)] == []


def test_an_assert_that_a_call_is_not_none_is_found_and_a_real_comparison_is_not(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_a():\n    assert make_policy('fifo') is not None\n"
        "    assert f() is None and g() is not None\n    assert policy is not None\n    assert f() == 2\n")
    assert [(f.path, f.line) for f in vacuous_asserts(tmp_path)] == [("tests/test_x.py", 2)]


def test_vulture_finds_no_dead_code_in_the_library():
    import vulture  # the test extra installs it

    scan = vulture.Vulture()
    scan.scavenge([str(ROOT / name) for name in LIBRARY])
    found = {f"{Path(item.filename).resolve().relative_to(ROOT).as_posix()}:{item.name}":
             f"{item.filename}:{item.first_lineno}: unused {item.typ} {item.name!r}"
             for item in scan.get_unused_code(min_confidence=80)}
    assert sorted(found) == [], list(found.values())


def _library(tmp_path: Path, source: str) -> Path:
    (tmp_path / "mara_env").mkdir()
    (tmp_path / "mara_env" / "module.py").write_text(source, encoding="utf-8")
    return tmp_path


def test_a_function_one_line_over_the_limit_is_found_and_one_at_it_is_not(tmp_path):
    def body(lines: int, indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    at_limit = f"def at_limit():\n{body(MAX_FUNCTION_LINES - 1, '    ')}"
    over = f"class A:\n    def over(self):\n{body(MAX_FUNCTION_LINES, '        ')}"
    root = _library(tmp_path, f"{at_limit}\n\n{over}")
    found = long_functions(root)
    assert [(f.path, f.line, f.what) for f in found] == [
        ("mara_env/module.py", MAX_FUNCTION_LINES + 4, f"over is {MAX_FUNCTION_LINES + 1} lines")]


@pytest.mark.parametrize("text", ["# chosen in run 18", '"""62.46 % on val"""', "# 12 ms per call",
                                  "# as of 2026-12-05", "# since Dec 2026", "# (measured)",
                                  "# each copy is 1.8 MB", '"""about 70 MiB of resident memory"""', "# 2 GB at N = 256",
                                  "# 50 KiB a row", "# and cost 5× more per batch", "# 3x the throughput",
                                  "# 2.5 x faster than the loop", "# 4 times slower", "# the build takes 12 s",
                                  "# 3 min per family", "# about 1.8 CPU hours", "# it used to take longer",
                                  "# before this change every call copied", "# we found that it starves",
                                  "# previously a loop", 'log.info(f"{n} rows in 4 s")'])
def test_measurements_run_numbers_and_dates_in_prose_are_found(tmp_path, text):
    root = _library(tmp_path, f"x = 1\n{text}\n")
    assert [(f.path, f.line) for f in measurement_lines(root)] == [("mara_env/module.py", 2)]


@pytest.mark.parametrize("text", ['y = x % 2  # parity', 'label = f"{share:.0%}"', "# the 10 % quantile",
                                  "# a running sum", 'print("runs")', "# conv 3×3/1, then 1×1", "# 8 samples × 4 steps",
                                  'row = f"{name:24s} {key:08x}"', "# the bank used to train FM", "# version 1.2.3",
                                  f"MIB = 2**20  # 1 MiB = 2**20 bytes; {DEFINITION_MARKER}",
                                  f'WAIT = 120  # "polls (60 s)"  # {DEFINITION_MARKER}'])
def test_code_and_definitions_are_not_counted_as_measurements(tmp_path, text):
    root = _library(tmp_path, f"x = 1\n{text}\n")
    assert measurement_lines(root) == []


def test_a_definition_counts_as_a_measurement_until_its_line_is_marked(tmp_path):
    unmarked = _library(tmp_path, "MIB = 2**20  # 1 MiB = 2**20 bytes\n")
    assert [(f.path, f.line) for f in measurement_lines(unmarked)] == [("mara_env/module.py", 1)]
    (tmp_path / "mara_env" / "module.py").write_text(f"MIB = 2**20  # 1 MiB = 2**20 bytes; {DEFINITION_MARKER}\n"
                                                     '"""A docstring of 1 MiB."""\n', encoding="utf-8")
    assert [(f.path, f.line) for f in measurement_lines(unmarked)] == [("mara_env/module.py", 2)]


def test_the_command_exits_1_and_lists_each_finding(tmp_path, capsys):
    root = _library(tmp_path, "# picked in run 7\n" * (MAX_MEASUREMENT_LINES + 1))
    assert code_standards.main(["--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"lines reporting measurements, run numbers, dates or stories: {MAX_MEASUREMENT_LINES + 1}" in out
    assert "mara_env/module.py:1: # picked in run 7" in out
