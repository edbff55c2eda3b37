"""Where a process's CPU time goes, by part: the functions that do each part of an evaluation are timed where
they are called.

:func:`part_clock` replaces each function of :data:`PARTS` (a method of a class, or a function a module looks
up when it runs) by a timed wrapper, once per process.  A part's time is *exclusive*: a timed call made inside
another (a predictor called from a policy's forward, say) counts for the inner part only, so the parts never
add up to more than the time spent around them.  CPU time is the process's own (``time.process_time``), so
other work on a shared machine does not inflate it.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# part -> the (module, class or None, function) that do it
PARTS: dict[str, tuple[tuple[str, str | None, str], ...]] = {
    "FM": (("mara_agents.predictors.fm.predictor", "FlowMatchingPredictor", "predict"),),
    "WLS": (("mara_agents.predictors.wls", "WLSPredictor", "predict"),),
    "answer sharing": (("mara_agents.predictors.memo", "StepMemo", "predict"),),
    "torch policy forward": (("mara_agents.mat.model", "MATModel", "act"),
                             ("mara_agents.mat.ensemble", "MATEnsemble", "act"),
                             ("mara_agents.allocators.third_party", "MaskablePPOPolicy", "greedy_picks"),
                             ("mara_agents.allocators.third_party", "ExportedPolicy", "greedy_picks")),
    "environment": (("mara_env.vector_env", "MARAVectorEnv", "step"),
                    ("mara_env.vector_env", "MARAVectorEnv", "reset")),
    "Oracle": (("mara_agents.evaluation.harness", None, "oracle_successes"),),
    "Clairvoyant": (("mara_agents.evaluation.harness", None, "clairvoyant_successes"),),
}


class PartClock:
    """CPU seconds spent in each part so far, exclusive of the timed calls made inside it."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._inner: list[float] = []  # per open timed call: the time of the timed calls made inside it

    def timed(self, part: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` with its CPU time (less that of the timed calls inside it) added to ``part``."""
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            self._inner.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.process_time() - start
                self.totals[part] += spent - self._inner.pop()
                if self._inner:
                    self._inner[-1] += spent
        return wrapper

    def snapshot(self) -> dict[str, float]:
        """The totals so far, a copy."""
        return dict(self.totals)

    def install(self) -> None:
        """Time every function of :data:`PARTS`."""
        for part, places in PARTS.items():
            for module, owner, name in places:
                target = importlib.import_module(module)
                if owner is not None:
                    target = getattr(target, owner)
                setattr(target, name, self.timed(part, getattr(target, name)))


@functools.cache
def part_clock() -> PartClock:
    """This process's clock, installed on its first use."""
    clock = PartClock()
    clock.install()
    return clock


def spent_since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each part's CPU seconds between two snapshots (parts with none left out)."""
    spent = {part: after[part] - before.get(part, 0.0) for part in after}
    return {part: seconds for part, seconds in spent.items() if seconds > 0}
