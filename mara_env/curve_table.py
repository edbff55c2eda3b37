"""Every curve of a bank tabulated once per process, so that starting an episode only gathers rows."""

from __future__ import annotations

import numpy as np

from curves.bank import CurveBank


class CurveTable:
    """``loss[r, s]`` = L(s) of curve ``r`` for s = 1 … length, held at its last value beyond the curve's end
    (a task never runs past its budget, which the curve covers); column 0, "no batch yet", is 0.

    ``row`` maps a curve id to its row; ``log_batch_size`` and ``log_lr`` hold the per-curve features.
    """

    def __init__(self, bank: CurveBank):
        ids = sorted(bank.records)
        self.row = {cid: i for i, cid in enumerate(ids)}
        self.loss = np.zeros((len(ids), bank.max_length + 1), dtype=np.float64)
        for i, cid in enumerate(ids):
            curve = bank.cumavg(cid)
            self.loss[i, 1: curve.size + 1] = curve
            self.loss[i, curve.size + 1:] = curve[-1]
        self.log_batch_size = np.log([float(bank.records[cid].batch_size) for cid in ids])
        self.log_lr = np.log([float(bank.records[cid].lr) for cid in ids])

    def rows(self, curve_ids: tuple[str, ...]) -> np.ndarray:
        """Row indices of the listed curves (int64)."""
        return np.fromiter((self.row[cid] for cid in curve_ids), dtype=np.int64, count=len(curve_ids))


_TABLES: dict[int, tuple[CurveBank, CurveTable]] = {}


def curve_table(bank: CurveBank) -> CurveTable:
    """The table of ``bank``, built on first use and kept for the life of the process (banks are few)."""
    if id(bank) not in _TABLES:  # the entry holds the bank, so its id is not reused while cached
        _TABLES[id(bank)] = (bank, CurveTable(bank))
    return _TABLES[id(bank)][1]
