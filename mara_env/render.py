"""``render_mode="rgb_array"`` and ``"human"``: the episode so far as a Gantt chart.

Top panel: nodes × time, one coloured bar per stretch of steps a node served the same task (idle is blank).
Bottom panel: tasks × time, the window from arrival to deadline in grey, the time in a slot in the task's
colour, and how it ended: a green dot for a success, a red cross for an expiry. matplotlib is imported only
when a frame is drawn, so ``import mara_env`` stays light.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mara_env.simulator import EXPIRED, SUCCEEDED, Simulator

FIGURE_INCHES = (8.0, 5.0)
DPI = 80


class EpisodeRecord:
    """Which task each node served at each step (−1 idle), kept only when a drawing mode is on."""

    def __init__(self) -> None:
        self.served: list[np.ndarray] = []

    def clear(self) -> None:
        self.served = []

    def add(self, tasks: np.ndarray) -> None:
        self.served.append(np.asarray(tasks, dtype=np.int64).copy())


def _runs(row: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, length, task) for each maximal stretch of equal non-idle entries of ``row``."""
    runs, start = [], 0
    for t in range(1, row.size + 1):
        if t == row.size or row[t] != row[start]:
            if row[start] >= 0:
                runs.append((start, t - start, int(row[start])))
            start = t
    return runs


def draw_gantt(record: EpisodeRecord, sim: Simulator) -> np.ndarray:
    """The chart as an ``(H, W, 3)`` uint8 image."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=FIGURE_INCHES, dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    colours = matplotlib.colormaps["tab20"]
    served = np.stack(record.served, axis=1) if record.served else np.full((sim.num_nodes, 0), -1)
    for node in range(sim.num_nodes):
        for start, length, task in _runs(served[node]):
            top.broken_barh([(start, length)], (node - 0.4, 0.8), color=colours(task % 20))
    top.set_ylabel("node")
    top.set_ylim(sim.num_nodes - 0.5, -0.5)
    top.set_title(f"t = {sim.t}   successes {sim.totals['successes']}   expiries {sim.totals['expirations']}")
    arrived = np.flatnonzero(sim.arrival <= sim.t)
    for task in arrived.tolist():
        arrival, deadline = int(sim.arrival[task]), int(sim.deadline[task])
        bottom.broken_barh([(arrival, deadline - arrival)], (task - 0.15, 0.3), color="0.85")
        admitted, left = int(sim.admitted_at[task]), int(sim.left_at[task])
        if admitted >= 0:
            end = left if left >= 0 else sim.t
            bottom.broken_barh([(admitted, max(end - admitted, 0))], (task - 0.3, 0.6),
                               color=colours(task % 20))
        if sim.status[task] == SUCCEEDED:
            bottom.plot(left, task, "o", color="tab:green", markersize=4)
        elif sim.status[task] == EXPIRED:
            bottom.plot(left, task, "x", color="tab:red", markersize=5)
    bottom.set_ylabel("task")
    bottom.set_xlabel("time step")
    bottom.set_ylim(max(arrived.size, 1) - 0.5, -0.5)
    for axis in (top, bottom):
        axis.axvline(sim.t, color="0.3", linewidth=0.8)
    horizon = max([sim.t, 1, *sim.deadline[arrived].tolist()])
    bottom.set_xlim(0, horizon)
    for axis in (top, bottom):
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


class HumanViewer:
    """A pyplot window showing the latest chart (``render_mode="human"``)."""

    def __init__(self, fps: int):
        self.fps = fps
        self.window: Any = None

    def show(self, image: np.ndarray) -> None:
        import matplotlib.pyplot as plt

        if self.window is None:
            figure = plt.figure(figsize=FIGURE_INCHES, dpi=DPI)
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
