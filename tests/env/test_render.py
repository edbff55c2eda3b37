"""Rendering: ``ansi`` text, the ``rgb_array`` Gantt chart, the ``human`` window and GIF saving."""

import warnings

import gymnasium as gym
import matplotlib
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from PIL import Image

import mara_env
from mara_env import render

matplotlib.use("Agg")  # as on a machine without a display


def _play(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        obs, *_ = env.step(rng.integers(0, 11, size=7))
    return obs


@pytest.mark.filterwarnings("ignore:render_mode='human' shows nothing")  # the checker tries every mode
def test_rgb_array_passes_the_checker_and_returns_an_image(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3, render_mode="rgb_array")
    check_env(env.unwrapped, skip_render_check=False)
    _play(env, 0)
    start = env.render()
    _play(env, 40)
    later = env.render()
    assert start.dtype == np.uint8 and start.ndim == 3 and start.shape[2] == 3
    assert start.shape == later.shape and not np.array_equal(start, later)


def test_record_holds_the_task_each_node_served(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5, render_mode="rgb_array", conflicts="repair")
    env.reset(seed=1)
    sim = env.unwrapped.engine.sim
    rng = np.random.default_rng(3)
    for _ in range(30):
        action = rng.integers(0, 11, size=7)
        occupied = sim.slot_task >= 0
        slot_task = sim.slot_task.copy()
        env.step(action)
        served = env.unwrapped.frontend.record.served[-1]
        busy = served >= 0
        assert busy.sum() == len(sim.last_served)  # as many busy nodes as tasks served
        assert set(served[busy].tolist()) == set(slot_task[list(sim.last_served)].tolist())
        assert np.all(np.isin(served[busy], slot_task[occupied]))


@pytest.mark.parametrize("make", [mara_env.env, mara_env.parallel_env])
def test_pettingzoo_envs_render_the_chart(bank_dir, make):
    env = make(bank=str(bank_dir), arrival_prob=0.3, render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    assert image.dtype == np.uint8 and image.shape[2] == 3


def test_render_before_reset_is_a_clear_error(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), render_mode="rgb_array", disable_env_checker=True)
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.render()


def _frames(bank_dir, picks, steps, seed=0, every=1):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3, render_mode="rgb_array", conflicts="repair")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    frames = [env.render()]
    for step in range(1, steps + 1):
        action = rng.integers(0, 11, size=7) if picks == "random" else np.arange(1, 8)
        _, _, terminated, _, _ = env.step(action)
        if step % every == 0 or terminated:
            frames.append(env.render())
        if terminated:
            break
    return frames, env.unwrapped.frontend.sim


def test_frames_are_fixed_size_rgb_images(bank_dir):
    frames, _ = _frames(bank_dir, "random", 60, every=20)
    assert all(f.shape == (render.HEIGHT, render.WIDTH, 3) and f.dtype == np.uint8 for f in frames)
    assert all(f.flags.writeable for f in frames)  # the caller may draw on its copy


def test_the_same_episode_gives_the_same_pixels(bank_dir):
    first, _ = _frames(bank_dir, "random", 80, seed=4, every=20)
    again, _ = _frames(bank_dir, "random", 80, seed=4, every=20)
    other, _ = _frames(bank_dir, "random", 80, seed=5, every=20)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[-1], other[-1])


def _has(region, colour):
    return bool(np.all(region == np.array(colour, dtype=np.uint8), axis=-1).any())


def test_legend_shows_every_mark(bank_dir):
    frames, _ = _frames(bank_dir, "fixed", 0)
    legend = frames[0][render.LEGEND_Y:, :]
    for colour in (render.WINDOW, render.SUCCESS, render.EXPIRY, render.NOW, tuple(render.TASK_COLOURS[0])):
        assert _has(legend, colour), colour
    assert not _has(frames[0][:render.LEGEND_Y, render.PLOT_LEFT:render.PLOT_RIGHT], render.SUCCESS)


def _text(region):
    """Pixels dark enough to be text, other than the line marking the current step."""
    return int(((region.max(axis=-1) < 100) & ~np.all(region == render.NOW, axis=-1)).sum())


def test_every_arrived_task_row_is_labelled(bank_dir):
    frames, sim = _frames(bank_dir, "fixed", 12)
    arrived = int((sim.arrival <= sim.t).sum())
    edges = render._rows(render.TASK_TOP, render.TASK_BOTTOM, arrived)
    assert 1 < arrived and edges[1] - edges[0] >= render.MIN_LABEL_SPACING
    labels = frames[-1][:, render.PLOT_LEFT - 20:render.PLOT_LEFT - 2]
    assert all(_text(labels[edges[row]:edges[row + 1]]) > 0 for row in range(arrived))
    assert _text(labels[edges[arrived - 1] + 2 * (edges[1] - edges[0]):render.TASK_BOTTOM]) == 0  # none below


def test_long_stretches_carry_their_task_number(bank_dir):
    fixed, _ = _frames(bank_dir, "fixed", 40)
    random_picks, _ = _frames(bank_dir, "random", 40)
    node_panel = np.s_[render.NODE_TOP:render.NODE_BOTTOM, render.PLOT_LEFT:render.PLOT_RIGHT - 1]
    assert _text(fixed[-1][node_panel]) > 20  # digits on the bars
    assert _text(random_picks[-1][node_panel]) == 0  # stretches of a step or two: no room for a number


def test_headless_human_mode_warns_once_and_draws_nothing(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3, render_mode="human")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _play(env, 5)
        assert env.render() is None
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1
    assert "render_mode='human'" in messages[0] and "rgb_array" in messages[0] and "save_episode" in messages[0]
    assert env.unwrapped.frontend.viewer.window is None
    env.close()


def test_human_mode_with_a_window_draws_after_every_step(bank_dir, monkeypatch):
    monkeypatch.setattr(render, "interactive_backend", lambda: True)
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.3, render_mode="human")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*non-interactive.*")  # Agg stands in for a window here
        _play(env, 3)
        viewer = env.unwrapped.frontend.viewer
        assert viewer.window is not None
        assert env.render() is None
    env.close()
    assert viewer.window is None


def test_save_episode_writes_a_multi_frame_gif(bank_dir, tmp_path):
    frames, _ = _frames(bank_dir, "fixed", 30, every=10)
    path = render.save_episode(frames, tmp_path / "episode.gif", fps=5)
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == len(frames) == 4
        assert gif.size == (render.WIDTH, render.HEIGHT)
        assert gif.info["duration"] == 200 and gif.info["loop"] == 0
        gif.seek(len(frames) - 1)
        last = np.asarray(gif.convert("RGB"), dtype=np.int64)
    assert np.abs(last - frames[-1]).mean() < 1.0  # the fixed palette keeps the picture
    assert [p.name for p in tmp_path.iterdir()] == ["episode.gif"]  # no partial file left


@pytest.mark.parametrize("frames, path, fps, culprit", [
    ([np.zeros((4, 4, 3), np.uint8)], "x.mp4", 4, "RecordVideo"),
    ([], "x.gif", 4, "frames"),
    ([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 5, 3), np.uint8)], "x.gif", 4, "frames\\[1\\]"),
    ([np.zeros((4, 4, 3), np.float32)], "x.gif", 4, "frames\\[0\\]"),
    ([np.zeros((4, 4, 3), np.uint8)], "x.gif", 0, "fps"),
    ([np.zeros((4, 4, 3), np.uint8)], "no/such/dir/x.gif", 4, "does not exist"),
])
def test_save_episode_refuses_bad_input_naming_it(tmp_path, frames, path, fps, culprit):
    with pytest.raises(ValueError, match=culprit):
        render.save_episode(frames, tmp_path / path, fps=fps)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("horizon, step", [(1, 1), (8, 1), (9, 2), (40, 5), (700, 100), (1000, 200)])
def test_time_axis_ticks_are_round_and_few(horizon, step):
    assert render._tick_step(horizon) == step
