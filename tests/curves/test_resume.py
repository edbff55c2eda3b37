"""Killing the generator mid-run loses no finished curve, and the rerun produces the same bank."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from curves.bank import load_bank
from curves.data.fashion_mnist import DEFAULT_DIR

REPO = Path(__file__).resolve().parents[2]
COUNT, LENGTH = 5, 40

pytestmark = pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="needs apt-get install dataset-fashion-mnist")


def _command(bank: Path) -> list[str]:
    return [sys.executable, "-m", "curves.generate", "--family", "lstm_fmnist", "--split", "val", "--count",
            str(COUNT), "--length", str(LENGTH), "--bank", str(bank), "--no-progress"]


def _finished(bank: Path) -> list[str]:
    try:
        manifest = json.loads((bank / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [f"{c['family']}/{c['split']}/{c['index']:03d}" for c in manifest["curves"]]


def _generate_uninterrupted(bank: Path) -> None:
    """The same job in this process, with the CLI's single torch thread."""
    import torch

    from curves.generate import generate

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generate("lstm_fmnist", "val", COUNT, bank, progress=False, length=LENGTH)
    finally:
        torch.set_num_threads(threads)


def test_kill_and_rerun_gives_the_uninterrupted_bank(tmp_path: Path) -> None:
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    proc = subprocess.Popen(_command(killed), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 90
    while len(_finished(killed)) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {cid: load_bank(killed).per_batch[cid].copy() for cid in _finished(killed)}
    assert 2 <= len(before) < COUNT, "the generator should have been killed mid-run"

    subprocess.run(_command(killed), cwd=REPO, check=True, capture_output=True, timeout=120)
    _generate_uninterrupted(reference)
    resumed, fresh = load_bank(killed), load_bank(reference)

    for cid, losses in before.items():  # nothing finished before the kill was lost or redone differently
        np.testing.assert_array_equal(resumed.per_batch[cid], losses)
    assert resumed.ids() == fresh.ids() and len(fresh.ids()) == COUNT
    assert resumed.records == fresh.records
    for cid in fresh.ids():
        np.testing.assert_array_equal(resumed.per_batch[cid], fresh.per_batch[cid])
