"""The policy fingerprint (the cache's "checkpoint hash") follows a policy's weights, settings and files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mara_agents.evaluation.fingerprint import policy_fingerprint, source_fingerprint


class NetPolicy:
    """A stand-in for a learned policy: a torch module inside a predictor-like holder, plus settings."""

    def __init__(self, seed: int, threshold: float = 0.5):
        torch.manual_seed(seed)
        self.holder = {"net": torch.nn.Linear(3, 2), "table": np.arange(4.0)}
        self.threshold = threshold

    def reset(self) -> None: ...

    def act(self, observation):
        return np.zeros(7, dtype=np.int64)


def test_identical_weights_give_identical_fingerprints():
    assert policy_fingerprint(NetPolicy(0)) == policy_fingerprint(NetPolicy(0))


def test_changed_weights_change_the_fingerprint():
    assert policy_fingerprint(NetPolicy(0)) != policy_fingerprint(NetPolicy(1))


def test_changed_settings_change_the_fingerprint():
    assert policy_fingerprint(NetPolicy(0)) != policy_fingerprint(NetPolicy(0, threshold=0.6))


def test_a_referenced_file_is_hashed_by_content(tmp_path):
    policy = NetPolicy(0)
    policy.checkpoint = tmp_path / "weights.bin"
    policy.checkpoint.write_bytes(b"a")
    before = policy_fingerprint(policy)
    policy.checkpoint.write_bytes(b"b")
    assert policy_fingerprint(policy) != before


def test_the_bound_and_policies_are_keyed_by_their_defining_source_file():
    import mara_agents.allocators.naive as baselines
    import mara_agents.evaluation.clairvoyant as clairvoyant
    from mara_env.workload import file_checksum

    assert source_fingerprint(clairvoyant.clairvoyant_successes) == file_checksum(clairvoyant.__file__)
    assert source_fingerprint(baselines.EDFPolicy()) == file_checksum(baselines.__file__)


def test_a_change_to_the_code_a_policy_runs_invalidates_its_fingerprint(monkeypatch):
    import mara_agents.allocators.naive as baselines
    from mara_agents.evaluation import fingerprint

    before = policy_fingerprint(baselines.EDFPolicy())
    fingerprint.agents_fingerprint.cache_clear()
    monkeypatch.setattr(fingerprint, "agents_fingerprint", lambda modules: "predictor code changed")
    assert policy_fingerprint(baselines.EDFPolicy()) != before


def closure_files(policy) -> set[str]:
    """The files :func:`agents_fingerprint` hashes for ``policy``."""
    from mara_agents.evaluation import fingerprint

    hashed: list[str] = []
    files, agents = fingerprint.files_fingerprint, fingerprint.agents_fingerprint
    fingerprint.files_fingerprint = lambda paths: hashed.extend(str(p) for p in paths) or ""
    fingerprint.agents_fingerprint = agents.__wrapped__  # uncached, so the files are read this time
    try:
        policy_fingerprint(policy)
    finally:
        fingerprint.files_fingerprint, fingerprint.agents_fingerprint = files, agents
    return set(hashed)


@pytest.mark.parametrize("method", ["fifo", "lara", "lara-fm", "slack-fm", "mara-wls", "mara", "maskable-ppo"])
def test_every_mara_agents_function_a_policy_runs_is_in_its_fingerprint(method):
    """Soundness of the import closure: profile building the policy and playing it, and check that every
    ``mara_agents`` source file whose code ran is hashed (the registry's factory aside: what it builds is
    hashed through the policy's own state)."""
    import gymnasium as gym

    from mara_agents.allocators import registry
    from mara_agents.evaluation.methods import build_policy

    package = str(Path(registry.__file__).resolve().parents[1])
    ran: set[str] = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            ran.add(frame.f_code.co_filename)

    env = gym.make("MARA-v0", disable_env_checker=True)
    build_policy(method, 0 if method.startswith("mara") else None)  # imports done: module bodies are not code it runs
    sys.setprofile(profile)
    try:
        policy = build_policy(method, 0 if method.startswith("mara") else None)
        observation, _ = env.reset(seed=0)
        for _ in range(40):
            observation, *_ = env.step(policy.act(observation))
    finally:
        sys.setprofile(None)
    ran = {path for path in ran if "/evaluation/" not in path and Path(path).name != "registry.py"}
    assert ran, "the profile saw no mara_agents code"
    assert ran <= closure_files(policy), f"code that ran but is not hashed: {sorted(ran - closure_files(policy))}"


def test_code_a_policy_never_imports_is_not_in_its_fingerprint():
    from mara_agents.evaluation.methods import build_policy

    files = {Path(p).relative_to(Path(p).parents[1]).as_posix() for p in closure_files(build_policy("mara", 0))}
    assert "mat/model.py" in files and "predictors/demand.py" in files
    assert not files & {"training/ppo.py", "training/train.py", "predictors/train.py", "allocators/registry.py"}
