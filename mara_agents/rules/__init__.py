"""The scheduling rules every allocator, MAT's tokens, the forecast env and the experts share.

* :mod:`~mara_agents.rules.slots` — the occupied slots, steps to each deadline, serving slots in an order.
* :mod:`~mara_agents.rules.slack` — the slack plan: warm-up first, then tasks that fit (least slack), then the rest.
* :mod:`~mara_agents.rules.nodes` — node speeds and switching costs: which node serves which task.
* :mod:`~mara_agents.rules.uncontended` — no more tasks than nodes: serve them all, no ranking needed.
* :mod:`~mara_agents.rules.hopeless` — which tasks to abandon: hopelessness scores and the make-room choice.

They sit below the allocators and MAT, and above the predictors only for their readiness rule
(``MIN_OBSERVATIONS``), so that no two of those packages import each other.
"""
