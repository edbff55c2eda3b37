"""User policies for the evaluation tests, loaded by import path like a user's own policy.

``ToyPolicy`` is EDF with a "checkpoint" file named by MARA_TOY_CHECKPOINT: its content changes nothing
about the actions but stands in for trained weights, so the tests can check that a changed checkpoint
invalidates cached results.  ``BatchedEDF`` is EDF with ``act_batch``, to test lock-step play.
"""

from __future__ import annotations

import os
from pathlib import Path

from mara_agents.allocators.naive import EDFPolicy


class ToyPolicy(EDFPolicy):
    """EDF plus a checkpoint path (hashed by the evaluation's policy fingerprint)."""

    def __init__(self) -> None:
        self.checkpoint = Path(os.environ.get("MARA_TOY_CHECKPOINT", "missing-toy-checkpoint"))


class BatchedEDF(EDFPolicy):
    """EDF offering ``act_batch``; records the largest batch it was asked for."""

    largest_batch = 0

    def act_batch(self, observations):
        BatchedEDF.largest_batch = max(BatchedEDF.largest_batch, len(observations))
        return [self.act(observation) for observation in observations]


class SlowEDF(EDFPolicy):
    """EDF that sleeps ``delay`` seconds per step, so an evaluation is still running when a test interrupts it."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay

    def act(self, observation):
        import time

        time.sleep(self.delay)
        return super().act(observation)


class CountingEDF(EDFPolicy):
    """EDF that counts how often it is built and keeps the keyword arguments it was built with."""

    built = 0

    def __init__(self, depth: int = 1, greedy: bool = False, tag: str = "") -> None:
        CountingEDF.built += 1
        self.settings = (depth, greedy, tag)


class ThreadProbe(EDFPolicy):
    """EDF that appends "<pid> <torch threads>" to the file ``path`` at every episode start."""

    def __init__(self, path: str) -> None:
        self.path = path

    def reset(self) -> None:
        import torch

        with open(self.path, "a") as handle:
            handle.write(f"{os.getpid()} {torch.get_num_threads()}\n")


class DiesWhenBuilt(EDFPolicy):
    """EDF whose constructor ends its process at once (as a crash in native code would)."""

    def __init__(self) -> None:
        os._exit(3)


class DiesWhenActing(EDFPolicy):
    """EDF that ends its process at its first step (as a crash in native code would)."""

    def act(self, observation):
        os._exit(3)


class BrokenActions(EDFPolicy):
    """EDF whose joint action is spoiled one way (``kind``): the evaluation must stop with a line naming it."""

    def __init__(self, kind: str = "shape") -> None:
        self.kind = kind

    def act(self, observation):
        import numpy as np

        picks = np.asarray(super().act(observation))
        if self.kind == "raise":
            raise ZeroDivisionError("the policy's own bug")
        spoiled = {"shape": picks[:-1], "nan": np.full(picks.shape, np.nan), "range": picks + 99,
                   "negative": picks - 5, "fraction": picks + 0.5, "text": "idle",
                   "words": np.full(picks.shape, "idle")}
        return spoiled[self.kind]


class BrokenBatch(BatchedEDF):
    """Batched EDF whose ``act_batch`` answers for one episode too few."""

    def act_batch(self, observations):
        return super().act_batch(observations)[:-1]
