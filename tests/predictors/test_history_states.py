"""FM's history states kept across calls (``mara_agents.predictors.fm.history_states``) and the store under them
(``DigestRows``): a kept state is the GRU's own bit for bit, the GRU runs only for new prefixes, and the store
stays bounded and forgets the least recently asked rows first."""

from __future__ import annotations

import numpy as np
import torch

from mara_agents.predictors.base import PredictorQuery
from mara_agents.predictors.digest_table import DigestRows
from mara_agents.predictors.fm.history_states import HistoryStates
from mara_agents.predictors.fm.predictor import load_predictor
from mara_agents.predictors.shared import canary_answers, canary_query


def random_query(rng: np.random.Generator, rows: int, width: int = 80) -> PredictorQuery:
    """Noisy power-law prefixes of random lengths (4 to ``width``), batch sizes and caps."""
    length = rng.integers(4, width + 1, rows)
    steps = np.arange(1, width + 1)
    curves = 2.0 * steps[None, :] ** -rng.uniform(0.1, 0.6, (rows, 1)) + rng.normal(0, 0.01, (rows, width))
    history = np.where(steps[None, :] <= length[:, None], np.cumsum(curves, axis=1) / steps, 0.0)
    current = history[np.arange(rows), length - 1]
    return PredictorQuery(history=history.astype(np.float32), length=length,
                          batch_size=rng.choice([32.0, 64.0, 128.0], rows), lr=rng.choice([1e-3, 3e-4], rows),
                          eps=current * rng.uniform(0.6, 0.95, rows), cap=rng.integers(1, 300, rows).astype(float))


def test_answers_reusing_kept_states_equal_fresh_answers_on_random_rows():
    """Random batches that repeat earlier prefixes with other caps and thresholds: every answer of the reusing
    path equals the plain path's for the same batch, and the GRU ran once per distinct prefix."""
    rng = np.random.default_rng(7)
    predictor = load_predictor()
    pool, asked_rows, kept = random_query(rng, 60), set(), {}
    for size in (3, 5, 17, 40, 3, 60):
        rows = rng.choice(60, size, replace=False)
        asked_rows.update(rows.tolist())
        query = pool.subset(rows)
        changed = PredictorQuery(query.history, query.length, query.batch_size, rng.choice([1e-3, 3e-4], size),
                                 query.eps * rng.uniform(0.9, 1.0, size), rng.integers(1, 300, size).astype(float))
        for asked in (query, changed):
            plain, reused = predictor.predict(asked), predictor.predict_invariant(asked, kept)
            assert np.array_equal(plain.remaining, reused.remaining)
            assert np.array_equal(plain.samples, reused.samples, equal_nan=True)
    assert kept["history_states"].computed == len(asked_rows)  # each prefix once (the pool's are distinct)
    assert kept["history_states"].reused > 0


def test_the_gru_runs_only_for_prefixes_not_seen_and_pads_small_batches():
    """States of one or two new prefixes come from a batch padded to three rows, and are the ones a larger batch
    computes; a repeated prefix in one call is computed once."""
    rng = np.random.default_rng(3)
    predictor = load_predictor()
    model, query = predictor.model, random_query(rng, 9)
    history = torch.as_tensor(query.history)
    length, batch_size = torch.as_tensor(query.length), torch.as_tensor(query.batch_size, dtype=torch.float32)
    batches: list[int] = []

    def counted(*args: torch.Tensor) -> torch.Tensor:
        batches.append(len(args[0]))
        return model.history_state(*args)

    states = HistoryStates(model.hparams.hidden, capacity=64)
    with torch.inference_mode():
        whole = model.history_state(history, length, batch_size)
        first = states(counted, history[[0, 0, 1]], length[[0, 0, 1]], batch_size[[0, 0, 1]])
        second = states(counted, history, length, batch_size)
    assert batches == [3, 7]  # rows 0 and 1 padded to three; then the seven prefixes not seen yet
    assert states.computed == 9 and states.reused == 2
    assert torch.equal(first, whole[[0, 0, 1]]) and torch.equal(second, whole)


def test_digest_rows_stay_bounded_and_keep_the_rows_asked_for_lately():
    """A full young generation becomes the old one; a row read from the old one moves back to the young one, so
    it survives the next turn, and the store never holds more than its capacity."""
    store = DigestRows(capacity=8, width=2, dtype=np.float32)
    keys = np.arange(40, dtype=np.uint64).reshape(20, 2) * np.uint64(0x9E3779B97F4A7C15)
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    store.put(keys[:4], values[:4])
    store.put(keys[4:8], values[4:8])  # generations of four: rows 0–3 are now the old one
    held, found = store.get(keys[[1, 9]])
    # row 1 moves to a young generation of its own (rows 4–7 become the old one, rows 0, 2 and 3 are forgotten)
    assert held.tolist() == [0] and np.array_equal(found, values[[1]])
    store.put(keys[8:11], values[8:11])
    held, found = store.get(keys[:11])
    assert len(store) <= 8
    assert set(held.tolist()) >= {1, 8, 9, 10} and 0 not in held.tolist()
    assert np.array_equal(found, values[held])


def test_the_canary_fails_a_predictor_whose_reusing_path_differs():
    """A predictor whose ``predict_invariant`` answers differently from ``predict`` is never shared."""
    predictor = load_predictor()
    assert np.array_equal(canary_answers(predictor), predictor.predict(canary_query()).remaining)

    class Drifting:
        model = predictor.model

        def predict(self, query):
            return predictor.predict(query)

        def predict_invariant(self, query, kept):
            answer = predictor.predict(query)
            return type(answer)(remaining=answer.remaining + 1e-9, samples=answer.samples)

    assert canary_answers(Drifting()) is None
