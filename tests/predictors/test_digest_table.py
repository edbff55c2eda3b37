"""The NumPy hash table behind the shared predictor answers: every inserted digest is found with its row
number, nothing else is, whatever the collisions, and clearing forgets everything."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.predictors.digest_table import DigestTable


def digest(n: int) -> bytes:
    return hashlib.blake2b(n.to_bytes(8, "little"), digest_size=16).digest()


def colliding(count: int, table_size: int) -> list[bytes]:
    """Digests whose first 8 bytes all pick the same home position in a table of ``table_size``."""
    keys = []
    for low in range(count):
        head = (7 + low * table_size).to_bytes(8, "little")
        keys.append(head + low.to_bytes(8, "little"))
    return keys


def test_inserted_digests_are_found_with_their_rows_and_others_are_not():
    table = DigestTable(capacity=100)
    rows = table.insert([digest(n) for n in range(60)])
    assert rows.tolist() == list(range(60)) and len(table) == 60
    asked = [digest(n) for n in (59, 3, 1000, 0, 60)]
    assert table.lookup(asked).tolist() == [59, 3, -1, 0, -1]
    assert table.insert([digest(60), digest(61)]).tolist() == [60, 61]
    assert table.lookup([digest(61)]).tolist() == [61]


def test_digests_with_one_home_position_are_all_kept_apart():
    table = DigestTable(capacity=8)  # 16 positions: every key below starts its walk at position 7
    keys = colliding(8, 16)
    table.insert(keys[:5])
    assert table.lookup(keys).tolist() == [0, 1, 2, 3, 4, -1, -1, -1]
    table.insert(keys[5:])
    assert table.lookup(keys[::-1]).tolist() == [7, 6, 5, 4, 3, 2, 1, 0]  # walks wrap past the table's end


def test_clear_forgets_every_digest_and_numbers_rows_from_zero_again():
    table = DigestTable(capacity=10)
    table.insert([digest(n) for n in range(10)])
    table.clear()
    assert len(table) == 0 and (table.lookup([digest(n) for n in range(10)]) == -1).all()
    assert table.insert([digest(5)]).tolist() == [0]


def test_inserting_past_the_capacity_or_a_wrong_digest_size_is_refused():
    table = DigestTable(capacity=3)
    with pytest.raises(ValueError, match="capacity of 3"):
        table.insert([digest(n) for n in range(4)])
    with pytest.raises(ValueError, match="16 bytes"):
        table.lookup([b"short"])
    with pytest.raises(ValueError, match="at least 1"):
        DigestTable(capacity=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 400), max_size=40), max_size=8), st.integers(1, 64))
def test_the_table_answers_as_a_dict_would(batches, capacity):
    table, reference = DigestTable(capacity), {}
    for batch in batches:
        found = table.lookup([digest(n) for n in batch])
        assert found.tolist() == [reference.get(n, -1) for n in batch]
        new = list(dict.fromkeys(n for n in batch if n not in reference))
        if len(reference) + len(new) > capacity:
            table.clear()
            reference.clear()
        if len(new) > capacity:
            continue
        rows = table.insert([digest(n) for n in new])
        reference.update(zip(new, rows.tolist()))
        assert len(table) == len(reference)
    assert np.all(table.lookup([digest(n) for n in reference]) == np.array(list(reference.values()), dtype=np.int64))
