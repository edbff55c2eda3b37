"""King James Bible verses (Debian ``bible-kjv`` / ``bible-kjv-text``): Old- vs New-Testament classification.

The ``bible`` program of package ``bible-kjv`` prints all 31,102 verses; the New Testament starts at
Matthew 1:1.  The Old Testament (23,145 verses) is subsampled to the New Testament's 7,957 verses with a
fixed seed, so the two classes are balanced and chance loss is ln 2.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import torch

from curves.data.errors import DataMissingError
from curves.data.text import build_vocab, encode, tokenize

INSTALL_HINT = "sudo apt-get install bible-kjv   (provides /usr/bin/bible and the bible-kjv-text data)"
VOCAB_SIZE = 8000
MAX_LEN = 48  # words kept per verse: all but the longest verses fit (docs/research/bank_notes.md)


def read_verses() -> list[tuple[str, str]]:
    """(reference, text) for every verse, in canonical order, from the ``bible`` program."""
    program = shutil.which("bible")
    if program is None:
        raise DataMissingError(f"the KJV Bible text is not installed. Install it with: {INSTALL_HINT}")
    out = subprocess.run([program, "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    verses = []
    for line in out.splitlines():
        ref, _, text = line.partition(" ")
        if text:
            verses.append((ref, text))
    return verses


def split_testaments(verses: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """Old- and New-Testament verse texts (the NT begins at Matthew 1:1, printed as ``Mt1:1``)."""
    starts = [i for i, (ref, _) in enumerate(verses) if ref in ("Mt1:1", "Mat1:1", "Matt1:1")]
    if not starts:
        raise DataMissingError("could not find Matthew 1:1 in the output of `bible`; is bible-kjv-text complete?")
    first_nt = starts[0]
    return [t for _, t in verses[:first_nt]], [t for _, t in verses[first_nt:]]


def load_kjv_testaments(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Balanced token ids (N, MAX_LEN), labels (0 = Old, 1 = New Testament) and the vocabulary size."""
    old, new = split_testaments(read_verses())
    rng = np.random.default_rng(seed)
    old = [old[i] for i in sorted(rng.choice(len(old), size=len(new), replace=False))]
    docs = [tokenize(t) for t in old + new]
    vocab = build_vocab(docs, VOCAB_SIZE)
    labels = torch.tensor([0] * len(old) + [1] * len(new), dtype=torch.int64)
    return encode(docs, vocab, MAX_LEN), labels, VOCAB_SIZE
