"""Every registered family builds at both presets, and the paper's families train on their real formats."""

from __future__ import annotations

import pickle
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from curves.bank import load_bank
from curves.catalog import FAMILIES, PAPER, SHIPPED, get_family
from curves.generate import generate

INFO = {
    "image": {"in_channels": 1, "image_size": 28, "num_classes": 10},
    "audio": {"frames": 32, "n_mels": 40, "words": 1},
    "text": {"vocab_size": 50, "num_classes": 2},
    "rl": {"frames": 4, "num_actions": 3},
}


def _inputs(modality: str, preset: str) -> torch.Tensor:
    if modality == "image":
        return torch.randn(2, 1, 28, 28)
    if modality == "audio":
        return torch.randn(2, 32, 40)
    if modality == "text":
        return torch.randint(0, 50, (2, 12))
    side = get_family("dagger_pong").sizes[preset]["side"]
    return torch.randint(0, 255, (2, 4, side, side), dtype=torch.uint8)


@pytest.mark.parametrize("preset", ["cpu", "paper"])
@pytest.mark.parametrize("name", SHIPPED)
def test_model_builds_and_classifies(name: str, preset: str) -> None:
    family = get_family(name)
    model = family.build(preset, INFO[family.modality])
    logits = model(_inputs(family.modality, preset))
    expected = {"image": (2, 10), "audio": (2, 2, 1), "text": (2, 2), "rl": (2, 3)}[family.modality]
    assert tuple(logits.shape) == expected


def test_family_sets_mirror_the_paper() -> None:
    for names in (SHIPPED, PAPER):
        roles = [get_family(n).role for n in names]
        assert roles.count("id") == 8 and roles.count("ood") == 2
    assert set(SHIPPED) | set(PAPER) <= set(FAMILIES)
    assert all(get_family(n).length == 2 * get_family(n).max_budget for n in FAMILIES)


def _tiny_cifar(root: Path) -> None:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batch = {b"data": rng.integers(0, 256, (70, 3072), dtype=np.uint8), b"labels": list(rng.integers(0, 10, 70))}
    (folder / "data_batch_1").write_bytes(pickle.dumps(batch))


def _tiny_imdb(root: Path) -> None:
    for sub, words in (("pos", "good great fine"), ("neg", "bad awful dull")):
        folder = root / "aclImdb" / "train" / sub
        folder.mkdir(parents=True)
        for i in range(6):
            (folder / f"{i}_1.txt").write_text(f"{words} movie number {i}")


def _tiny_yesno(root: Path) -> None:
    folder = root / "waves_yesno"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(6):
        labels = "_".join(str(b) for b in rng.integers(0, 2, 8))
        with wave.open(str(folder / f"{labels}.wav"), "wb") as writer:
            writer.setnchannels(1)
            writer.setsampwidth(2)
            writer.setframerate(8000)
            writer.writeframes((rng.uniform(-0.3, 0.3, 6000) * 32767).astype("<i2").tobytes())


@pytest.mark.parametrize("name, make", [("cnn_cifar10", _tiny_cifar), ("alstm_imdb_1", _tiny_imdb),
                                        ("tsfm_yesno_1", _tiny_yesno)])
def test_paper_family_trains_on_its_real_format(tmp_path: Path, name: str, make) -> None:
    make(tmp_path / "data")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generate(name, "test", 1, tmp_path / "bank", data_root=tmp_path / "data", progress=False, length=6)
    finally:
        torch.set_num_threads(threads)
    bank = load_bank(tmp_path / "bank")
    assert bank.ids() == [f"{name}/test/000"] and bank.per_batch[f"{name}/test/000"].size == 6
