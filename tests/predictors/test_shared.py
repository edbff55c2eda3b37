"""Answers shared among every caller of a process and, through answer files, among processes
(``mara_agents.predictors.shared``): only for calls large enough to be batch-invariant, only for predictors
that pass the canary, and always the answers the predictor would give on its own."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import torch

from mara_agents.predictors.base import Prediction, PredictorQuery
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.predictors.memo import StepMemo, row_digests
from mara_agents.predictors.shared import SHARED, SharedAnswers, batch_invariant, canary_query


class RowWise:
    """A predictor whose answer for a row depends on that row only (``drift`` > 0: also on the batch size)."""

    def __init__(self, drift: float = 0.0):
        self.model = torch.nn.Linear(2, 1)
        for parameter in self.model.parameters():
            torch.nn.init.zeros_(parameter)  # every instance has the same identity
        self.drift = drift
        self.rows_asked = 0

    def predict(self, query: PredictorQuery) -> Prediction:
        self.rows_asked += len(query)
        remaining = query.history.sum(axis=1).astype(np.float64) + query.length + self.drift * len(query)
        return Prediction(remaining=remaining, samples=np.stack([remaining, remaining + 1.0], axis=1))


@pytest.fixture(autouse=True)
def own_store(tmp_path, monkeypatch):
    """Every test starts with an empty in-memory table and answer files of its own."""
    SHARED.close()
    monkeypatch.setenv("MARA_FM_STORE", str(tmp_path / "store"))
    yield tmp_path / "store"
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


def digests(query: PredictorQuery) -> list[bytes]:
    return row_digests(query, np.arange(len(query)))


def test_a_second_policy_reuses_the_first_ones_answers_exactly():
    predictor, sequence = RowWise(), queries()
    alone = [RowWise().predict(query) for query in sequence]
    first = answers(StepMemo(predictor), sequence)
    asked = predictor.rows_asked
    second = answers(StepMemo(predictor), sequence)
    assert predictor.rows_asked == asked  # every row of the second policy came from the shared answers
    assert same(first, alone) and same(second, alone)


def test_a_later_process_reads_the_answers_from_the_files(own_store):
    sequence = queries()
    first = answers(StepMemo(RowWise()), sequence)
    SHARED.close()  # writes the files and forgets everything, as a process that ends
    assert list(own_store.rglob("*.answers"))
    later = RowWise()
    again = answers(StepMemo(later), sequence)
    assert same(first, again)
    assert later.rows_asked == 12 + 12 + 3  # only the canary's checking calls: every row came from the files


def answer_in_a_worker(sequence: list[PredictorQuery]) -> int:
    answers(StepMemo(RowWise()), sequence)
    return len(SHARED)


def test_a_pool_worker_writes_its_answers_when_it_ends(own_store):
    sequence = queries()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:  # as the evaluation's
        assert pool.submit(answer_in_a_worker, sequence).result() > 0
    later = RowWise()
    answers(StepMemo(later), sequence)
    assert later.rows_asked == 12 + 12 + 3  # the canary only: the worker's answers were in its files


def test_nothing_is_written_when_the_store_is_off(own_store, monkeypatch):
    monkeypatch.setenv("MARA_FM_STORE", "off")
    predictor, sequence = RowWise(), queries()
    answers(StepMemo(predictor), sequence)
    asked = predictor.rows_asked
    answers(StepMemo(predictor), sequence)
    assert predictor.rows_asked == asked  # still shared within the process
    SHARED.close()
    assert not own_store.exists()


def test_calls_with_fewer_new_rows_than_the_invariant_batch_are_asked_as_always():
    predictor = RowWise()
    two = canary_query(2)
    StepMemo(predictor).predict(two)
    StepMemo(predictor).predict(two)
    assert predictor.rows_asked == 4  # not stored, not reused: 1–2 rows may take other kernels


def test_a_predictor_whose_answers_depend_on_the_batch_is_never_shared(own_store):
    drifting, sequence = RowWise(drift=1e-6), queries()
    assert not batch_invariant(drifting) and batch_invariant(RowWise())
    alone = answers(StepMemo(RowWise(drift=1e-6)), sequence)
    first = answers(StepMemo(drifting), sequence)
    second = answers(StepMemo(drifting), sequence)
    assert same(first, alone) and same(second, alone)
    SHARED.close()
    assert not list(own_store.rglob("*.answers"))


class WarmUp(RowWise):
    """A sampling predictor that, like FM, gives no samples (NaN) for a row with fewer than 20 observations."""

    def predict(self, query: PredictorQuery) -> Prediction:
        answer = super().predict(query)
        return Prediction(answer.remaining, samples=np.where((query.length >= 20)[:, None], answer.samples, np.nan))


def test_rows_without_samples_keep_the_other_rows_samples_when_shared():
    sequence = queries()
    alone = [WarmUp().predict(query) for query in sequence]
    first, second = answers(StepMemo(WarmUp()), sequence), answers(StepMemo(WarmUp()), sequence)
    SHARED.close()  # the third policy reads the rows back from the files
    third = answers(StepMemo(WarmUp()), sequence)
    for shared in (first, second, third):
        for a, b in zip(shared, alone):
            assert a.samples is not None and np.isnan(a.samples).any(axis=1).any() and not np.isnan(a.samples).all()
            assert np.array_equal(a.remaining, b.remaining) and np.array_equal(a.samples, b.samples, equal_nan=True)


def test_the_shipped_fm_answers_random_rows_from_the_table_as_it_would_alone():
    # Holds whether or not this machine's kernels pass the canary: where they do not, nothing is shared.
    fm, rng = load_predictor(), np.random.default_rng(7)
    base = canary_query(40)
    stored = base.subset(rng.permutation(40)[:25])
    StepMemo(fm).predict(stored)  # fills the table with 25 rows (those ready)
    SHARED.close()  # and the files; the next call reads them back
    for _ in range(3):  # random rows, some in the table and some not, in random order
        rows = rng.choice(40, size=int(rng.integers(3, 30)), replace=False)
        mixed = base.subset(rows)
        via_table, alone = StepMemo(fm).predict(mixed), fm.predict(mixed)
        assert np.array_equal(via_table.remaining, alone.remaining)
        assert np.array_equal(via_table.samples, alone.samples, equal_nan=True)


def test_a_full_store_starts_again_empty():
    store, predictor = SharedAnswers(capacity=8), RowWise()
    assert store.usable(b"id", predictor)
    query = canary_query(6)
    store.answer(predictor, b"id", query, [bytes([row]) * 16 for row in range(6)])
    store.answer(predictor, b"id", query, [bytes([row + 10]) * 16 for row in range(6)])
    assert len(store) == 6


def test_rows_found_in_a_call_that_fills_the_store_keep_their_answers():
    store, predictor = SharedAnswers(capacity=6), RowWise()
    assert store.usable(b"id", predictor)
    query = canary_query(7)
    alone = predictor.predict(query)
    keys = [bytes([row]) * 16 for row in range(7)]
    store.answer(predictor, b"id", query.subset(np.arange(6)), keys[:6])
    mixed = np.array([0, 1, 2, 6, 3, 4, 5])  # six stored rows and one new: the store starts again empty
    remaining, samples = store.answer(predictor, b"id", query.subset(mixed), [keys[row] for row in mixed])
    assert len(store) == 1  # it did start again
    assert np.array_equal(remaining, alone.remaining[mixed]) and np.array_equal(samples, alone.samples[mixed])


def test_a_row_asked_twice_in_one_call_does_not_shift_the_answers_stored_after_it():
    # Empty slots at an episode's start give identical rows; each stored row must keep its own answer when
    # later calls store more (a count of distinct rows used as the next free position overwrote them).
    store, predictor = SharedAnswers(), RowWise()
    assert store.usable(b"id", predictor)
    query = canary_query(8)
    alone = predictor.predict(query).remaining
    twice = np.array([0, 0, 0, 1, 1, 2])
    store.answer(predictor, b"id", query.subset(twice), digests(query.subset(twice)))
    later = np.arange(3, 8)
    store.answer(predictor, b"id", query.subset(later), digests(query.subset(later)))
    remaining, _ = store.answer(predictor, b"id", query, digests(query))
    assert np.array_equal(remaining, alone)
