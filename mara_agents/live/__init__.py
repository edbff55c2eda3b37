"""The live front ends: allocators scheduling real training jobs on Ray (the backend is :mod:`mara_env.live`).

* ``python -m mara_agents.live`` (:mod:`~mara_agents.live.command`) — a registered policy on live curve-family
  tasks, with a latency table and a replay check.
* :mod:`mara_agents.live.jobs` — your own jobs: ``schedule(jobs, ...)`` and ``python -m mara_agents.live.jobs
  run FILE`` (``docs/jobs.md``).
* :mod:`~mara_agents.live.tune` — Tune's trial scheduler driven by an allocator.

Nothing is imported here, so using one front end never loads another.
"""
