"""The PettingZoo front ends: ``mara_env.env()`` (AEC, ``raw_env`` plus PettingZoo's order-enforcing
wrapper) and ``mara_env.parallel_env()``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import wrappers

from mara_common.checks import choice, integer
from mara_env.config import MARAConfig, resolve_config
from mara_env.features import SlotFeatures
from mara_env.flat import extra_space, flat_space, flatten_observation, node_one_hot
from mara_env.frontend import RENDER_FPS, RENDER_MODES, FrontEnd
from mara_env.gym_env import node_spaces, observation_spaces

AGENT_REWARDS = ("team", "share")


class _NodeSpaces:
    """Agents ``node_0 … node_{M-1}``: spaces built once and returned by identity, per-node observations,
    argument checks and the per-agent reward, shared by the AEC and the parallel env."""

    def _setup(self, render_mode: str | None, max_cycles: int | None, agent_reward: str,
               config: MARAConfig | None, overrides: dict[str, Any], slot_features: SlotFeatures | None) -> None:
        if max_cycles is not None:
            integer("max_cycles", max_cycles, low=1)
        choice("agent_reward", agent_reward, AGENT_REWARDS)
        merged = resolve_config(config, overrides)
        if merged.actions != "picks":
            raise ValueError(f"actions={merged.actions!r} is for the Gymnasium env; the PettingZoo envs take "
                             "one pick per node (actions='picks')")
        self.frontend = FrontEnd(merged, render_mode)
        self.engine = self.frontend.engine
        self.config = self.engine.config
        self.render_mode = render_mode
        self.max_cycles = max_cycles
        self.agent_reward = agent_reward
        self.np_random, _ = seeding.np_random(None)
        self.slot_features = slot_features
        self._flat: tuple[int, np.ndarray] | None = None  # (simulator state index, its flat vector)
        self._extra: tuple[int, np.ndarray] | None = None  # (simulator state index, its slot features)
        m, k, choices = self.config.num_nodes, self.config.max_active, self.config.node_choices
        self.possible_agents = [f"node_{i}" for i in range(m)]
        self.agent_index = {agent: i for i, agent in enumerate(self.possible_agents)}
        flat = flat_space(k, self.config.flat_history, m, slot_features, m if self.config.node_options else 0)
        extra = {} if slot_features is None else {slot_features.key: extra_space(slot_features, k)}
        obs_space = {
            "dict": spaces.Dict({
                "observation": spaces.Dict({**observation_spaces(k, self.engine.sim.history_width),
                                            **node_spaces(self.config),
                                            "picks": spaces.Box(-1, choices - 1, (m,), np.int64), **extra}),
                "action_mask": spaces.Box(0, 1, (choices,), np.int8)}),
            "flat": flat,
            "rllib": spaces.Dict({"observations": flat,
                                  "action_mask": spaces.Box(0, 1, (choices,), np.int8)}),
        }[self.config.observation]
        self.observation_spaces = {agent: obs_space for agent in self.possible_agents}
        self.action_spaces = {agent: spaces.Discrete(choices) for agent in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _seed(self, seed: int | None) -> None:
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)

    def _check_action(self, agent: str, action: Any) -> int:
        """The action as an int; ``ValueError`` naming the agent for anything but an integer in [0, K] ([0, 2K]
        with ``abandon=True``)."""
        k = self.config.max_active
        highest = self.config.node_choices - 1
        value = action.item() if isinstance(action, np.ndarray) and action.size == 1 else action
        integral = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            integral, value = True, int(value)
        if not integral or not 0 <= int(value) <= highest:
            meaning = f"0 = idle, j = slot j-1{f', {k}+j = abandon slot j-1' if self.config.abandon else ''}"
            raise ValueError(f"{agent}: action must be an integer in [0, {highest}] ({meaning}), got {action!r}")
        return int(value)

    def _agent_reward(self, team_reward: float) -> float:
        """``team``: every node gets the team reward; ``share``: each gets 1/M of it, so the sum over nodes is
        the team reward (what a library that adds agents' rewards should see)."""
        return team_reward / len(self.possible_agents) if self.agent_reward == "share" else team_reward

    def _node_mask(self, node: int, picks: list[int]) -> np.ndarray:
        """Idle and occupied slots, less the slots earlier nodes took this cycle (paper Eq. 2); with
        ``abandon=True`` a slot an earlier node picked or abandoned can be neither picked nor abandoned."""
        mask = self.engine.sim.slot_mask()
        k = self.config.max_active
        for pick in picks[:node]:
            if pick > 0:
                slot = pick - k if pick > k else pick
                mask[slot] = 0
                if self.config.abandon:
                    mask[slot + k] = 0
        return mask

    def _node_observations(self, agents: list[str], picks: list[int]) -> dict[str, Any]:
        """Each listed node's observation in the configured format (``flat`` masks go to the infos)."""
        mode = self.config.observation
        if mode == "dict":
            views = {}
            for agent in agents:
                obs = self.engine.sim.observation(action_mask=False)
                obs["picks"] = np.asarray(picks, dtype=np.int64)
                if self.slot_features is not None:
                    obs[self.slot_features.key] = self._shared_extra(obs).copy()
                views[agent] = {"observation": obs, "action_mask": self._node_mask(self.agent_index[agent], picks)}
            return views
        shared = self._shared_flat()
        m = len(self.possible_agents)
        flats = {a: np.concatenate([shared, node_one_hot(self.agent_index[a], m)]) for a in agents}
        if mode == "flat":
            return flats
        return {a: {"observations": flats[a],
                    "action_mask": self._node_mask(self.agent_index[a], picks)}
                for a in agents}

    def _shared_flat(self) -> np.ndarray:
        """The flat vector of the simulator's state, computed once per state: every node of an AEC cycle sees
        the same state, and each node's vector is a new array (this one plus its one-hot)."""
        sim = self.engine.sim
        if self._flat is None or self._flat[0] != sim.state_index:
            observation = sim.observation(action_mask=False)
            extra = None if self.slot_features is None else self._shared_extra(observation)
            self._flat = (sim.state_index, flatten_observation(observation, self.config.flat_history, extra))
        return self._flat[1]

    def _shared_extra(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """The slot features of the simulator's state (``observation``), computed once per state."""
        state = self.engine.sim.state_index
        if self._extra is None or self._extra[0] != state:
            self._extra = (state, self.slot_features(observation))
        return self._extra[1]

    def _mask_info(self, agent: str, picks: list[int]) -> dict[str, Any]:
        """With ``observation="flat"`` the mask travels in ``infos[agent]["action_mask"]`` (PettingZoo's
        convention when the observation is a plain array)."""
        if self.config.observation != "flat":
            return {}
        return {"action_mask": self._node_mask(self.agent_index[agent], picks)}

    def render(self) -> str | np.ndarray | None:
        return self.frontend.render()

    def close(self) -> None:
        self.frontend.close()


class raw_env(_NodeSpaces, AECEnv):  # noqa: N801 - PettingZoo's name for the unwrapped AEC class
    """MARA as an agent-environment-cycle game: nodes act one at a time in index order.

    Each cycle ``node_0 … node_{M-1}`` choose in turn (``Discrete(K + 1)``: 0 idle, j slot j − 1). Node i's
    ``action_mask`` removes empty slots and slots already taken by nodes 0 … i − 1 this cycle, so following
    the masks always yields a valid matching; an unmasked choice is turned into idle and counted as a
    conflict (``conflicts="idle"``) or moved to the next free slot (``conflicts="repair"``), as in the
    Gymnasium env. With ``abandon=True`` the action is ``Discrete(2K + 1)``: K + j abandons slot j − 1, legal
    when the slot holds a task that no earlier node picked or abandoned this cycle (``mara_env.abandon``). The simulator advances after the last node; every node then receives the team reward
    (successes + shaping, see ``MARAEnv``), or 1/M of it with ``agent_reward="share"``.

    Observations (``observation=``): ``"dict"`` (default)
    ``{"observation": {tasks, history, history_len, budget, global, picks}, "action_mask"}`` where ``picks``
    holds this cycle's choices so far (−1 = not chosen yet); ``"flat"`` the flat float32 vector of
    ``mara_env.flat`` with the node's one-hot appended, the mask in ``infos[agent]["action_mask"]``;
    ``"rllib"`` ``{"observations": <flat>, "action_mask": int8}``, the keys RLlib's action-masking module
    reads. ``slot_features`` (:class:`mara_env.features.SlotFeatures`) adds per-slot features: an entry of the
    inner ``observation`` dict, or K · F values before the node one-hot of the flat vector. ``max_cycles``
    truncates after that many simulator steps. Other arguments are those of
    ``MARAEnv``. Use :func:`env`, which adds PettingZoo's ``OrderEnforcingWrapper``.

    Version History: v0: initial release.
    """

    metadata = {"name": "mara_v0", "render_modes": RENDER_MODES, "is_parallelizable": True,
                "render_fps": RENDER_FPS}

    def __init__(self, render_mode: str | None = None, max_cycles: int | None = None, agent_reward: str = "team",
                 config: MARAConfig | None = None, slot_features: SlotFeatures | None = None, **overrides: Any):
        super().__init__()
        self._setup(render_mode, max_cycles, agent_reward, config, overrides, slot_features)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._seed(seed)
        info = self.frontend.reset(self.np_random, options)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.picks = [-1] * len(self.possible_agents)
        self.infos = {a: {**info, **self._mask_info(a, self.picks)} for a in self.agents}
        self.cycles = 0
        self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> Any:
        return self._node_observations([agent], self.picks)[agent]

    def step(self, action: Any) -> None:
        if not self.frontend.started:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            raise RuntimeError("the episode has ended; call reset() before step() again")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:
                raise ValueError(f"{agent} is done; its only valid action is None, got {action!r}")
            self._was_dead_step(action)
            return
        node = self.agent_index[agent]
        self.picks[node] = self._check_action(agent, action)
        self._cumulative_rewards[agent] = 0.0
        if node == len(self.possible_agents) - 1:
            self._advance()
        else:
            self._clear_rewards()
        self.agent_selection = self.possible_agents[(node + 1) % len(self.possible_agents)]
        self.infos[self.agent_selection].update(self._mask_info(self.agent_selection, self.picks))
        self._accumulate_rewards()

    def _advance(self) -> None:
        reward, terminated, info = self.frontend.step(self.picks)
        self.cycles += 1
        truncated = not terminated and self.max_cycles is not None and self.cycles >= self.max_cycles
        self.frontend.ended = terminated or truncated
        for agent in self.agents:
            self.rewards[agent] = self._agent_reward(reward)
            self.terminations[agent] = terminated
            self.truncations[agent] = truncated
            self.infos[agent] = dict(info)
        self.picks = [-1] * len(self.possible_agents)
        if self.render_mode == "human":
            self.render()


class MARAParallelEnv(_NodeSpaces, ParallelEnv):
    """MARA with all nodes acting simultaneously; conflicts resolve as in the Gymnasium env (``idle``: lower
    index wins, the loser idles and is counted; ``repair``: the loser moves to the next free slot). Each
    node's ``action_mask`` is the static one (idle + occupied slots): nodes choose together, so no node can
    see the others' picks. ``step`` takes one action for every live agent (``ValueError`` naming a missing
    or unknown one); a ``step`` after the episode ended (no live agents) raises ``RuntimeError``.
    Otherwise identical to :class:`raw_env`."""

    metadata = {"name": "mara_v0", "render_modes": RENDER_MODES, "render_fps": RENDER_FPS}

    def __init__(self, render_mode: str | None = None, max_cycles: int | None = None, agent_reward: str = "team",
                 config: MARAConfig | None = None, slot_features: SlotFeatures | None = None, **overrides: Any):
        self._setup(render_mode, max_cycles, agent_reward, config, overrides, slot_features)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        self._seed(seed)
        info = self.frontend.reset(self.np_random, options)
        self.agents = list(self.possible_agents)
        self.cycles = 0
        if self.render_mode == "human":
            self.render()
        return self._observations(), self._infos(info)

    def _observations(self) -> dict[str, Any]:
        return self._node_observations(self.agents, [-1] * len(self.possible_agents))

    def _infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        blank = [-1] * len(self.possible_agents)
        return {a: {**info, **self._mask_info(a, blank)} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        self.frontend.check_can_step()
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict of one action per live agent, got {actions!r}")
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for agents that are not live: {sorted(map(str, unknown))}")
        picks = [self._check_action(agent, actions[agent]) for agent in self.possible_agents if agent in actions]
        if len(picks) < len(self.possible_agents):
            missing = [agent for agent in self.possible_agents if agent not in actions]
            raise ValueError(f"actions lacks live agent(s) {missing}: give every node an action (0 = idle)")
        reward, terminated, info = self.frontend.step(picks)
        self.cycles += 1
        truncated = not terminated and self.max_cycles is not None and self.cycles >= self.max_cycles
        self.frontend.ended = terminated or truncated
        agents = self.agents
        observations = self._observations()
        rewards = {a: self._agent_reward(reward) for a in agents}
        terminations = {a: terminated for a in agents}
        truncations = {a: truncated for a in agents}
        infos = self._infos(info)
        if terminated or truncated:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos


def env(**kwargs: Any) -> AECEnv:
    """The AEC environment: :class:`raw_env` wrapped in PettingZoo's ``OrderEnforcingWrapper`` (which
    raises on ``step``/``observe`` before ``reset`` and ignores, with a warning, a ``step`` once every agent
    is done). ``AssertOutOfBoundsWrapper`` is left out: ``raw_env`` already rejects a bad action with a
    ``ValueError`` naming the agent and the value."""
    return wrappers.OrderEnforcingWrapper(raw_env(**kwargs))


def parallel_env(**kwargs: Any) -> MARAParallelEnv:
    """The parallel environment."""
    return MARAParallelEnv(**kwargs)
