"""What the Gymnasium and both PettingZoo envs do alike around the :class:`~mara_env.engine.Engine`: the
conflict rule, the call-order checks, the episode record behind the Gantt chart, and rendering."""

from __future__ import annotations

from typing import Any

import numpy as np

from mara_env.abandon import slot_claims
from mara_env.config import MARAConfig
from mara_env.dynamics import standing_choices
from mara_env.engine import Engine, resolve_conflicts
from mara_env.render import EpisodeRecord, HumanViewer, draw_gantt

RENDER_MODES = ["ansi", "rgb_array", "human"]
RENDER_FPS = 4


def check_render_mode(render_mode: str | None) -> None:
    """``ValueError`` naming ``render_mode`` unless it is ``None`` or one of :data:`RENDER_MODES`."""
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be None or one of {RENDER_MODES}, got {render_mode!r}")


class FrontEnd:
    """One engine plus the bookkeeping every front end needs."""

    def __init__(self, config: MARAConfig, render_mode: str | None):
        check_render_mode(render_mode)
        self.config = config
        self.engine = Engine(config)
        self.sim = self.engine.sim
        self.render_mode = render_mode
        self.record = EpisodeRecord() if render_mode in ("rgb_array", "human") else None
        self.viewer = HumanViewer(RENDER_FPS) if render_mode == "human" else None
        self.started = False
        self.ended = False

    def reset(self, rng: np.random.Generator, options: dict[str, Any] | None) -> dict[str, Any]:
        """Start an episode; the reset info has every step-info counter at zero."""
        info = self.engine.reset(rng, options)
        if self.record is not None:
            self.record.clear()
        self.started, self.ended = True, False
        return info

    def check_can_step(self) -> None:
        """``RuntimeError`` before the first reset and after the episode has ended: a step then would change
        a finished episode's metrics (Gymnasium and PettingZoo leave such calls undefined)."""
        if not self.started:
            raise RuntimeError("call reset() before step()")
        if self.ended:
            raise RuntimeError("the episode has ended; call reset() before step() again")

    def step(self, picks: list[int]) -> tuple[float, bool, dict[str, Any]]:
        """Apply the conflict rule and advance; returns (team reward, terminated, info)."""
        self.check_can_step()
        repaired = None
        if self.config.conflicts == "repair" or self.record is not None:  # else the picks go in as they are
            occupied = self.sim.occupied
            applied, repaired = resolve_conflicts(self.config, np.asarray(picks, dtype=np.int64), occupied)
            if self.record is not None:
                serves, _ = standing_choices(applied, occupied)
                slots = slot_claims(applied, self.config.max_active) - 1
                self.record.add(np.where(serves, self.sim.slot_task[np.maximum(slots, 0)], -1))
            picks = applied.tolist()
        reward, terminated, info = self.engine.step(picks, None if repaired is None else int(repaired))
        self.ended = terminated
        return reward, terminated, info

    def render(self) -> str | np.ndarray | None:
        """Text for ``ansi``, an RGB image for ``rgb_array``, a window update for ``human``."""
        if not self.started and self.render_mode is not None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "ansi":
            return self.engine.render_text()
        if self.record is None or (self.viewer is not None and not self.viewer.wants_frames()):
            return None
        image = draw_gantt(self.record, self.sim)
        if self.viewer is None:
            return image
        self.viewer.show(image)
        return None

    def close(self) -> None:
        if self.viewer is not None:
            self.viewer.close()
