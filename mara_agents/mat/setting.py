"""The setting a MAT policy is trained for and plays in: the env's node count M, its node speeds and its
switching cost c (``docs/environment.md``, "Beyond the paper").

A policy is meaningful only in its own setting: M is fixed in its weights, and a model with node tokens has
learned what its speeds and c are worth.  So exported policy files record their setting
(:mod:`~mara_agents.mat.checkpoint`), ``train.py mat --init-from`` refuses a start trained in another setting,
and an ensemble refuses members of different settings (:mod:`~mara_agents.mat.ensemble`), each with one line
naming both settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mara_env.config import MARAConfig

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

    def describe(self) -> str:
        """``num_nodes=4, node_speeds=1,1,1,4, switch_cost=2`` (speeds ``all 1`` when None)."""
        speeds = "all 1" if self.node_speeds is None else ",".join(map(str, self.node_speeds))
        return f"num_nodes={self.num_nodes}, node_speeds={speeds}, switch_cost={self.switch_cost}"

    def flags(self) -> str:
        """The training flags that select this setting."""
        speeds = "" if self.node_speeds is None else " --node-speeds " + ",".join(map(str, self.node_speeds))
        return f"--num-nodes {self.num_nodes}{speeds} --switch-cost {self.switch_cost}"
