"""Every curve of a bank tabulated once per process, so that starting an episode only gathers rows."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from curves.bank import CurveBank


class CurveTable:
    """``loss[r, s]`` = L(s) of curve ``r`` for s = 1 … length, held at its last value beyond the curve's end
    (no task runs past its curve's end); column 0, "no batch yet", is 0.

    ``row`` maps a curve id to its row; ``log_batch_size`` and ``log_lr`` hold the per-curve features,
    ``length`` each curve's batches and ``family`` the index of its family in ``families`` (the bank's, sorted).
    """

    def __init__(self, bank: CurveBank):
        ids = sorted(bank.records)
        self.row = {cid: i for i, cid in enumerate(ids)}
        self.loss = np.zeros((len(ids), bank.max_length + 1), dtype=np.float64)
        self.length = np.zeros(len(ids), dtype=np.int64)
        for i, cid in enumerate(ids):
            curve = bank.cumavg(cid)
            self.length[i] = curve.size
            self.loss[i, 1: curve.size + 1] = curve
            self.loss[i, curve.size + 1:] = curve[-1]
        self.log_batch_size = np.log([float(bank.records[cid].batch_size) for cid in ids])
        self.log_lr = np.log([float(bank.records[cid].lr) for cid in ids])
        self.families = tuple(sorted({bank.records[cid].family for cid in ids}))
        index = {name: i for i, name in enumerate(self.families)}
        self.family = np.array([index[bank.records[cid].family] for cid in ids], dtype=np.int64)

    def rows(self, curve_ids: tuple[str, ...]) -> np.ndarray:
        """Row indices of the listed curves (int64)."""
        return np.fromiter((self.row[cid] for cid in curve_ids), dtype=np.int64, count=len(curve_ids))


_TABLES: OrderedDict[int, tuple[CurveBank, CurveTable]] = OrderedDict()
_CACHED_BANKS = 8


def curve_table(bank: CurveBank) -> CurveTable:
    """The table of ``bank``, built on first use; the tables of the 8 most recently used banks are kept.

    Entries are keyed by the bank object's identity and hold the bank, so an id cannot be reused while its
    entry exists.
    """
    key = id(bank)
    if key in _TABLES:
        _TABLES.move_to_end(key)
    else:
        _TABLES[key] = (bank, CurveTable(bank))
        if len(_TABLES) > _CACHED_BANKS:
            _TABLES.popitem(last=False)
    return _TABLES[key][1]
