"""Answers shared among the policies of one process (``mara_agents.predictors.shared``): shared only inside a
scope, only for calls large enough to be batch-invariant, only for predictors that pass the canary, and
always the answers the predictor would give on its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mara_agents.predictors.base import Prediction, PredictorQuery
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.predictors.memo import StepMemo
from mara_agents.predictors.shared import SHARED, SharedAnswers, batch_invariant, canary_query


class RowWise:
    """A predictor whose answer for a row depends on that row only (``drift`` > 0: also on the batch size)."""

    def __init__(self, drift: float = 0.0):
        self.model = torch.nn.Linear(2, 1)
        self.drift = drift
        self.rows_asked = 0

    def predict(self, query: PredictorQuery) -> Prediction:
        self.rows_asked += len(query)
        remaining = query.history.sum(axis=1).astype(np.float64) + query.length + self.drift * len(query)
        return Prediction(remaining=remaining, samples=np.stack([remaining, remaining + 1.0], axis=1))


@pytest.fixture(autouse=True)
def closed_scope():
    SHARED.close()
    yield
    SHARED.close()


def queries(rows: int = 6, steps: int = 4) -> list[PredictorQuery]:
    """What one policy asks over a few steps: every row a little longer each step."""
    base = canary_query(rows)
    return [base.subset(np.arange(rows)) if step == 0 else PredictorQuery(
        base.history, np.minimum(base.length + step, base.history.shape[1]), base.batch_size, base.lr, base.eps,
        base.cap) for step in range(steps)]


def answers(memo: StepMemo, sequence: list[PredictorQuery]) -> list[Prediction]:
    return [memo.predict(query) for query in sequence]


def same(first: list[Prediction], second: list[Prediction]) -> bool:
    return all(np.array_equal(a.remaining, b.remaining) and np.array_equal(a.samples, b.samples)
               for a, b in zip(first, second))


def test_a_second_policy_in_the_same_scope_reuses_the_first_ones_answers_exactly():
    predictor, sequence = RowWise(), queries()
    alone = answers(StepMemo(RowWise()), sequence)
    SHARED.open("episodes A")
    first = answers(StepMemo(predictor), sequence)
    asked = predictor.rows_asked
    second = answers(StepMemo(predictor), sequence)
    assert predictor.rows_asked == asked  # every row of the second policy came from the shared answers
    assert same(first, alone) and same(second, alone)


def test_nothing_is_shared_outside_a_scope_or_after_the_scope_changes():
    predictor, sequence = RowWise(), queries()
    answers(StepMemo(predictor), sequence)
    answers(StepMemo(predictor), sequence)
    assert predictor.rows_asked == 2 * sum(len(q) for q in sequence)  # no scope: every row asked twice
    SHARED.open("episodes A")
    answers(StepMemo(predictor), sequence)
    before = predictor.rows_asked
    SHARED.open("episodes B")
    answers(StepMemo(predictor), sequence)
    assert predictor.rows_asked - before == sum(len(q) for q in sequence)


def test_calls_with_fewer_new_rows_than_the_invariant_batch_are_asked_as_always():
    predictor = RowWise()
    SHARED.open("episodes A")
    two = canary_query(2)
    StepMemo(predictor).predict(two)
    StepMemo(predictor).predict(two)
    assert predictor.rows_asked == 4  # not stored, not reused: 1–2 rows may take other kernels


def test_a_predictor_whose_answers_depend_on_the_batch_is_never_shared():
    drifting, sequence = RowWise(drift=1e-6), queries()
    assert not batch_invariant(drifting) and batch_invariant(RowWise())
    alone = answers(StepMemo(RowWise(drift=1e-6)), sequence)
    SHARED.open("episodes A")
    first = answers(StepMemo(drifting), sequence)
    second = answers(StepMemo(drifting), sequence)
    assert same(first, alone) and same(second, alone)


class WarmUp(RowWise):
    """A sampling predictor that, like FM, gives no samples (NaN) for a row with fewer than 20 observations."""

    def predict(self, query: PredictorQuery) -> Prediction:
        answer = super().predict(query)
        return Prediction(answer.remaining, samples=np.where((query.length >= 20)[:, None], answer.samples, np.nan))


def test_rows_without_samples_keep_the_other_rows_samples_when_shared():
    sequence = queries()
    alone = answers(StepMemo(WarmUp()), sequence)
    SHARED.open("episodes A")
    first, second = answers(StepMemo(WarmUp()), sequence), answers(StepMemo(WarmUp()), sequence)
    for shared in (first, second):
        for a, b in zip(shared, alone):
            assert a.samples is not None and np.isnan(a.samples).any(axis=1).any() and not np.isnan(a.samples).all()
            assert np.array_equal(a.remaining, b.remaining) and np.array_equal(a.samples, b.samples, equal_nan=True)


def test_the_shipped_fm_gives_the_same_answers_shared_or_not():
    # Holds whether or not this machine's kernels pass the canary: where they do not, nothing is shared.
    fm, sequence = load_predictor(), queries()
    alone = answers(StepMemo(fm), sequence)
    SHARED.open("episodes A")
    first, second = answers(StepMemo(fm), sequence), answers(StepMemo(fm), sequence)
    assert same(first, alone) and same(second, alone)


def test_a_full_store_starts_again_empty():
    store, predictor = SharedAnswers(capacity=8), RowWise()
    store.open("episodes A")
    query = canary_query(6)
    keys = [bytes([row]) for row in range(6)]
    store.answer(predictor, b"id", query, keys)
    store.answer(predictor, b"id", query, [bytes([row + 10]) for row in range(6)])
    assert len(store) == 6


def test_rows_found_in_a_call_that_fills_the_store_keep_their_answers():
    store, predictor = SharedAnswers(capacity=6), RowWise()
    store.open("episodes A")
    query = canary_query(7)
    alone = predictor.predict(query)
    keys = [bytes([row]) for row in range(7)]
    store.answer(predictor, b"id", query.subset(np.arange(6)), keys[:6])
    mixed = np.array([0, 1, 2, 6, 3, 4, 5])  # six stored rows and one new: the store starts again empty
    remaining, samples = store.answer(predictor, b"id", query.subset(mixed), [keys[row] for row in mixed])
    assert len(store) == 1  # it did start again
    assert np.array_equal(remaining, alone.remaining[mixed]) and np.array_equal(samples, alone.samples[mixed])


def test_a_row_asked_twice_in_one_call_does_not_shift_the_answers_stored_after_it():
    # Empty slots at an episode's start give identical rows; each stored row must keep its own answer when
    # later calls store more (a count of distinct rows used as the next free position overwrote them).
    store, predictor = SharedAnswers(), RowWise()
    store.open("episodes A")
    query = canary_query(8)
    alone = predictor.predict(query).remaining
    twice = np.array([0, 0, 0, 1, 1, 2])
    store.answer(predictor, b"id", query.subset(twice), [bytes([row]) for row in twice])
    later = np.arange(3, 8)
    store.answer(predictor, b"id", query.subset(later), [bytes([row]) for row in later])
    everything = np.arange(8)
    remaining, _ = store.answer(predictor, b"id", query, [bytes([row]) for row in everything])
    assert np.array_equal(remaining, alone)
