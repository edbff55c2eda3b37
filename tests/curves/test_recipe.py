"""Every curve's recipe is a pure function of (family, split, index) and lies in the paper's ranges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from curves.recipe import LR_RANGE, draw_recipe

names = st.sampled_from(["cnn_fmnist", "alstm_kjv_1", "dagger_pong"])
splits = st.sampled_from(["train", "val", "test"])


@given(names, splits, st.integers(0, 10_000))
def test_recipe_is_deterministic_and_in_range(family: str, split: str, index: int) -> None:
    first = draw_recipe(family, split, index, (16, 32, 64))
    assert first == draw_recipe(family, split, index, (16, 32, 64))
    assert first.batch_size in (16, 32, 64)
    assert LR_RANGE[0] <= first.lr <= LR_RANGE[1]
    assert 0 <= first.seed < 2**31 and 0 <= first.data_seed < 2**31


def test_curves_get_different_recipes() -> None:
    recipes = {draw_recipe("cnn_fmnist", "train", i, (16, 32, 64)) for i in range(30)}
    assert len({r.seed for r in recipes}) == 30
    assert {r.batch_size for r in recipes} == {16, 32, 64}
    assert draw_recipe("cnn_fmnist", "train", 0, (4, 8)) != draw_recipe("cnn_fmnist", "test", 0, (4, 8))
