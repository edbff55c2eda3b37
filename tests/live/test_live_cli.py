"""``python -m mara_agents.live`` rejects bad settings with one line and status 2, before starting Ray."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("ray", reason="the live command needs the [ray] extra")

from mara_agents.live.command import main  # noqa: E402


@pytest.mark.parametrize("argv, message", [(["--policy", "nope"], "unknown policy 'nope'"),
                                           (["--steps", "0"], "--steps must be ≥ 1, got 0"),
                                           (["--window", "0"], "--window must be ≥ 1, got 0"),
                                           (["--attempts", "0"], "--attempts must be ≥ 1, got 0"),
                                           (["--bench", "--bench-steps", "1"], "--bench-steps must be ≥ 2, got 1"),
                                           (["--nodes", "0"], "--nodes must be ≥ 1, got 0")])
def test_bad_arguments_print_one_error_line(argv, message, capsys):
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


@pytest.mark.parametrize("argv, message", [(["--family-resources", "cnn_fmnist=lots"], "NAME=CPUS"),
                                           (["--family-resources", "nope=1"], "unknown family 'nope'"),
                                           (["--retries", "-1"], "--retries")])
def test_build_bank_on_ray_rejects_bad_settings_with_one_line(argv, message, capsys, tmp_path):
    import torch

    from curves.build_bank import main as build_main

    threads = torch.get_num_threads()
    try:
        assert build_main(["--ray", "--bank", str(tmp_path), *argv]) == 2
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_every_ray_entry_point_without_ray_says_what_to_install(monkeypatch, capsys, tmp_path):
    import torch

    from curves.build_bank import main as build_main
    from mara_env.live.runner import connect

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    extra = "needs Ray, an optional extra: pip install -e '.[ray]'"
    assert main(["--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == f"error: python -m mara_agents.live {extra}"
    threads = torch.get_num_threads()
    try:
        assert build_main(["--ray", "--bank", str(tmp_path)]) == 2
    finally:
        torch.set_num_threads(threads)
    assert capsys.readouterr().err.strip() == f"error: build_bank --ray {extra}"
    with pytest.raises(ModuleNotFoundError, match=r"live scheduling \(MARA-live-v0\) needs Ray"):
        connect()


def test_an_unwritable_out_is_one_line_before_ray_starts(capsys):
    import ray

    assert main(["--out", "/proc/mara-live", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --out: cannot write into /proc/mara-live: ")
    assert not ray.is_initialized()
