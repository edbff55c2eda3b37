"""The PettingZoo front ends: ``mara_env.env()`` (AEC) and ``mara_env.parallel_env()``."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv

from mara_env.config import MARAConfig
from mara_env.engine import Engine
from mara_env.gym_env import observation_spaces


def _config(config: MARAConfig | None, overrides: dict[str, Any]) -> MARAConfig:
    base = config or MARAConfig()
    return base.replace(**overrides) if overrides else base


class _NodeSpaces:
    """Agents ``node_0 … node_{M-1}`` with spaces built once and returned by identity."""

    def _build_spaces(self, engine: Engine) -> None:
        cfg = engine.config
        m, k = cfg.num_nodes, cfg.max_active
        self.possible_agents = [f"node_{i}" for i in range(m)]
        self.agent_index = {agent: i for i, agent in enumerate(self.possible_agents)}
        inner = spaces.Dict({**observation_spaces(k, engine.sim.history_width),
                             "picks": spaces.Box(-1, k, (m,), np.int64)})
        obs_space = spaces.Dict({"observation": inner, "action_mask": spaces.Box(0, 1, (k + 1,), np.int8)})
        self.observation_spaces = {agent: obs_space for agent in self.possible_agents}
        self.action_spaces = {agent: spaces.Discrete(k + 1) for agent in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _node_observation(self, node: int, picks: list[int]) -> dict[str, Any]:
        """Node ``node``'s view: the shared observation, this step's earlier picks, and its own mask.

        The mask removes empty slots and, when ``picks`` holds earlier nodes' choices, the slots they took —
        exactly the matching constraint of paper Eq. 2.
        """
        obs = self.engine.sim.observation()
        mask = obs.pop("action_mask")[node]
        for pick in picks[:node]:
            if pick > 0:
                mask[pick] = 0
        obs["picks"] = np.asarray(picks, dtype=np.int64)
        return {"observation": obs, "action_mask": mask}


class MARAAECEnv(_NodeSpaces, AECEnv):
    """MARA as an agent-environment-cycle game: nodes act one at a time in index order.

    Each cycle ``node_0 … node_{M-1}`` choose in turn (``Discrete(K + 1)``: 0 idle, j slot j − 1). Node i's
    ``action_mask`` removes empty slots and slots already taken by nodes 0 … i − 1 this cycle, so following
    the masks always yields a valid matching; an unmasked choice is turned into idle and counted as a
    conflict, as in the Gymnasium env. The simulator advances after the last node; every node then receives
    the same team reward (successes + shaping, see ``MARAEnv``). Observations are
    ``{"observation": {tasks, history, history_len, budget, global, picks}, "action_mask"}`` where ``picks``
    holds this cycle's choices so far (−1 = not chosen yet). ``max_cycles`` truncates after that many
    simulator steps. Arguments are those of ``MARAEnv``.

    Version History: v0: initial release.
    """

    metadata = {"name": "mara_v0", "render_modes": ["ansi"], "is_parallelizable": True, "render_fps": 4}

    def __init__(self, render_mode: str | None = None, max_cycles: int | None = None,
                 config: MARAConfig | None = None, **overrides: Any):
        super().__init__()
        self.engine = Engine(_config(config, overrides))
        self.render_mode = render_mode
        self.max_cycles = max_cycles
        self._build_spaces(self.engine)
        self.np_random, _ = seeding.np_random(None)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        info = self.engine.reset(self.np_random, options)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: dict(info) for a in self.agents}
        self.picks = [-1] * len(self.possible_agents)
        self.cycles = 0
        self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> dict[str, Any]:
        return self._node_observation(self.agent_index[agent], self.picks)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        node = self.agent_index[agent]
        if action is None or not 0 <= int(action) <= self.engine.config.max_active:
            raise ValueError(f"{agent}: action must be an int in [0, {self.engine.config.max_active}], got {action!r}")
        self.picks[node] = int(action)
        self._cumulative_rewards[agent] = 0.0
        if node == len(self.possible_agents) - 1:
            self._advance()
        else:
            self._clear_rewards()
        self.agent_selection = self.possible_agents[(node + 1) % len(self.possible_agents)]
        self._accumulate_rewards()

    def _advance(self) -> None:
        reward, terminated, info = self.engine.step(self.picks)
        self.cycles += 1
        truncated = not terminated and self.max_cycles is not None and self.cycles >= self.max_cycles
        for agent in self.agents:
            self.rewards[agent] = reward
            self.terminations[agent] = terminated
            self.truncations[agent] = truncated
            self.infos[agent] = dict(info)
        self.picks = [-1] * len(self.possible_agents)

    def render(self) -> str | None:
        return self.engine.render_text() if self.render_mode == "ansi" else None

    def close(self) -> None:
        pass


class MARAParallelEnv(_NodeSpaces, ParallelEnv):
    """MARA with all nodes acting simultaneously; conflicts resolve as in the Gymnasium env (lower index
    wins, the loser idles and is counted). Each node's ``action_mask`` is the static one (idle + occupied
    slots). Otherwise identical to :class:`MARAAECEnv`."""

    metadata = {"name": "mara_v0", "render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None, max_cycles: int | None = None,
                 config: MARAConfig | None = None, **overrides: Any):
        self.engine = Engine(_config(config, overrides))
        self.render_mode = render_mode
        self.max_cycles = max_cycles
        self._build_spaces(self.engine)
        self.np_random, _ = seeding.np_random(None)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        info = self.engine.reset(self.np_random, options)
        self.agents = list(self.possible_agents)
        self.cycles = 0
        return self._observations(), {a: dict(info) for a in self.agents}

    def _observations(self) -> dict[str, Any]:
        blank = [-1] * len(self.possible_agents)
        return {a: self._node_observation(self.agent_index[a], blank) for a in self.agents}

    def step(self, actions: dict[str, Any]):
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for agents that are not live: {sorted(unknown)}")
        picks = []
        for agent in self.possible_agents:
            pick = int(actions.get(agent, 0))
            if not 0 <= pick <= self.engine.config.max_active:
                raise ValueError(f"{agent}: action must be in [0, {self.engine.config.max_active}], got {pick}")
            picks.append(pick)
        reward, terminated, info = self.engine.step(picks)
        self.cycles += 1
        truncated = not terminated and self.max_cycles is not None and self.cycles >= self.max_cycles
        agents = self.agents
        observations = self._observations()
        rewards = {a: reward for a in agents}
        terminations = {a: terminated for a in agents}
        truncations = {a: truncated for a in agents}
        infos = {a: dict(info) for a in agents}
        if terminated or truncated:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        return self.engine.render_text() if self.render_mode == "ansi" else None

    def close(self) -> None:
        pass


def env(**kwargs: Any) -> MARAAECEnv:
    """The AEC environment (PettingZoo's ``env()`` convention)."""
    return MARAAECEnv(**kwargs)


def parallel_env(**kwargs: Any) -> MARAParallelEnv:
    """The parallel environment."""
    return MARAParallelEnv(**kwargs)
