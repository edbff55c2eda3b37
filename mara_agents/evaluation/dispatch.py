"""Which worker plays which unit: the units on the same episodes stay with one worker.

Every method's unit on a slice of episodes asks the predictors for the same task rows, whichever policy plays
it (a task after s batches is one row), and a worker process shares the answers it computes among all the
units it plays (:mod:`~mara_agents.predictors.shared`).  Units handed to whichever worker is free would spread a
slice's methods over the workers, and each worker would compute the slice's rows again.  :func:`play_units`
gives each worker one bundle at a time (every unit on the same episodes, the bundle with the most episodes
first), and a worker with no bundle left takes units from the end of another worker's bundle, so no worker
waits while units do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from mara_agents.evaluation.workers import worker_pool

if TYPE_CHECKING:  # the harness imports this module
    from mara_agents.evaluation.harness import Unit

Rows = list[dict[str, Any]]


def same_episodes(units: list[Unit]) -> list[list[Unit]]:
    """``units`` bundled by the episodes they play (their first episode and their count), in their order within a
    bundle; the bundles with the most episodes first."""
    bundles: dict[tuple[str, int, int], list[Unit]] = {}
    for unit in units:
        bundles.setdefault((unit.targets[0].path, unit.targets[0].index, len(unit.keys)), []).append(unit)
    return sorted(bundles.values(), key=lambda bundle: -sum(len(unit.keys) for unit in bundle))


class BundleQueue:
    """The units still to play, as bundles: those a worker has started are its own until it is idle."""

    def __init__(self, bundles: list[list[Unit]], workers: int):
        self.waiting = deque(deque(bundle) for bundle in bundles)
        self.started: list[deque[Unit]] = [deque() for _ in range(workers)]

    def next_for(self, worker: int) -> Unit | None:
        """The next unit of ``worker``'s bundle; else the first unit of the next bundle; else the last unit of the
        longest bundle another worker has started; None when every unit is handed out."""
        if not self.started[worker] and self.waiting:
            self.started[worker] = self.waiting.popleft()
        if self.started[worker]:
            return self.started[worker].popleft()
        longest = max(self.started, key=len)
        return longest.pop() if longest else None


def play_units(units: list[Unit], jobs: int, play: Callable[[Unit, str, int], Rows], bank: str, num_nodes: int,
               finish: Callable[[Unit, Rows], None]) -> None:
    """Play ``units`` in ``jobs`` worker processes (``play(unit, bank, num_nodes)``), each worker playing bundles of
    units on the same episodes, and ``finish(unit, rows)`` each unit as it ends."""
    queue = BundleQueue(same_episodes(units), jobs)
    with ExitStack() as stack:
        pools = [stack.enter_context(worker_pool(1)) for _ in range(jobs)]
        running: dict[Future, tuple[int, Unit]] = {}

        def hand_out(worker: int) -> None:
            unit = queue.next_for(worker)
            if unit is not None:
                running[pools[worker].submit(play, unit, bank, num_nodes)] = (worker, unit)

        for worker in range(jobs):
            hand_out(worker)
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                worker, unit = running.pop(future)
                finish(unit, future.result())
                hand_out(worker)
