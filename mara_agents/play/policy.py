"""The one policy protocol every allocator implements, and its PettingZoo adapter.

A policy maps a Gymnasium observation of ``MARA-v0`` (optionally extended with ``predicted_remaining`` by a
predictor wrapper) to a joint action, one choice per node.  :class:`NodeActor` lets the same policy play
the PettingZoo envs: it decides the whole matching at node 0's turn and hands each node its part.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from mara_env.features import TASK_FEATURE_INDEX


@runtime_checkable
class Policy(Protocol):
    """``reset()`` at every episode start, then ``act(observation) -> action`` of shape (M,)."""

    def reset(self) -> None: ...

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray: ...


def is_batched(policy: Policy) -> bool:
    """Whether a policy can act for many episodes in one call: ``act_batch(observations) -> actions``.

    Such a policy must be stateless across episodes and give each observation the action ``act`` would;
    the harness then plays a whole workload file in lock-step with one call per step, which amortises the
    per-call overhead of neural policies over all its episodes.
    """
    return callable(getattr(policy, "act_batch", None))


def gym_view(node_observation: dict[str, Any]) -> dict[str, np.ndarray]:
    """Rebuild the Gymnasium observation from a PettingZoo node observation (it carries the same arrays)."""
    inner = dict(node_observation["observation"])
    num_nodes = inner.pop("picks").shape[0]
    present = inner["tasks"][:, TASK_FEATURE_INDEX["present"]] > 0
    mask = np.ones((num_nodes, present.size + 1), dtype=np.int8)
    mask[:, 1:] = present
    inner["action_mask"] = mask
    return inner


class NodeActor:
    """Plays a joint-action :class:`Policy` in the AEC or parallel PettingZoo env.

    ``act(agent, observation)`` returns that node's choice; the joint action is computed once per cycle,
    when node 0 (or, in the parallel env, the first node asked) observes.
    """

    def __init__(self, policy: Policy):
        self.policy = policy
        self._joint: np.ndarray | None = None

    def reset(self) -> None:
        self.policy.reset()
        self._joint = None

    def act(self, agent: str, observation: dict[str, Any]) -> int:
        node = int(agent.rsplit("_", 1)[1])
        if node == 0 or self._joint is None:
            self._joint = np.asarray(self.policy.act(gym_view(observation)))
        return int(self._joint[node])

    def act_parallel(self, observations: dict[str, Any]) -> dict[str, int]:
        """All nodes' choices for one parallel-env step."""
        first = next(iter(observations.values()))
        joint = np.asarray(self.policy.act(gym_view(first)))
        return {agent: int(joint[int(agent.rsplit("_", 1)[1])]) for agent in observations}
