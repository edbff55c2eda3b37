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
