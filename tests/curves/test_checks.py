"""The shared input checks: each refusal names the argument and the value; each acceptance returns the value."""

import argparse
import math
from pathlib import Path

import pytest

from mara_common import checks


@pytest.mark.parametrize("value", [True, 1.0, "3", None])
def test_integer_refuses_other_kinds(value):
    with pytest.raises(TypeError, match="threads must be an integer"):
        checks.integer("threads", value)


def test_integer_bounds_name_the_argument_and_value():
    assert checks.integer("threads", 3, low=1, high=8) == 3
    with pytest.raises(ValueError, match=r"threads must be ≥ 1, got 0"):
        checks.integer("threads", 0, low=1)
    with pytest.raises(ValueError, match=r"threads must be ≤ 8, got 9"):
        checks.integer("threads", 9, low=1, high=8)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_number_refuses_non_finite(value):
    with pytest.raises(ValueError, match="scale must be a finite number"):
        checks.number("scale", value)


def test_number_open_lower_bound():
    assert checks.number("scale", 0.5, low=0.0, low_open=True) == 0.5
    with pytest.raises(ValueError, match="scale must be greater than 0.0, got 0.0"):
        checks.number("scale", 0.0, low=0.0, low_open=True)
    with pytest.raises(TypeError):
        checks.number("scale", "0.5")


def test_choice_and_choices():
    assert checks.choice("device", "cpu", ("cpu", "cuda")) == "cpu"
    with pytest.raises(ValueError, match="device must be one of cpu, cuda; got 'tpu'"):
        checks.choice("device", "tpu", ("cpu", "cuda"))
    assert checks.choices("families", "a", ("a", "b")) == ("a",)
    assert checks.choices("families", ["b", "a"], ("a", "b")) == ("b", "a")
    with pytest.raises(ValueError, match="families: unknown 'nosuch'"):
        checks.choices("families", ["a", "nosuch"], ("a", "b"))
    with pytest.raises(ValueError, match="families must name at least one"):
        checks.choices("families", [], ("a", "b"))


def test_paths_refuse_empty_and_wrong_kind(tmp_path):
    with pytest.raises(ValueError, match="out must be a path, got an empty string"):
        checks.writable_dir("out", "")
    with pytest.raises(ValueError, match="out must be a path"):
        checks.writable_file("out", "  ")
    with pytest.raises(TypeError, match="out must be a path"):
        checks.writable_file("out", 3)
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    with pytest.raises(ValueError, match=f"out: {a_file} is a file; name a directory"):
        checks.writable_dir("out", a_file)
    with pytest.raises(ValueError, match=f"out: {tmp_path} is a directory; name a file"):
        checks.writable_file("out", tmp_path)
    with pytest.raises(ValueError, match="is not a directory, so"):
        checks.writable_file("out", a_file / "below" / "x.pt")


def test_paths_accept_new_names_under_writable_places(tmp_path):
    assert checks.writable_dir("out", tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert checks.writable_file("out", tmp_path / "new" / "x.pt") == tmp_path / "new" / "x.pt"
    assert not (tmp_path / "new").exists(), "a check must not create anything"


def test_unwritable_places_are_refused_even_for_root():
    with pytest.raises(ValueError, match="out: /proc is not writable, so /proc/x.pt cannot be created"):
        checks.writable_file("out", Path("/proc/x.pt"))
    with pytest.raises(ValueError, match="out: /proc/sys is not writable"):
        checks.writable_dir("out", Path("/proc/sys"))


def test_existing_file_and_dir(tmp_path):
    with pytest.raises(ValueError, match=f"workload: no such file {tmp_path / 'no.json'}"):
        checks.existing_file("workload", tmp_path / "no.json")
    with pytest.raises(ValueError, match="is not a file"):
        checks.existing_file("workload", tmp_path)
    with pytest.raises(ValueError, match="no such directory"):
        checks.existing_dir("bank", tmp_path / "nope")
    assert checks.existing_dir("bank", tmp_path) == tmp_path


def test_argparse_type_gives_a_usage_error_naming_the_flag(capsys):
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--threads", type=checks.argparse_type(checks.integer, "--threads", int, low=1))
    assert parser.parse_args(["--threads", "2"]).threads == 2
    for bad, expected in (("0", "--threads must be ≥ 1, got 0"), ("x", "--threads must be an integer, got 'x'")):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(["--threads", bad])
        assert exit_info.value.code == 2
        assert expected in capsys.readouterr().err


def test_argparse_type_without_a_flag_leaves_the_naming_to_argparse(capsys):
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--out", type=checks.argparse_type(checks.writable_dir))
    parser.add_argument("--n", type=checks.argparse_type(checks.integer, None, int, low=1))
    for argv, expected in ((["--out", "/proc/x"], "argument --out: /proc is not writable, so /proc/x cannot be"),
                           (["--n", "0"], "argument --n: must be ≥ 1, got 0"),
                           (["--n", "two"], "argument --n: must be an integer, got 'two'")):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert expected in capsys.readouterr().err
