"""Reader for the IDX format (MNIST, Fashion-MNIST), plain or gzip-compressed."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """Parse an IDX file: 2 zero bytes, a type code, the rank, big-endian int32 dims, then the data."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic {raw[:4]!r})")
    rank = raw[3]
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">i4", count=rank, offset=4))
    dtype = np.dtype(_DTYPES[raw[2]])
    count = int(np.prod(dims)) if dims else 1
    offset = 4 + 4 * rank
    if len(raw) - offset < count * dtype.itemsize:
        raise ValueError(f"{path}: truncated IDX file ({len(raw) - offset} data bytes for shape {dims})")
    return np.frombuffer(raw, dtype=dtype, count=count, offset=offset).reshape(dims)
