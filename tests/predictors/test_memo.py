"""StepMemo: a row unchanged since the previous call is answered from memory, everything else is predicted."""

from __future__ import annotations

import numpy as np

from mara_agents.predictors.base import Prediction, PredictorQuery
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.predictors.memo import StepMemo
from mara_agents.predictors.wls import WLSPredictor


class CountingPredictor:
    """WLS that records how many rows it was asked for."""

    def __init__(self):
        self.rows: list[int] = []

    def predict(self, query: PredictorQuery) -> Prediction:
        self.rows.append(len(query))
        return WLSPredictor().predict(query)


def make_query(lengths: list[int], width: int = 40, eps: float = 0.5) -> PredictorQuery:
    s = np.arange(1, width + 1, dtype=np.float64)
    history = np.zeros((len(lengths), width))
    for row, length in enumerate(lengths):
        history[row, :length] = (3.0 + row) * s[:length] ** -0.4
    n = len(lengths)
    length = np.array(lengths)
    return PredictorQuery(history, length, np.full(n, 32.0), np.full(n, 1e-3), np.full(n, eps),
                          np.maximum(600.0 - length, 0.0))


def test_answers_equal_the_bare_predictor_and_only_changed_rows_are_recomputed():
    inner = CountingPredictor()
    memo = StepMemo(inner)
    first, second = make_query([10, 20, 30]), make_query([11, 20, 31])  # rows 0 and 2 were "served"
    for query in (first, second):
        np.testing.assert_array_equal(memo.predict(query).remaining, WLSPredictor().predict(query).remaining)
    assert inner.rows == [3, 2]
    assert (memo.hits, memo.misses) == (1, 5)


def test_any_changed_input_is_a_miss():
    memo = StepMemo(CountingPredictor())
    base = make_query([12, 12])
    memo.predict(base)
    changed_eps = make_query([12, 12], eps=0.45)
    np.testing.assert_array_equal(memo.predict(changed_eps).remaining,
                                  WLSPredictor().predict(changed_eps).remaining)
    assert memo.hits == 0
    rewritten = PredictorQuery(base.history.copy(), base.length, base.batch_size, base.lr, base.eps, base.cap)
    rewritten.history[1, 3] += 1e-3  # an earlier loss differs: not the same task state
    memo.predict(base)
    memo.predict(rewritten)
    assert memo.hits == 1  # row 0 only


def test_only_the_previous_call_is_remembered():
    inner = CountingPredictor()
    memo = StepMemo(inner)
    for lengths in ([10], [11], [10]):
        memo.predict(make_query(lengths))
    assert inner.rows == [1, 1, 1]


def test_per_sample_estimates_pass_through_and_a_hit_returns_the_remembered_ones():
    fm = load_predictor()
    memo = StepMemo(fm)
    first, second = make_query([10, 20, 30, 2]), make_query([11, 20, 31, 2])  # rows 1 and 3 unchanged
    before = memo.predict(first)
    np.testing.assert_array_equal(before.samples, fm.predict(first).samples)
    after = memo.predict(second)
    assert (memo.hits, memo.misses) == (2, 6)
    np.testing.assert_array_equal(after.samples[[1, 3]], before.samples[[1, 3]])
    assert np.isnan(after.samples[3]).all()  # not ready: no samples, remembered as such
    changed = fm.predict(second.subset(np.array([0, 2])))
    np.testing.assert_array_equal(after.samples[[0, 2]], changed.samples)
    np.testing.assert_array_equal(after.remaining[[0, 2]], changed.remaining)
    again = memo.predict(second)  # every row remembered: the predictor is not asked at all
    assert memo.misses == 6
    np.testing.assert_array_equal(again.samples, after.samples)
    np.testing.assert_array_equal(again.remaining, after.remaining)


def test_a_predictor_without_samples_gives_none_through_the_memo():
    memo = StepMemo(WLSPredictor())
    for lengths in ([10, 20], [10, 21]):  # a miss-only call, then a call with a hit
        assert memo.predict(make_query(lengths)).samples is None


class RowSum:
    """A predictor whose answer is a plain function of the row, so any answer given to the wrong row shows."""

    def predict(self, query: PredictorQuery) -> Prediction:
        return Prediction(remaining=query.history.sum(axis=1) + 1000.0 * query.length + query.eps)


def test_rows_that_move_repeat_and_come_back_always_get_their_own_answers():
    pool = make_query([10, 11, 12, 20, 0, 0], eps=0.5)  # two empty rows: the same bytes
    rng = np.random.default_rng(3)
    memo = StepMemo(RowSum())
    for _ in range(60):
        query = pool.subset(rng.integers(0, 6, size=5))  # rows keep, swap or change their positions
        np.testing.assert_array_equal(memo.predict(query).remaining, RowSum().predict(query).remaining)
    assert memo.hits > 100  # most rows were remembered, not recomputed
