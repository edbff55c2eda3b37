"""Playing any policy: the protocol every allocator follows, the lock-step loop, and checkpoint files.

* :mod:`~mara_agents.play.policy` — the :class:`~mara_agents.play.policy.Policy` protocol and
  :class:`~mara_agents.play.policy.NodeActor` (a policy in the PettingZoo envs).
* :mod:`~mara_agents.play.lockstep` — N episodes of a vector env played together (evaluation, rollouts,
  imitation).
* :mod:`~mara_agents.play.checkpoints` — atomic, verified checkpoint and run-state files.
"""
