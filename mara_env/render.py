"""``render_mode="rgb_array"`` and ``"human"``: the episode so far as a Gantt chart, and saving it as a GIF.

Top panel: nodes × time, each node's row coloured by the task it served at each step (blank while idle),
with the task's number on stretches wide enough to hold it. Bottom panel: one row per task that has arrived,
labelled with its number: the window from arrival to deadline in grey, the time in a slot in the task's
colour, and how it ended, a green dot for a success and a red cross for an expiry. A dark line marks the
current step; a legend under the chart names each mark.

The chart is drawn with NumPy and Pillow onto a fixed background (frame, axis names, node labels, legend)
made once per number of nodes, so a frame costs milliseconds rather than a matplotlib redraw. matplotlib is
imported only by the ``human`` window, so ``import mara_env`` stays light.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from mara_env.simulator import ABANDONED, EXPIRED, SUCCEEDED, Simulator

WIDTH, HEIGHT = 640, 400
PLOT_LEFT, PLOT_RIGHT = 56, WIDTH - 12
NODE_TOP, NODE_BOTTOM = 24, 124
TASK_TOP, TASK_BOTTOM = 134, 330
TICK_LABEL_Y, AXIS_NAME_Y, LEGEND_Y = 336, 352, 376
MIN_LABEL_SPACING = 11  # pixels between two row labels, so that they never overlap

WHITE, BLACK, FRAME, NOW = (255, 255, 255), (0, 0, 0), (90, 90, 90), (60, 60, 60)
WINDOW, SUCCESS, EXPIRY = (217, 217, 217), (44, 160, 44), (214, 39, 40)
# matplotlib's "tab20" palette; task i is drawn in colour i mod 20.
TASK_COLOURS = np.array([[int(code[i:i + 2], 16) for i in (0, 2, 4)] for code in (
    "1f77b4", "aec7e8", "ff7f0e", "ffbb78", "2ca02c", "98df8a", "d62728", "ff9896", "9467bd", "c5b0d5",
    "8c564b", "c49c94", "e377c2", "f7b6d2", "7f7f7f", "c7c7c7", "bcbd22", "dbdb8d", "17becf", "9edae5")],
    dtype=np.uint8)


class EpisodeRecord:
    """Which task each node served at each step (−1 idle), kept only when a drawing mode is on."""

    def __init__(self) -> None:
        self.served: list[np.ndarray] = []

    def clear(self) -> None:
        self.served = []

    def add(self, tasks: np.ndarray) -> None:
        self.served.append(np.asarray(tasks, dtype=np.int64).copy())


@lru_cache(maxsize=1)
def _font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=11)


def _rows(top: int, bottom: int, count: int) -> np.ndarray:
    """Pixel edges of ``count`` equal rows between ``top`` and ``bottom`` (``count + 1`` values)."""
    return np.round(np.linspace(top, bottom, max(count, 1) + 1)).astype(np.int64)


def _row_label_stride(edges: np.ndarray) -> int:
    """Label every row, or every k-th when rows are too thin for a label each."""
    height = (edges[-1] - edges[0]) / max(edges.size - 1, 1)
    return max(1, math.ceil(MIN_LABEL_SPACING / max(height, 1e-9)))


def _label_rows(draw: ImageDraw.ImageDraw, edges: np.ndarray) -> None:
    """Row numbers right-aligned against the left axis."""
    font = _font()
    for row in range(0, edges.size - 1, _row_label_stride(edges)):
        draw.text((PLOT_LEFT - 4, (edges[row] + edges[row + 1]) / 2), str(row), fill=BLACK, font=font, anchor="rm")


def _vertical_text(image: Image.Image, text: str, centre: tuple[int, int]) -> None:
    font = _font()
    left, top, right, bottom = font.getbbox(text)
    label = Image.new("RGB", (right - left + 2, bottom - top + 2), WHITE)
    ImageDraw.Draw(label).text((1 - left, 1 - top), text, fill=BLACK, font=font)
    label = label.rotate(90, expand=True)
    image.paste(label, (centre[0] - label.width // 2, centre[1] - label.height // 2))


def _legend(draw: ImageDraw.ImageDraw) -> None:
    """One mark and its name for each thing the chart draws, in a row under it."""
    def window(x: int, y: int) -> None:
        draw.rectangle((x, y - 2, x + 14, y + 2), fill=WINDOW)

    def in_slot(x: int, y: int) -> None:
        draw.rectangle((x, y - 4, x + 6, y + 4), fill=tuple(TASK_COLOURS[0]))
        draw.rectangle((x + 7, y - 4, x + 14, y + 4), fill=tuple(TASK_COLOURS[2]))

    def now(x: int, y: int) -> None:
        draw.line((x + 7, y - 6, x + 7, y + 6), fill=NOW, width=1)

    font = _font()
    x, y = PLOT_LEFT, LEGEND_Y + 6
    for name, mark in (("arrival to deadline", window), ("in a slot (task colour)", in_slot),
                       ("succeeded", lambda x, y: _success_mark(draw, x + 7, y)),
                       ("expired", lambda x, y: _expiry_mark(draw, x + 7, y)), ("now", now)):
        mark(x, y)
        draw.text((x + 19, y), name, fill=BLACK, font=font, anchor="lm")
        x += 19 + int(font.getlength(name)) + 16


def _success_mark(draw: ImageDraw.ImageDraw, x: float, y: float) -> None:
    draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=SUCCESS)


def _expiry_mark(draw: ImageDraw.ImageDraw, x: float, y: float) -> None:
    draw.line((x - 3, y - 3, x + 3, y + 3), fill=EXPIRY, width=2)
    draw.line((x - 3, y + 3, x + 3, y - 3), fill=EXPIRY, width=2)


@lru_cache(maxsize=8)
def _background(num_nodes: int) -> np.ndarray:
    """What every frame of a ``num_nodes`` chart shares: panel frames, axis names, node labels, legend."""
    image = Image.new("RGB", (WIDTH, HEIGHT), WHITE)
    draw = ImageDraw.Draw(image)
    for top, bottom in ((NODE_TOP, NODE_BOTTOM), (TASK_TOP, TASK_BOTTOM)):
        draw.rectangle((PLOT_LEFT - 1, top - 1, PLOT_RIGHT, bottom), outline=FRAME)
    _label_rows(draw, _rows(NODE_TOP, NODE_BOTTOM, num_nodes))
    _vertical_text(image, "node", (14, (NODE_TOP + NODE_BOTTOM) // 2))
    _vertical_text(image, "task", (14, (TASK_TOP + TASK_BOTTOM) // 2))
    draw.text(((PLOT_LEFT + PLOT_RIGHT) / 2, AXIS_NAME_Y), "time step", fill=BLACK, font=_font(), anchor="mt")
    _legend(draw)
    pixels = np.asarray(image).copy()
    pixels.setflags(write=False)
    return pixels


def _tick_step(horizon: int) -> int:
    """A round spacing (1, 2 or 5 times a power of ten) giving at most about eight ticks."""
    raw = max(horizon / 8, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    return next(int(m * power) for m in (1, 2, 5, 10) if m * power >= raw)


def _node_bars(pixels: np.ndarray, served: np.ndarray, to_x: float) -> None:
    """Each node's row coloured by the task it served at the step under each pixel column (idle: blank)."""
    width = PLOT_RIGHT - PLOT_LEFT
    steps = np.floor((np.arange(width) + 0.5) / to_x).astype(np.int64)
    inside = steps < served.shape[1]
    tasks = np.full((served.shape[0], width), -1, dtype=np.int64)
    tasks[:, inside] = served[:, steps[inside]]
    colours = np.where((tasks >= 0)[..., None], TASK_COLOURS[np.maximum(tasks, 0) % len(TASK_COLOURS)], WHITE)
    edges = _rows(NODE_TOP, NODE_BOTTOM, served.shape[0])
    for node in range(served.shape[0]):
        pad = (edges[node + 1] - edges[node]) // 8
        pixels[edges[node] + pad:edges[node + 1] - pad, PLOT_LEFT:PLOT_RIGHT] = colours[node]


def _node_bar_labels(draw: ImageDraw.ImageDraw, served: np.ndarray, to_x: float) -> None:
    """The task's number on every stretch of one task wide enough to hold it."""
    font = _font()
    edges = _rows(NODE_TOP, NODE_BOTTOM, served.shape[0])
    if edges[1] - edges[0] < MIN_LABEL_SPACING:
        return
    for node, row in enumerate(served):
        starts = np.flatnonzero(np.diff(row, prepend=-2))
        lengths = np.diff(starts, append=row.size)
        for start, length in zip(starts.tolist(), lengths.tolist()):
            task = int(row[start])
            if task >= 0 and length * to_x >= font.getlength(str(task)) + 6:
                centre = (PLOT_LEFT + (start + length / 2) * to_x, (edges[node] + edges[node + 1]) / 2)
                draw.text(centre, str(task), fill=BLACK, font=font, anchor="mm")


def _task_rows(draw: ImageDraw.ImageDraw, sim: Simulator, to_x: float) -> None:
    """Window, time in a slot and outcome of every task that has arrived, one row each, labelled."""
    arrived = np.flatnonzero(sim.arrival <= sim.t)
    edges = _rows(TASK_TOP, TASK_BOTTOM, arrived.size)
    if arrived.size:
        _label_rows(draw, edges)

    def x(step: float) -> float:
        return min(PLOT_LEFT + step * to_x, PLOT_RIGHT - 1)

    for row, task in enumerate(arrived.tolist()):
        top, bottom = edges[row], edges[row + 1]
        middle, half = (top + bottom) / 2, (bottom - top) / 2
        arrival, deadline = int(sim.arrival[task]), int(sim.deadline[task])
        draw.rectangle((x(arrival), middle - 0.3 * half, x(deadline), middle + 0.3 * half), fill=WINDOW)
        admitted, left = int(sim.admitted_at[task]), int(sim.left_at[task])
        if admitted >= 0:
            end = max(left if left >= 0 else sim.t, admitted)
            draw.rectangle((x(admitted), middle - 0.6 * half, max(x(end), x(admitted) + 1), middle + 0.6 * half),
                           fill=tuple(TASK_COLOURS[task % len(TASK_COLOURS)]))
        if sim.status[task] == SUCCEEDED:
            _success_mark(draw, x(left), middle)
        elif sim.status[task] in (EXPIRED, ABANDONED):
            _expiry_mark(draw, x(left), middle)


def _time_axis(draw: ImageDraw.ImageDraw, horizon: int, to_x: float) -> None:
    font = _font()
    step = _tick_step(horizon)
    for tick in range(0, horizon + 1, step):
        x = PLOT_LEFT + tick * to_x
        for bottom in (NODE_BOTTOM, TASK_BOTTOM):
            draw.line((x, bottom, x, bottom + 3), fill=FRAME)
        draw.text((x, TICK_LABEL_Y), str(tick), fill=BLACK, font=font, anchor="mt")


def draw_gantt(record: EpisodeRecord, sim: Simulator) -> np.ndarray:
    """The chart as a ``(400, 640, 3)`` uint8 image; the same episode state always gives the same pixels."""
    served = np.stack(record.served, axis=1) if record.served else np.full((sim.num_nodes, 0), -1)
    arrived = sim.arrival <= sim.t
    horizon = int(max(sim.t, 1, *sim.deadline[arrived].tolist()))
    to_x = (PLOT_RIGHT - PLOT_LEFT) / horizon
    pixels = _background(sim.num_nodes).copy()
    _node_bars(pixels, served, to_x)
    image = Image.fromarray(pixels)
    draw = ImageDraw.Draw(image)
    _node_bar_labels(draw, served, to_x)
    _task_rows(draw, sim, to_x)
    _time_axis(draw, horizon, to_x)
    now = min(PLOT_LEFT + sim.t * to_x, PLOT_RIGHT - 1)
    for top, bottom in ((NODE_TOP, NODE_BOTTOM), (TASK_TOP, TASK_BOTTOM)):
        draw.line((now, top, now, bottom - 1), fill=NOW)
    title = f"t = {sim.t}   successes {sim.totals['successes']}   expiries {sim.totals['expirations']}"
    draw.text((WIDTH / 2, 5), title, fill=BLACK, font=_font(), anchor="mt")
    return np.array(image)


@lru_cache(maxsize=1)
def _gif_palette() -> Image.Image:
    """A fixed GIF palette holding the chart's colours, a grey ramp and each task colour darkened by text
    drawn over it: mapping a frame onto it takes milliseconds, where Pillow's per-frame adaptive palette
    takes a fifth of a second."""
    colours = [*map(tuple, TASK_COLOURS.tolist()), WHITE, BLACK, FRAME, NOW, WINDOW, SUCCESS, EXPIRY]
    colours += [(level, level, level) for level in np.linspace(0, 255, 32).astype(int).tolist()]
    colours += [tuple(int(value * shade) for value in colour) for colour in TASK_COLOURS.tolist()
                for shade in (0.25, 0.5, 0.75)]
    palette = Image.new("P", (1, 1))
    palette.putpalette([value for colour in colours for value in colour])
    return palette


def save_episode(frames: Sequence[np.ndarray], path: str | os.PathLike[str], fps: float = 4.0) -> Path:
    """Write ``frames`` (``(H, W, 3)`` uint8 images, e.g. from ``env.render()``) as an animated GIF at ``path``.

    The file is written beside ``path`` and renamed into place, so a reader never sees half a file. GIF is
    what Pillow writes without further software; for MP4 wrap the env in ``gymnasium.wrappers.RecordVideo``,
    which needs ``moviepy``. Returns the path written.
    """
    target = Path(path)
    if target.suffix.lower() != ".gif":
        raise ValueError(f"path must end in .gif, got {str(path)!r}: save_episode writes GIF with Pillow; for MP4 "
                         "use gymnasium.wrappers.RecordVideo (pip install moviepy)")
    if not isinstance(fps, (int, float)) or isinstance(fps, bool) or not 0 < fps <= 100 or math.isnan(fps):
        raise ValueError(f"fps must be a number in (0, 100], got {fps!r}")
    images = [np.asarray(frame) for frame in frames]
    if not images:
        raise ValueError("frames is empty: render at least one frame before saving")
    for index, frame in enumerate(images):
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3 or frame.shape != images[0].shape:
            raise ValueError(f"frames[{index}] must be a uint8 (H, W, 3) image shaped like frames[0] "
                             f"{images[0].shape}, got {frame.dtype} {frame.shape}")
    if not target.parent.is_dir():
        raise ValueError(f"path {str(path)!r}: the folder {str(target.parent)!r} does not exist")
    palette = _gif_palette()
    first, *rest = (Image.fromarray(frame).quantize(palette=palette, dither=Image.Dither.NONE) for frame in images)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        first.save(partial, format="GIF", save_all=True, append_images=rest, duration=round(1000 / fps), loop=0)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


def interactive_backend() -> bool:
    """Whether matplotlib's backend can show a window (not Agg, PDF, SVG, … as on a machine without a display)."""
    import matplotlib
    from matplotlib.backends import BackendFilter, backend_registry

    return matplotlib.get_backend().lower() not in backend_registry.list_builtin(BackendFilter.NON_INTERACTIVE)


class HumanViewer:
    """A pyplot window showing the latest chart (``render_mode="human"``).

    Where matplotlib cannot show a window (no display, a file backend) it warns once and draws nothing,
    rather than spending a frame's drawing on every step for no one to see.
    """

    def __init__(self, fps: int):
        self.fps = fps
        self.window: Any = None
        self.can_show: bool | None = None

    def wants_frames(self) -> bool:
        """False (after one ``UserWarning`` saying what to do) where no window can be shown."""
        if self.can_show is None:
            self.can_show = interactive_backend()
            if not self.can_show:
                import matplotlib

                warnings.warn(
                    f"render_mode='human' shows nothing here: matplotlib's backend {matplotlib.get_backend()!r} "
                    "cannot open a window (no display?). Use render_mode='rgb_array' and save the frames with "
                    "mara_env.render.save_episode(frames, 'episode.gif'), or run with a display and an "
                    "interactive backend (e.g. MPLBACKEND=TkAgg).", UserWarning, stacklevel=4)
        return self.can_show

    def show(self, image: np.ndarray) -> None:
        import matplotlib.pyplot as plt

        if self.window is None:
            figure = plt.figure(figsize=(WIDTH / 80, HEIGHT / 80), dpi=80)
            axis = figure.add_axes((0, 0, 1, 1))
            axis.set_axis_off()
            self.window = axis.imshow(image)
        else:
            self.window.set_data(image)
        plt.pause(1.0 / self.fps)

    def close(self) -> None:
        if self.window is not None:
            import matplotlib.pyplot as plt

            plt.close(self.window.figure)
            self.window = None
