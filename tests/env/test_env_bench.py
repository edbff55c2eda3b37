"""``python -m benchmarks.env_bench`` runs end to end on a small bank and prints every figure it promises."""

import re

import pytest

from benchmarks.env_bench import main

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)


def test_bench_prints_and_writes_every_figure(bank_dir, tmp_path, capsys):
    out = tmp_path / "figures.txt"
    assert main(["--bank", str(bank_dir), "--steps", "1000", "--sizes", "64", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert out.read_text().splitlines() == lines
    labels = ["gym env, precomputed", "gym env, FIFO rule", "gym env, random legal", "AEC env, FIFO rule",
              "AEC env, random legal", "gym env, flat+repair", "AEC env, rllib", "vector env N=64 , precomputed:", "vector env N=64 , FIFO rule",
              "vector env N=64 , precomputed, copy=False",
              "vector env N=64 , flat, precomputed", "vector env N=64 , flat+repair", "vector env N=64 , rllib", "vector env N=64 , flat, node options",
              "forecast env N=64 , FM, flat, cold store", "forecast env N=64 , FM, flat, warm store",
              "forecast env N=64 , FM, flat, warm / flat vector env",
              "vector env N=64 / gym env", "peak memory"]
    for label in labels:
        assert any(line.startswith(label) for line in lines), label
    rates = [float(value.replace(",", "")) for line in lines if "/s" in line
             for value in re.findall(r"([\d,]+) [a-z ]+/s", line)]
    assert len(rates) == 2 * (7 + 9) and min(rates) > 0


@pytest.mark.parametrize("argv", [["--steps", "10"], ["--sizes", "0"], ["--sizes", "a,b"], ["--bank", "/no/such"]])
def test_bench_refuses_bad_arguments_naming_the_flag(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in error and argv[0] in error


@pytest.mark.parametrize("where", ["a_file/figures.txt", "a_folder", "", "/proc/figures.txt"])
def test_bench_refuses_an_unwritable_out_before_running(tmp_path, capsys, where, monkeypatch):
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("x")
    out = where if where.startswith("/") else str(tmp_path / where) if where else str(tmp_path)
    monkeypatch.setattr("benchmarks.env_bench.run", lambda *args: pytest.fail("the bench ran"))
    with pytest.raises(SystemExit) as exit_info:
        main(["--steps", "1000", "--out", out])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and out in lines[0]


def test_bench_compare_runs_both_checkouts_and_prints_each_figures_ratio(bank_dir, capsys):
    from benchmarks.env_bench_compare import THIS_CHECKOUT
    from benchmarks.env_bench_compare import main as compare_main

    assert compare_main([str(THIS_CHECKOUT), "--repeat", "1", "--steps", "1000", "--bank", str(bank_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line[:34].strip(): line[34:].split() for line in lines[2:]}
    assert set(rows) == {"gym env, precomputed", "gym env, FIFO rule", "vector env N=1, precomputed",
                         "vector env N=64, precomputed", "vector env N=64, flat+repair"}
    for other, this, ratio in rows.values():
        other_rate, this_rate = float(other.replace(",", "")), float(this.replace(",", ""))
        assert other_rate > 0 and this_rate > 0 and float(ratio) == pytest.approx(this_rate / other_rate, rel=0.01)


@pytest.mark.parametrize("argv", [["/no/such"], ["/"], [".", "--repeat", "0"], [".", "--steps", "10"]])
def test_bench_compare_refuses_bad_arguments(argv, capsys):
    from benchmarks.env_bench_compare import main as compare_main

    with pytest.raises(SystemExit) as exit_info:
        compare_main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err.strip().splitlines()[-1]
