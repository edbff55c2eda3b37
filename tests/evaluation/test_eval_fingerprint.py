"""The policy fingerprint (the cache's "checkpoint hash") follows a policy's weights, settings and files."""

from __future__ import annotations

import numpy as np
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


def test_a_change_to_predictor_code_invalidates_policy_fingerprints(monkeypatch):
    import mara_agents.allocators.naive as baselines
    from mara_agents.evaluation import fingerprint

    before = policy_fingerprint(baselines.EDFPolicy())
    fingerprint.agents_fingerprint.cache_clear()
    monkeypatch.setattr(fingerprint, "agents_fingerprint", lambda: "predictor code changed")
    assert policy_fingerprint(baselines.EDFPolicy()) != before


def test_training_only_modules_are_not_loaded_by_evaluation():
    """Editing a TRAINING_ONLY module keeps cached results; that is only sound if evaluation never runs it."""
    import subprocess
    import sys

    from mara_agents.evaluation.fingerprint import TRAINING_ONLY
    from mara_agents.allocators.registry import POLICIES

    script = (
        "import sys, gymnasium as gym\n"
        "from mara_agents.evaluation.methods import build_policy\n"
        "from mara_agents.evaluation import harness, cli  # noqa: F401\n"
        f"for method, seeds in {sorted((n, m.seeds) for n, m in POLICIES.items())!r}:\n"
        "    policy = build_policy(method, seeds[0] if seeds else None)\n"
        "    env = gym.make('MARA-v0')\n"
        "    observation, _ = env.reset(seed=0)\n"
        "    for _ in range(3):\n"
        "        observation, *_ = env.step(policy.act(observation))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('mara_agents'))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = done.stdout.split()
    training = {"mara_agents." + path.removesuffix(".py").replace("/", ".") for path in TRAINING_ONLY}
    assert "mara_agents.mat.model" in loaded, "the probe did not build a MAT policy"
    assert not training & set(loaded), f"evaluation imports training-only modules: {training & set(loaded)}"
