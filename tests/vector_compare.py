"""Comparing a native vector env with Gymnasium's SyncVectorEnv step by step (shared by the env and agent tests)."""

from __future__ import annotations

import numpy as np


def assert_same(a, b, where):
    """Equal arrays or nested dicts of arrays: same keys, dtypes and values (NaN equal to NaN)."""
    if not isinstance(a, dict):
        left, right = np.asarray(a), np.asarray(b)
        assert left.dtype == right.dtype and left.shape == right.shape, (where, left.dtype, right.dtype)
        np.testing.assert_array_equal(left, right, err_msg=where)
        return
    assert set(a) == set(b), (where, sorted(a), sorted(b))
    for key in a:
        if isinstance(a[key], dict):
            assert_same(a[key], b[key], f"{where}/{key}")
        else:
            left, right = np.asarray(a[key]), np.asarray(b[key])
            assert left.dtype == right.dtype and left.shape == right.shape, (where, key, left.dtype, right.dtype)
            np.testing.assert_array_equal(left, right, err_msg=f"{where}/{key}")


def play_both(native, reference, choose, steps, reset_kwargs):
    """Step both vector envs with the same actions; every output must agree. Returns the number of ends."""
    obs, info = native.reset(**reset_kwargs)
    ref_obs, ref_info = reference.reset(**reset_kwargs)
    assert_same(obs, ref_obs, "reset obs")
    assert_same(info, ref_info, "reset info")
    ends = 0
    for t in range(steps):
        actions = choose(obs)
        out, ref = native.step(actions), reference.step(actions)
        for name, left, right in zip(("obs", "reward", "terminated", "truncated", "info"), out, ref):
            assert_same(left, right, f"step {t} {name}")
        obs = out[0]
        ends += int(out[2].sum())
    return ends
