"""Every flag of every ``python -m curves.X`` command is checked before any work: a bad value is one line
``error: ...`` naming the flag and the value, with exit status 2 and no traceback; an unwritable output path
fails before anything is trained or written; SIGINT/SIGTERM exits 130 saying what was saved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import curves.build_bank as build_bank
import curves.calibrate as calibrate
import curves.datasheet as datasheet
import curves.generate as generate
from mara_common.cli import FILE_ERRORS, run_command
from curves.data.fashion_mnist import DEFAULT_DIR
from synthetic_bank import build_synthetic_bank

REPO = Path(__file__).resolve().parents[2]
FILE, DIR, MISSING = "<file>", "<dir>", "<missing>"
NO_GPU = "cuda:99"  # more GPUs than any machine has

SHARED = [  # the flags curves.generate and curves.build_bank share
    (["--bank", FILE], "--bank.*is a file"),
    (["--bank", "/proc/x"], "--bank.*/proc/x cannot be created"),
    (["--bank", ""], "--bank must be a path"),
    (["--preset", "huge"], "--preset.*'huge'"),
    (["--data-root", MISSING], "--data-root: no such directory"),
    (["--data-root", FILE], "--data-root.*is not a directory"),
    (["--device", "tpu"], "--device.*'tpu'"),
    (["--device", NO_GPU], "--device 'cuda:99'"),
    (["--device", "cuda:x"], "--device.*'cuda:x'"),
    (["--threads", "0"], "--threads must be ≥ 1, got 0"),
    (["--threads", "-2"], "--threads must be ≥ 1, got -2"),
    (["--threads", "1.5"], "--threads must be an integer, got '1.5'"),
    (["--threads", "100000"], "--threads must be ≤ 256, got 100000"),
    (["--timings", "/proc/x"], "--timings.*/proc/x cannot be created"),
    (["--timings", DIR], "--timings.*is a directory"),
    (["--length", "-5"], "--length must be ≥ 1, got -5"),
    (["--length", "0"], "--length must be ≥ 1, got 0"),
    (["--length", "1000000000"], "--length must be ≤ 100000"),
    (["--length", "five"], "--length must be an integer, got 'five'"),
]

BUILD_BANK = SHARED + [
    (["--families", "nosuch"], "--families.*'nosuch'"),
    (["--families"], "--families: expected at least one"),
    (["--scale", "nan"], "--scale must be a finite number, got nan"),
    (["--scale", "inf"], "--scale must be a finite number, got inf"),
    (["--scale", "-1"], "--scale must be greater than 0.0, got -1.0"),
    (["--scale", "0"], "--scale must be greater than 0.0, got 0.0"),
    (["--scale", "2"], "--scale must be ≤ 1.0, got 2.0"),
    (["--scale", "half"], "--scale must be a number, got 'half'"),
    (["--scale", "0.001"], "--scale 0.001 selects no curve"),
    (["--train", "0"], "--train must be ≥ 1, got 0"),
    (["--val", "many"], "--val must be an integer"),
    (["--ray", ""], "--ray ADDRESS must not be empty"),
    (["--ray", "--cpus-per-curve", "0"], "--cpus-per-curve must be greater than 0.0, got 0.0"),
    (["--ray", "--cpus-per-curve", "nan"], "--cpus-per-curve must be a finite number"),
    (["--cpus-per-curve", "2"], "--cpus-per-curve needs --ray"),
    (["--ray", "--gpus-per-curve", "-1"], "--gpus-per-curve must be ≥ 0.0, got -1.0"),
    (["--gpus-per-curve", "1"], "--gpus-per-curve needs --ray"),
    (["--ray", "--family-resources", "cnn_fmnist=lots"], "--family-resources item 'cnn_fmnist=lots'"),
    (["--ray", "--family-resources", "cnn_fmnist=0"], "--family-resources item 'cnn_fmnist=0'.*CPUS > 0"),
    (["--ray", "--family-resources", "cnn_fmnist=1:-1"], "--family-resources item 'cnn_fmnist=1:-1'"),
    (["--ray", "--family-resources", "nope=1"], "--family-resources item 'nope=1': unknown family 'nope'"),
    (["--family-resources", "cnn_fmnist=1"], "--family-resources needs --ray"),
    (["--ray", "--retries", "-1"], "--retries must be ≥ 0, got -1"),
    (["--ray", "--retries", "1000"], "--retries must be ≤ 100, got 1000"),
    (["--unknown-flag"], "unrecognized arguments: --unknown-flag"),
]

GENERATE_REQUIRED = ["--family", "cnn_fmnist", "--split", "test", "--count", "1"]
GENERATE = [(GENERATE_REQUIRED + argv, pattern) for argv, pattern in SHARED] + [
    (["--family", "nope", "--split", "test", "--count", "1"], "--family.*'nope'"),
    (["--split", "test", "--count", "1"], "required: --family"),
    (["--family", "cnn_fmnist", "--split", "dev", "--count", "1"], "--split.*'dev'"),
    (["--family", "cnn_fmnist", "--split", "test", "--count", "0"], "--count must be ≥ 1, got 0"),
    (["--family", "cnn_fmnist", "--split", "test", "--count", "-1"], "--count must be ≥ 1, got -1"),
    (["--family", "cnn_fmnist", "--split", "test", "--count", "1000000000"], "--count must be ≤ 100000"),
    (GENERATE_REQUIRED + ["--start", "-1"], "--start must be ≥ 0, got -1"),
    (GENERATE_REQUIRED + ["--start", "x"], "--start must be an integer, got 'x'"),
    (["--family", "cnn_fmnist", "--split", "test", "--start", "99999", "--count", "5"],
     "--start 99999 and --count 5 ask for curve indices up to 100003; curve indices run from 0 to 99999"),
]

CALIBRATE = [
    (["--bank", MISSING], "--bank: no such directory"),
    (["--bank", FILE], "--bank.*is not a directory"),
    (["--bank", "/proc"], "--bank: /proc is not writable"),
    (["--bank", DIR], r"--bank: .*empty_dir holds no curve bank \(manifest.json not found\)"),
    (["--target", "0"], "--target must be greater than 0.0, got 0.0"),
    (["--target", "1.5"], "--target must be ≤ 1.0, got 1.5"),
    (["--target", "nan"], "--target must be a finite number, got nan"),
    (["--target", "high"], "--target must be a number, got 'high'"),
]

DATASHEET = [
    (["--timings", MISSING], "--timings: no such file"),
    (["--timings", DIR], "--timings.*is not a file"),
    (["--timings", "<garbage>"], r"timings\.jsonl:1: not a timings entry"),  # refused when the work starts
    (["--families", "nosuch"], "--families.*'nosuch'"),
    (["--families"], "--families: expected at least one"),
]

MAINS = {"build_bank": build_bank.main, "generate": generate.main, "calibrate": calibrate.main,
         "datasheet": datasheet.main}
TABLE = [(name, argv, pattern) for name, cases in (("build_bank", BUILD_BANK), ("generate", GENERATE),
                                                    ("calibrate", CALIBRATE), ("datasheet", DATASHEET))
         for argv, pattern in cases]


def _concrete(argv: list[str], tmp_path: Path) -> list[str]:
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    (tmp_path / "timings.jsonl").write_text("this is not json\n")
    (tmp_path / "empty_dir").mkdir(exist_ok=True)
    names = {FILE: str(a_file), DIR: str(tmp_path / "empty_dir"), MISSING: str(tmp_path / "no" / "such"),
             "<garbage>": str(tmp_path / "timings.jsonl")}
    return [names.get(item, item) for item in argv]


@pytest.fixture
def no_work(monkeypatch):
    """Any training or calibration reached by a refused command fails the test."""
    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")
    for module, name in ((build_bank, "build"), (generate, "generate"), (calibrate, "calibrate_bank")):
        monkeypatch.setattr(module, name, forbidden)


@pytest.mark.parametrize(("command", "argv", "pattern"), TABLE,
                         ids=[f"{name}:{' '.join(argv)}" for name, argv, _ in TABLE])
def test_bad_flag_is_one_line_naming_it_with_status_2(command, argv, pattern, tmp_path, capsys, no_work):
    import re

    import torch

    threads = torch.get_num_threads()
    try:
        status = MAINS[command](_concrete(argv, tmp_path))
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2, captured
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(pattern, lines[0]), lines
    assert "Traceback" not in captured.err + captured.out


MISSING_DATA = [
    (["--paper-families"], r"--paper-families: (9|10) of 10 families cannot be built, nothing was: cnn_cifar10, .*"
                           r"resnet34_cifar10: CIFAR-10 python batches .* not found: no --data-root given; download "),
    (["--paper-families", "--data-root", DIR], r"--paper-families: \d+ of 10 families cannot be built.*empty_dir"),
    (["--families", "alstm_kjv_1"], r"--families: 1 of 1 families cannot be built, nothing was: alstm_kjv_1: the KJV "
                                    r"Bible text is not installed. Install it with: sudo apt-get install bible-kjv"),
]


@pytest.mark.parametrize(("argv", "pattern"), MISSING_DATA, ids=[" ".join(argv) for argv, _ in MISSING_DATA])
def test_build_bank_refuses_families_whose_data_is_missing_before_any_work(argv, pattern, tmp_path, capsys, no_work,
                                                                           monkeypatch):
    import re

    from curves.data import sources

    monkeypatch.setenv("PATH", str(tmp_path))  # no `bible` (KJV) nor `espeak-ng` program
    monkeypatch.setattr(sources, "_CACHE", {})
    status = build_bank.main(["--bank", str(tmp_path / "bank"), *_concrete(argv, tmp_path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and re.search(pattern, lines[0]), lines


UNWRITABLE = [
    ("build_bank", ["--bank", "/proc/x/bank"]),
    ("build_bank", ["--bank", "<bank>", "--timings", "/proc/x/t.jsonl"]),
    ("generate", GENERATE_REQUIRED + ["--bank", "/proc/x/bank"]),
    ("generate", GENERATE_REQUIRED + ["--bank", "<bank>", "--timings", "/proc/x/t.jsonl"]),
    ("calibrate", ["--bank", "/proc/self"]),
    ("calibrate", ["--bank", "<bank>", "--datasheet"]),
    ("datasheet", ["--write"]),
]


@pytest.mark.parametrize(("command", "argv"), UNWRITABLE, ids=[f"{c}:{' '.join(a)}" for c, a in UNWRITABLE])
def test_an_unwritable_output_fails_before_any_work(command, argv, tmp_path, capsys, no_work, monkeypatch):
    bank = build_synthetic_bank(tmp_path / "bank", per_split=1, length=20)
    before = {path.name: path.read_bytes() for path in bank.iterdir() if path.is_file()}
    for module in (calibrate, datasheet):  # the datasheet they would rewrite, in a place nobody can write
        monkeypatch.setattr(module, "DATASHEET", Path("/proc/x/README.md"))
    began = time.perf_counter()
    status = MAINS[command]([str(bank) if item == "<bank>" else item for item in argv])
    err = capsys.readouterr().err
    assert status == 2 and "/proc/" in err and err.count("\n") == 1, err
    assert time.perf_counter() - began < 5
    assert {path.name: path.read_bytes() for path in bank.iterdir() if path.is_file()} == before


def test_sigterm_during_work_exits_130_with_one_line_saying_what_was_saved(capsys):
    def work() -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return 0

    previous = signal.getsignal(signal.SIGTERM)
    assert run_command(work, FILE_ERRORS, lambda: "3 curve(s) saved in B") == 130
    assert capsys.readouterr().err.strip() == "interrupted: 3 curve(s) saved in B"
    assert signal.getsignal(signal.SIGTERM) is previous


@pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="needs apt-get install dataset-fashion-mnist")
def test_sigterm_of_a_real_build_exits_130_and_keeps_every_finished_curve(tmp_path):
    from curves.bank import load_bank

    bank = tmp_path / "bank"
    command = [sys.executable, "-m", "curves.build_bank", "--bank", str(bank), "--families", "cnn_fmnist",
               "--length", "40"]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while proc.poll() is None and time.time() < deadline and generate.bank_with_curves(bank) < 1:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    saved = len(load_bank(bank).records)
    assert saved >= 1 and err.strip().splitlines()[-1] == (
        f"interrupted: {saved} curve(s) in {bank}, {saved} new; run the same command again to resume")


@pytest.mark.parametrize(("address", "pattern"), [
    ("127.0.0.1:1", r"--ray: cannot reach the Ray cluster at 127\.0\.0\.1:1: nothing answers"),
    ("nonsense", r"--ray: .*Ray address 'nonsense' must look like HOST:PORT")])
def test_an_unreachable_ray_address_fails_at_once_naming_it(address, pattern, tmp_path, capsys, no_work):
    import re

    pytest.importorskip("ray", reason="build_bank --ray needs the [ray] extra")
    import torch

    threads, began = torch.get_num_threads(), time.perf_counter()
    try:
        status = build_bank.main(["--bank", str(tmp_path / "bank"), "--ray", address, "--families", "cnn_fmnist"])
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and re.search(pattern, err[0]), err
    assert time.perf_counter() - began < 30


def test_torch_device_check_accepts_the_cpu_and_names_what_it_refuses():
    from mara_common.checks import torch_device

    assert torch_device("--device", "cpu") == "cpu"
    with pytest.raises(TypeError, match="--device must be a device name"):
        torch_device("--device", 0)
    with pytest.raises(ValueError, match="--device must be cpu, cuda or mps, got 'meta'"):
        torch_device("--device", "meta")


def test_generate_refuses_indices_past_the_limit_before_training(tmp_path):
    with pytest.raises(ValueError, match="start 99999 and count 5 ask for curve indices up to 100003"):
        generate.generate("cnn_fmnist", "test", 5, tmp_path / "bank", start=99999, progress=False)
    assert not (tmp_path / "bank").exists()
