"""Each data loader reads tiny files written here in the real on-disk formats, and a missing dataset is a
clear message, not a traceback."""

from __future__ import annotations

import gzip
import pickle
import struct
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from curves.data import cifar10, fashion_mnist, imdb, waves_yesno
from curves.data.errors import DataMissingError
from curves.data.idx import read_idx
from curves.data.kjv import split_testaments
from curves.data.logmel import log_mel, mel_filterbank
from curves.data.text import PAD, UNK, build_vocab, encode, tokenize

REPO = Path(__file__).resolve().parents[2]


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def test_fashion_mnist_reads_gzipped_idx(tmp_path: Path) -> None:
    images = np.arange(3 * 28 * 28).reshape(3, 28, 28) % 256
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.array([3, 1, 4]))
    x, y = fashion_mnist.load_fashion_mnist(tmp_path)
    assert x.shape == (3, 1, 28, 28) and x.dtype == torch.float32
    assert y.tolist() == [3, 1, 4]
    np.testing.assert_allclose(x[0, 0].numpy(), (images[0] / 255 - fashion_mnist.MEAN) / fashion_mnist.STD, rtol=1e-5)


def test_truncated_idx_is_refused(tmp_path: Path) -> None:
    _write_idx(tmp_path / "bad.gz", np.zeros((4, 28, 28)))
    raw = gzip.decompress((tmp_path / "bad.gz").read_bytes())
    (tmp_path / "bad").write_bytes(raw[:100])
    with pytest.raises(ValueError, match="truncated"):
        read_idx(tmp_path / "bad")


def test_missing_fashion_mnist_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError, match="apt-get install dataset-fashion-mnist"):
        fashion_mnist.load_fashion_mnist(tmp_path)


def test_cifar10_reads_python_batches(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i in (1, 2):
        batch = {b"data": np.full((2, 3072), 10 * i, dtype=np.uint8), b"labels": [i, i + 1]}
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(batch))
    x, y = cifar10.load_cifar10(tmp_path)
    assert x.shape == (4, 3, 32, 32)
    assert y.tolist() == [1, 2, 2, 3]
    assert torch.allclose(x[0, 0, 0, 0], torch.tensor((10 / 255 - 0.4914) / 0.2470))


def test_imdb_reads_acl_folders(tmp_path: Path) -> None:
    for sub, text in (("pos", "A great film!<br />Loved it."), ("neg", "Dull, dull film.")):
        (tmp_path / "aclImdb" / "train" / sub).mkdir(parents=True)
        (tmp_path / "aclImdb" / "train" / sub / "0_9.txt").write_text(text)
    x, y, vocab = imdb.load_imdb(tmp_path)
    assert y.tolist() == [0, 1]  # neg first
    assert x.shape == (2, imdb.MAX_LEN) and vocab == imdb.VOCAB_SIZE
    assert (x[0] != PAD).sum() == 3 and (x[1] != PAD).sum() == 5


def _write_wav(path: Path, samples: np.ndarray, rate: int = 8000) -> None:
    with wave.open(str(path), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes((samples * 32767).astype("<i2").tobytes())


def test_waves_yesno_reads_labels_from_names(tmp_path: Path) -> None:
    folder = tmp_path / "waves_yesno"
    folder.mkdir()
    rng = np.random.default_rng(0)
    _write_wav(folder / "0_1_0_0_1_0_1_1.wav", rng.uniform(-0.5, 0.5, 8000))
    _write_wav(folder / "1_1_1_1_0_0_0_0.wav", rng.uniform(-0.5, 0.5, 12000))
    (folder / "README").write_text("not audio")
    x, y = waves_yesno.load_waves_yesno(tmp_path)
    assert x.shape == (2, waves_yesno.FRAMES, 40)
    assert y.tolist() == [[0, 1, 0, 0, 1, 0, 1, 1], [1, 1, 1, 1, 0, 0, 0, 0]]


def test_kjv_testaments_split_at_matthew() -> None:
    verses = [("Ge1:1", "In the beginning"), ("Mal4:6", "lest I come"), ("Mt1:1", "The book"), ("Rev22:21", "Amen")]
    old, new = split_testaments(verses)
    assert old == ["In the beginning", "lest I come"] and new == ["The book", "Amen"]


def test_text_encoding_pads_truncates_and_marks_unknown_words() -> None:
    docs = [tokenize("The LORD is my shepherd; I shall not want."), tokenize("the the lord")]
    vocab = build_vocab(docs, size=4)  # two most frequent words: "the", "lord"
    ids = encode(docs + [tokenize("shepherd")], vocab, max_len=3)
    assert ids[0].tolist() == [vocab["the"], vocab["lord"], UNK]
    assert ids[1].tolist() == [vocab["the"], vocab["the"], vocab["lord"]]
    assert ids[2].tolist() == [UNK, PAD, PAD]


def test_log_mel_puts_a_tone_in_the_right_band() -> None:
    rate, tone = 16000, 1000.0
    t = np.arange(rate) / rate
    feats = log_mel(np.sin(2 * np.pi * tone * t), rate, n_fft=512, hop=256, n_mels=40)
    bank = mel_filterbank(rate, 512, 40)
    expected = int(np.argmax(bank[:, int(round(tone / rate * 512))]))
    assert int(np.bincount(feats.argmax(axis=1)).argmax()) == expected


def test_cli_reports_missing_data_without_traceback(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "curves.generate", "--family", "cnn_cifar10", "--split", "test",
                             "--count", "1", "--data-root", str(tmp_path), "--bank", str(tmp_path / "bank"),
                             "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "error: CIFAR-10 python batches" in result.stderr and "Traceback" not in result.stderr
