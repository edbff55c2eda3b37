"""Which allocators the evaluation plays, how to build them, and why one may be unavailable.

Registered methods, their table labels and seeds come from the one registry,
:data:`mara_agents.allocators.registry.POLICIES`; adding a method there makes it available here.  A user's own
policy is named on the command line as ``[NAME=]package.module:Factory[:key=value,...]``: the factory (usually
a class) is imported — from the current directory too — and called with the keyword arguments (values are
Python literals, anything else a string), and the tables show it as NAME (default: the factory's name).

Each worker process builds a policy once and plays every episode with a fresh copy of it (``copy.deepcopy``),
so no state carries over from one episode to the next, results do not depend on which process played which
episode, and a policy that is slow to build (loading weights) is built once per worker, not per episode.
"""

from __future__ import annotations

import ast
import copy
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mara_agents.allocators.registry import POLICIES, make_policy
from mara_agents.evaluation.fingerprint import policy_fingerprint
from mara_agents.play.policy import Policy, is_batched

# The bounds are computed from the workload, not played; they appear beside the methods in every table.
ORACLE, CLAIRVOYANT = "oracle", "clairvoyant"
BOUND_LABELS = {ORACLE: "Oracle", CLAIRVOYANT: "Clairvoyant"}


class MethodError(ValueError):
    """A method that cannot be evaluated: unknown name, unimportable factory, or a build that failed."""


@dataclass(frozen=True)
class UserPolicy:
    """A policy given as ``[NAME=]package.module:Factory[:key=value,...]`` (the whole text is its key)."""

    key: str
    label: str
    module: str
    factory: str
    kwargs: tuple[tuple[str, Any], ...] = ()
    seeds: None = None

    def load_factory(self) -> Any:
        """Import the module (the current directory is searched too) and return the factory."""
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            raise MethodError(f"--policy {self.key}: cannot import module {self.module!r} ({exc}); run from the "
                              "directory that holds it or put it on PYTHONPATH") from exc
        except Exception as exc:  # noqa: BLE001 — the user's module may raise anything while it is imported
            raise MethodError(f"--policy {self.key}: importing module {self.module!r} raised "
                              f"{type(exc).__name__}: {exc}") from exc
        factory = getattr(module, self.factory, None)
        if not callable(factory):
            raise MethodError(f"--policy {self.key}: module {self.module!r} has no callable {self.factory!r}")
        return factory

    def build(self) -> Policy:
        """Call the factory with the given keyword arguments."""
        return self.load_factory()(**dict(self.kwargs))


def _literal(text: str) -> Any:
    """A Python literal (``3``, ``0.5``, ``True``, ``'x'``), or the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_user_policy(text: str) -> UserPolicy:
    """Parse ``[NAME=]package.module:Factory[:key=value,...]``; a malformed text is a :class:`MethodError`."""
    head, _, rest = text.partition(":")
    name, _, module = head.rpartition("=")
    factory, _, arguments = rest.partition(":")
    if not module or not factory.isidentifier():
        raise MethodError(f"--policy {text!r}: expected [NAME=]package.module:Factory[:key=value,...]")
    kwargs = []
    for item in filter(None, arguments.split(",")):
        key, equals, value = item.partition("=")
        if not equals or not key.strip().isidentifier():
            raise MethodError(f"--policy {text!r}: argument {item!r} is not key=value")
        kwargs.append((key.strip(), _literal(value.strip())))
    return UserPolicy(text, name or factory, module, factory, tuple(kwargs))


def is_import_path(name: str) -> bool:
    """``package.module:Factory`` names a user policy; plain names are registered methods."""
    return ":" in name


def spec_for(name: str) -> Any:
    """What the tables need of a method (``label``, ``seeds``): its registry entry, or the parsed user policy."""
    if name in POLICIES:
        return POLICIES[name]
    if is_import_path(name):
        return parse_user_policy(name)
    raise MethodError(f"unknown method {name!r}; choose from {', '.join(POLICIES)} or give "
                      "[NAME=]package.module:Factory[:key=value,...]")


def build_policy(name: str, seed: int | None) -> Policy:
    """A freshly built policy (a user policy, or a registered one for a training seed)."""
    if is_import_path(name):
        return parse_user_policy(name).build()
    spec_for(name)
    return make_policy(name) if seed is None else make_policy(name, seed=seed)


_BUILT: dict[tuple[str, int | None], Policy] = {}  # this process's prototypes (see the module text)


def fresh_policy(name: str, seed: int | None) -> Policy:
    """A fresh copy of this process's prototype of (method, seed), building the prototype on first use."""
    key = (name, seed)
    if key not in _BUILT:
        _BUILT[key] = build_policy(name, seed)
    try:
        return copy.deepcopy(_BUILT[key])
    except Exception:  # noqa: BLE001 — an object that cannot be copied is built afresh instead
        return build_policy(name, seed)


class CheckedActions:
    """A user's policy whose every joint action is checked before the env takes it: a wrong shape, a NaN or
    non-integer pick, or a pick outside ``0 … K`` — or an exception from the policy itself — stops the
    evaluation with a :class:`MethodError` naming the policy, instead of a traceback from deep inside the env.
    ``act_batch`` is offered only where the policy offers it (the harness plays batched policies in lock-step)."""

    def __init__(self, policy: Policy, name: str, num_nodes: int, num_slots: int):
        self.policy, self.name, self.num_nodes, self.num_slots = policy, name, num_nodes, num_slots

    def reset(self) -> None:
        self.call("reset")

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        return self.check(self.call("act", observation), (self.num_nodes,), "act")

    def call(self, method: str, *args: Any) -> Any:
        """The policy's ``method(*args)``; what it raises becomes a :class:`MethodError` naming the policy."""
        try:
            return getattr(self.policy, method)(*args)
        except Exception as exc:  # noqa: BLE001 — the user's code: any failure is reported as theirs
            raise MethodError(f"policy {self.name}: {method} raised {type(exc).__name__}: {exc}") from exc

    def check(self, actions: Any, shape: tuple[int, ...], call: str) -> np.ndarray:
        """``actions`` as an integer array of ``shape`` with every pick in 0 … K, else :class:`MethodError`."""
        who = f"policy {self.name}: {call} returned"
        try:
            array = np.asarray(actions)
        except (TypeError, ValueError) as exc:
            raise MethodError(f"{who} {type(actions).__name__}, not an array of slot picks ({exc})") from exc
        if array.shape != shape:
            raise MethodError(f"{who} actions of shape {array.shape}; expected {shape} (one pick per node)")
        if array.dtype.kind not in "iub":
            if array.dtype.kind != "f":
                raise MethodError(f"{who} {array.dtype} actions; expected integer slot picks")
            if not np.isfinite(array).all():
                raise MethodError(f"{who} a non-finite pick ({array[~np.isfinite(array)][0]}); expected integers")
            if (array != np.floor(array)).any():
                raise MethodError(f"{who} a fractional pick ({array[array != np.floor(array)][0]}); "
                                  "expected integers")
        outside = (array < 0) | (array > self.num_slots)
        if outside.any():
            raise MethodError(f"{who} pick {array[outside][0]}, outside 0 … {self.num_slots} "
                              "(0 = idle, j = slot j − 1)")
        return array.astype(np.int64)


class CheckedBatchActions(CheckedActions):
    """:class:`CheckedActions` for a policy that also acts for many episodes in one call."""

    def act_batch(self, observations: Sequence[dict[str, Any]]) -> np.ndarray:
        return self.check(self.call("act_batch", observations), (len(observations), self.num_nodes), "act_batch")


def checked(policy: Policy, name: str, num_nodes: int, num_slots: int) -> CheckedActions:
    """``policy`` with its actions checked (see :class:`CheckedActions`)."""
    kind = CheckedBatchActions if is_batched(policy) else CheckedActions
    return kind(policy, name, num_nodes, num_slots)


@dataclass(frozen=True)
class Availability:
    """The outcome of trying to build one (method, seed): its fingerprint, or why it is skipped."""

    method: str
    seed: int | None
    fingerprint: str | None = None
    reason: str | None = None
    batched: bool = False  # the policy offers act_batch (see harness.play_unit)
    optional: bool = False  # a registered method whose optional extra (e.g. sb3-contrib) is not installed


def probe(name: str, seed: int | None) -> Availability:
    """Build the policy in this process (which keeps it for the units it plays): proves the method can run and
    yields its checkpoint hash."""
    try:
        policy = fresh_policy(name, seed)
        if not (callable(getattr(policy, "act", None)) and callable(getattr(policy, "reset", None))):
            raise TypeError(f"{type(policy).__name__} lacks act(observation) and reset()")
        return Availability(name, seed, fingerprint=policy_fingerprint(policy), batched=is_batched(policy))
    except Exception as exc:  # noqa: BLE001 — any failure means "skip this method", reported with its message
        return Availability(name, seed, reason=f"{type(exc).__name__}: {exc}",
                            optional=isinstance(exc, ImportError) and name in POLICIES)
