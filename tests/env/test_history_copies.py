"""HistoryCopies hands out copies equal to the buffer at that moment, recycling only copies nobody holds."""

import weakref

import numpy as np

from mara_env.history_copies import HistoryCopies


def test_every_copy_equals_the_buffer_after_any_reported_writes_and_held_copies_stay_as_they_were():
    rng = np.random.default_rng(0)
    buffer = np.zeros((3, 4, 5), dtype=np.float32)
    copies = HistoryCopies(buffer)
    handed, held, recycled = [], [], 0
    for step in range(60):
        copy = copies.copy()
        np.testing.assert_array_equal(copy, buffer, err_msg=f"step {step}")
        recycled += len(handed) >= 2 and handed[-2]() is copy
        handed.append(weakref.ref(copy))
        if step % 9 == 4:
            held.append((copy, copy.copy()))
        del copy
        entries = rng.choice(buffer.size, 3, replace=False)  # every step writes, the first one included
        buffer.reshape(-1)[entries] = rng.random(3)
        copies.wrote(entries)
        if step % 4 == 1:
            rows = rng.choice(12, 2, replace=False)
            buffer.reshape(-1, 5)[rows] = rng.random((2, 5))
            copies.rewrote_rows(rows)
    for copy, snapshot in held:
        np.testing.assert_array_equal(copy, snapshot)
    assert recycled >= 40, recycled
