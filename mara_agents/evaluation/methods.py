"""Which allocators the evaluation knows, how to build them, and why one may be unavailable.

Adding a method is one line in :data:`METHODS` (plus its factory in ``mara_agents.registry``, which builds
every policy by name and loads the shipped checkpoints; a MAT method gets ``seed=`` its training seed).
A user's own policy is named by import path, ``package.module:Factory``; the factory (usually
the class) is called without arguments and must return a :class:`~mara_agents.policy.Policy`.

A method that cannot be built — not registered, checkpoint missing, wrong arguments — is *skipped* with the
error as its reason; it never stops the run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from mara_agents.evaluation.fingerprint import policy_fingerprint
from mara_agents.policy import Policy, is_batched
from mara_agents.registry import make_policy

TRAINING_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class MethodSpec:
    """One allocator as the tables show it.  ``seeds`` are MAT training seeds (None: no training seed)."""

    key: str
    label: str
    seeds: tuple[int, ...] | None = None


METHODS: dict[str, MethodSpec] = {spec.key: spec for spec in (
    MethodSpec("mara", "MARA", TRAINING_SEEDS),
    MethodSpec("mara-wls", "MARA-WLS", TRAINING_SEEDS),
    MethodSpec("lara", "LARA"),
    MethodSpec("lara-fm", "LARA-FM"),
    MethodSpec("slack-fm", "FM-slack"),  # not in the paper: a hand-written reference (mara_agents/slack.py)
    MethodSpec("fifo", "FIFO"),
    MethodSpec("edf", "EDF"),
    MethodSpec("mara-sparse", "MARA w/ sparse reward", TRAINING_SEEDS),
    MethodSpec("random", "Random", (0,)),  # seeded, so that reruns match
)}

# The bounds are computed from the workload, not played; they appear beside the methods in every table.
ORACLE, CLAIRVOYANT = "oracle", "clairvoyant"
BOUND_LABELS = {ORACLE: "Oracle", CLAIRVOYANT: "Clairvoyant"}


def is_import_path(name: str) -> bool:
    """``package.module:Factory`` names a user policy; plain names are registered methods."""
    return ":" in name


def spec_for(name: str) -> MethodSpec:
    """The spec of a registered or user method (user methods have no training seed)."""
    if name in METHODS:
        return METHODS[name]
    if is_import_path(name):
        return MethodSpec(name, name.rsplit(":", 1)[1])
    return MethodSpec(name, name.upper())


def build_policy(name: str, seed: int | None) -> Policy:
    """A fresh policy for one episode (fresh, so that no state carries over and results are order-free)."""
    if is_import_path(name):
        module, attr = name.rsplit(":", 1)
        factory: Any = getattr(importlib.import_module(module), attr)
        return factory()
    return make_policy(name) if seed is None else make_policy(name, seed=seed)


@dataclass(frozen=True)
class Availability:
    """The outcome of trying to build one (method, seed): its fingerprint, or why it is skipped."""

    method: str
    seed: int | None
    fingerprint: str | None = None
    reason: str | None = None
    batched: bool = False  # the policy offers act_batch (see harness.play_lockstep)


def probe(name: str, seed: int | None) -> Availability:
    """Build the policy once in the main process: proves it can run and yields its checkpoint hash."""
    try:
        policy = build_policy(name, seed)
        if not (callable(getattr(policy, "act", None)) and callable(getattr(policy, "reset", None))):
            raise TypeError(f"{type(policy).__name__} lacks act(observation) and reset()")
        return Availability(name, seed, fingerprint=policy_fingerprint(policy), batched=is_batched(policy))
    except Exception as exc:  # noqa: BLE001 — any failure means "skip this method", reported with its message
        return Availability(name, seed, reason=f"{type(exc).__name__}: {exc}")
