"""The setting a MAT policy is trained for and plays in: the env's node count M, its node speeds and its
switching cost c (``docs/environment.md``, "Beyond the paper").

A policy is meaningful only in its own setting: M is fixed in its weights, and a model with node tokens has
learned what its speeds and c are worth.  So exported policy files record their setting
(:mod:`~mara_agents.mat.checkpoint`), ``train.py mat --init-from`` refuses a start trained in another setting,
an ensemble refuses members of different settings (:mod:`~mara_agents.mat.ensemble`), and a policy refuses an
observation whose env is of another setting (:meth:`Setting.contradiction`,
:class:`~mara_agents.mat.policy.MATPolicy`), each with one line naming both settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mara_env.config import MARAConfig
from mara_env.features import NODE_FEATURE_INDEX, SLOT_NODE_FEATURE_INDEX, TASK_FEATURE_INDEX

_DEFAULT = MARAConfig()


@dataclass(frozen=True)
class Setting:
    """M, the node speeds (None: every node runs one batch per step) and c, in one canonical form: speeds of
    all 1 read as None, so two spellings of the same setting compare equal."""

    num_nodes: int = _DEFAULT.num_nodes
    node_speeds: tuple[int, ...] | None = None
    switch_cost: int = 0

    def __post_init__(self) -> None:
        MARAConfig(num_nodes=self.num_nodes, node_speeds=self.node_speeds, switch_cost=self.switch_cost)  # checks
        if self.node_speeds is not None:
            speeds = tuple(int(speed) for speed in self.node_speeds)
            object.__setattr__(self, "node_speeds", None if set(speeds) == {1} else speeds)

    @classmethod
    def of(cls, env: MARAConfig) -> Setting:
        """The setting of an env config."""
        return cls(env.num_nodes, env.node_speeds, env.switch_cost)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Setting:
        """The setting of a recorded env config (a manifest's ``config.env``) or of :meth:`record`'s output;
        a key a record lacks (one written before the option existed) reads as its default."""
        speeds = record.get("node_speeds")
        return cls(int(record.get("num_nodes", _DEFAULT.num_nodes)), tuple(speeds) if speeds else None,
                   int(record.get("switch_cost", 0)))

    def record(self) -> dict[str, Any]:
        """Plain JSON-able data for checkpoints and manifests."""
        return {"num_nodes": self.num_nodes, "node_speeds": None if self.node_speeds is None else
                list(self.node_speeds), "switch_cost": self.switch_cost}

    def options(self) -> dict[str, Any]:
        """The setting as env keyword arguments (``MARAConfig`` fields), e.g. for the validation plays."""
        return {"num_nodes": self.num_nodes, "node_speeds": self.node_speeds, "switch_cost": self.switch_cost}

    def describe(self, switch_cost: str = "") -> str:
        """``num_nodes=4, node_speeds=1,1,1,4, switch_cost=2`` (speeds ``all 1`` when None); ``switch_cost``
        replaces ``=2`` when c is known only in part (``>=1``)."""
        speeds = "all 1" if self.node_speeds is None else ",".join(map(str, self.node_speeds))
        return f"num_nodes={self.num_nodes}, node_speeds={speeds}, switch_cost{switch_cost or f'={self.switch_cost}'}"

    def contradiction(self, observation: Mapping[str, np.ndarray]) -> str | None:
        """The setting of the env that gave a dict ``observation``, in words, where it shows that it is not this
        one; None where it agrees as far as it shows.

        An observation shows M (the action mask's rows).  Without node options it has no ``nodes`` entry: the
        speeds are all 1 and c = 0.  With them, ``nodes`` shows the speeds, and ``slot_nodes`` shows c only
        through a task that no node served at the previous step (it needs all c setup steps); otherwise c is
        known only to be at least every setup count shown (and at least 1 when the speeds are all 1).
        """
        num_nodes = int(observation["action_mask"].shape[-2])
        if "nodes" not in observation:  # the common case, checked without building a Setting
            same = (num_nodes, self.node_speeds, self.switch_cost) == (self.num_nodes, None, 0)
            return None if same else Setting(num_nodes).describe()
        speeds = tuple(int(speed) for speed in observation["nodes"][:, NODE_FEATURE_INDEX["speed"]])
        slot_nodes = observation["slot_nodes"]
        setup = slot_nodes[:, SLOT_NODE_FEATURE_INDEX["setup_left"]].astype(int)
        fresh = (observation["tasks"][:, TASK_FEATURE_INDEX["present"]] > 0) & \
            (slot_nodes[:, SLOT_NODE_FEATURE_INDEX["last_node"]] == 0)
        if fresh.any():
            env = Setting(num_nodes, speeds, int(setup[fresh][0]))
            return None if env == self else env.describe()
        env = Setting(num_nodes, speeds)
        least = max(int(setup.max(initial=0)), 1 if env.node_speeds is None else 0)
        if (num_nodes, env.node_speeds) == (self.num_nodes, self.node_speeds) and self.switch_cost >= least:
            return None
        return env.describe(switch_cost=f">={least}")

    def flags(self) -> str:
        """The training flags that select this setting."""
        speeds = "" if self.node_speeds is None else " --node-speeds " + ",".join(map(str, self.node_speeds))
        return f"--num-nodes {self.num_nodes}{speeds} --switch-cost {self.switch_cost}"
