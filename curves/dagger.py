"""DAgger on Atari Pong: a Nature CNN imitates a scripted expert that reads the paddle and ball from RAM.

Each curve is one DAgger run (Ross et al. 2011).  The aggregated data set starts with ``WARMUP`` expert-driven
steps; every ``ROUND`` training batches the current mixture policy (expert with probability β = 0.5^round,
else the learner's argmax) plays ``ROLLOUT`` more steps, and every visited state is labelled with the
expert's action and added.  Each training batch is drawn uniformly (with replacement) from the aggregate,
so the loss curve shows the distribution shift DAgger induces — an out-of-distribution shape for the
scheduler.  Environment: gymnasium ``ALE/Pong-v5`` with frameskip 2 (ale-py ships the ROM); observations are
grayscale, cropped to the 160×160 playfield, background-subtracted, max-pooled to 40×40 (cpu preset; 80×80
for the paper preset) and stacked 4 deep.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from curves.data.errors import DataMissingError
from curves.recipe import Recipe
from curves.training import make_optimizer

if TYPE_CHECKING:
    from curves.families import Family

INSTALL_HINT = "pip install ale-py   (the wheel ships the Atari ROMs; see curves/requirements.txt)"
ENV_ID = "ALE/Pong-v5"
FRAMESKIP = 2
STACK, PLAYFIELD = 4, 160
ACTIONS = (0, 2, 3)  # NOOP, RIGHT (paddle up), LEFT (paddle down): the expert's whole repertoire
WARMUP, ROUND, ROLLOUT = 1000, 50, 200
PADDLE_Y, BALL_X, BALL_Y = 51, 49, 54  # Pong RAM addresses of the player paddle and the ball
PADDLE_OFFSET, DEADZONE = 8, 2
BACKGROUND = 87  # grayscale level of Pong's playfield


def make_env(seed: int) -> Any:
    """The Pong environment, reset with ``seed`` (raises DataMissingError when ale-py is absent)."""
    try:
        import ale_py
        import gymnasium as gym
    except ImportError as exc:
        raise DataMissingError(f"ale-py is not installed ({exc}). Install it with: {INSTALL_HINT}") from exc
    gym.register_envs(ale_py)
    env = gym.make(ENV_ID, frameskip=FRAMESKIP, obs_type="grayscale")
    env.reset(seed=seed)
    return env


def expert_action(ram: np.ndarray) -> int:
    """Index into ACTIONS: move the paddle toward the ball's height, stay still when no ball is in play."""
    ball_y = int(ram[BALL_Y])
    if ball_y == 0:
        return 0
    gap = ball_y - (int(ram[PADDLE_Y]) + PADDLE_OFFSET)
    return 2 if gap > DEADZONE else (1 if gap < -DEADZONE else 0)


def preprocess(frame: np.ndarray, side: int) -> np.ndarray:
    """210×160 grayscale → 160×160 playfield → background removed, contrast ×3 → side×side uint8 by max-pooling.

    Paddles and ball differ from the background (grey 87) by only 30–75 levels and the ball covers two
    pixels, so we subtract the background and max-pool (averaging would dim the ball away).
    """
    field = np.clip(np.abs(frame[34:194].astype(np.int16) - BACKGROUND) * 3, 0, 255).astype(np.uint8)
    k = PLAYFIELD // side
    return field.reshape(side, k, side, k).max(axis=(1, 3))


class PongStream:
    """A running Pong game that yields (stacked observation, expert label) and steps with a chosen action."""

    def __init__(self, seed: int, side: int):
        self.env = make_env(seed)
        self.side = side
        self.episode_seed = seed
        self._restart(first=True)

    def _restart(self, first: bool = False) -> None:
        if not first:
            self.episode_seed += 1
            self.env.reset(seed=self.episode_seed)
        frame = preprocess(self.env.unwrapped.ale.getScreenGrayscale(), self.side)
        self.frames = deque([frame] * STACK, maxlen=STACK)

    def observe(self) -> tuple[np.ndarray, int]:
        """The current (4, side, side) observation and the expert's label for it."""
        return np.stack(self.frames), expert_action(self.env.unwrapped.ale.getRAM())

    def step(self, action_index: int) -> None:
        """Advance one agent step (FRAMESKIP frames) with ACTIONS[action_index]."""
        frame, _, terminated, truncated, _ = self.env.step(ACTIONS[action_index])
        self.frames.append(preprocess(frame, self.side))
        if terminated or truncated:
            self._restart()


def collect(stream: PongStream, steps: int, beta: float, policy: nn.Module | None, rng: np.random.Generator,
            obs: list[np.ndarray], labels: list[int]) -> None:
    """Play ``steps`` steps with the β-mixture policy, appending every state and its expert label."""
    for _ in range(steps):
        state, label = stream.observe()
        obs.append(state)
        labels.append(label)
        action = label
        if policy is not None and rng.random() >= beta:
            with torch.no_grad():
                action = int(policy(torch.from_numpy(state)[None]).argmax())
        stream.step(action)


def train_dagger(family: "Family", recipe: Recipe, n_batches: int, log: Callable[[float], None], preset: str,
                 data_root: Any, device: str) -> None:
    """One DAgger run; logs each batch's mean cross-entropy against the expert's actions."""
    torch.manual_seed(recipe.seed)
    side = family.sizes[preset]["side"]
    model = family.build(preset, {"frames": STACK, "num_actions": len(ACTIONS)}).to(device)
    optimizer = make_optimizer(model, recipe.lr)
    rng = np.random.default_rng(recipe.data_seed)
    sampler = torch.Generator().manual_seed(recipe.data_seed)
    stream = PongStream(int(rng.integers(2**31 - 1)), side)
    obs: list[np.ndarray] = []
    labels: list[int] = []
    collect(stream, WARMUP, 1.0, None, rng, obs, labels)
    data_x = torch.from_numpy(np.stack(obs))
    data_y = torch.tensor(labels, dtype=torch.int64)
    for batch in range(n_batches):
        if batch and batch % ROUND == 0:
            model.eval()
            cpu_policy = (lambda s: model(s.to(device)).cpu())
            new_obs: list[np.ndarray] = []
            new_labels: list[int] = []
            collect(stream, ROLLOUT, 0.5 ** (batch // ROUND), cpu_policy, rng, new_obs, new_labels)
            data_x = torch.cat([data_x, torch.from_numpy(np.stack(new_obs))])
            data_y = torch.cat([data_y, torch.tensor(new_labels, dtype=torch.int64)])
        model.train()
        idx = torch.randint(data_x.shape[0], (recipe.batch_size,), generator=sampler)
        loss = nn.functional.cross_entropy(model(data_x[idx].to(device)), data_y[idx].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        log(float(loss.detach()))
