"""Allocators trained by third-party RL libraries, played like every other policy.

``maskable-ppo`` is sb3-contrib's MaskablePPO trained by the recipe of ``examples/sb3_maskable_ppo.py`` on
``gym.make("MARA-v0", observation="flat", conflicts="repair")``: it saw the flat float32 observation, a per-node
mask, and an env that moved colliding picks to the next free task.  The evaluation plays the default env (dict
observation, the paper's conflict rule), so :class:`MaskablePPOPolicy` does what the training env did around the
network: it flattens the dict observation with :func:`mara_env.flat.flatten_observation`, takes the network's
greedy masked picks, and repairs them with :func:`mara_env.actions.repair_picks`.  The action it returns is the
matching the training env would have applied, so it plays without conflicts.

The shipped checkpoints, their training budget and the command that made them are in
``mara_agents/checkpoints/third_party/`` (one JSON manifest beside each zip).

A model trained on ``MARA-Forecast-v0`` (:mod:`mara_agents.forecast_env`) plays the same way once its manifest
names that env and its options (:func:`save_maskable_ppo` writes both): the policy then computes the forecast
features with the same predictor and appends them as the training env did, so
``evaluate.py --policy NAME=mara_agents.allocators.third_party:make_maskable_ppo:checkpoint=PATH.zip`` scores it
with no code to write.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from curves.bank import atomic_write_json
from mara_env.actions import repair_picks
from mara_env.features import NUM_GLOBAL_FEATURES, NUM_TASK_FEATURES
from mara_env.flat import flat_size, flatten_observation

THIRD_PARTY_DIR = Path(__file__).resolve().parents[1] / "checkpoints" / "third_party"
_KEYS = ("tasks", "history", "history_len", "budget", "global", "action_mask")
_PREFIX = "maskable_ppo_seed"


def maskable_ppo_name(seed: int) -> str:
    """File name (without suffix) of a MaskablePPO checkpoint and its manifest for a training seed."""
    return f"{_PREFIX}{seed}"


def maskable_ppo_checkpoint(seed: int = 0) -> Path:
    """The shipped MaskablePPO checkpoint of a training seed."""
    return THIRD_PARTY_DIR / f"{maskable_ppo_name(seed)}.zip"


def shipped_seeds() -> tuple[int, ...]:
    """Training seeds of the shipped MaskablePPO checkpoints (each a zip with its manifest), in order."""
    manifests = THIRD_PARTY_DIR.glob(f"{_PREFIX}*.json")
    return tuple(sorted(json.loads(path.read_text())["seed"] for path in manifests
                        if path.with_suffix(".zip").is_file()))


class _NoOptimizer:
    """Stands in for the policy's Adam: playing needs no optimizer, and building a torch optimizer imports
    ``torch._dynamo`` (with SymPy), about 70 MiB of resident memory in every process that plays the method."""

    def __init__(self, params: Any, **kwargs: Any):
        del params, kwargs


def load_policy_network(checkpoint: Path, device: str) -> Any:
    """The MaskablePPO checkpoint's policy network, in evaluation mode, with the trained weights.

    ``MaskablePPO.load`` would rebuild the whole algorithm around it (rollout buffer, optimizer, schedules);
    this builds the policy class the zip names from its saved spaces and settings and loads its weights only.
    """
    from stable_baselines3.common.save_util import load_from_zip_file

    data, params, _ = load_from_zip_file(checkpoint, device=device)
    settings = {**(data.get("policy_kwargs") or {}), "optimizer_class": _NoOptimizer}
    network = data["policy_class"](data["observation_space"], data["action_space"], lambda _: 0.0, **settings)
    network.load_state_dict(params["policy"])
    network.to(device)
    network.set_training_mode(False)
    return network


def read_env_settings(checkpoint: Path) -> tuple[str, dict[str, Any]]:
    """(env id, env options) recorded in the manifest beside ``checkpoint``; ``("MARA-v0", {})`` without one."""
    from mara_agents.checkpoint_io import CheckpointError, manifest_path

    manifest = manifest_path(checkpoint)
    if not manifest.is_file():
        return "MARA-v0", {}
    try:
        recorded = json.loads(manifest.read_text())
        env_id, options = recorded.get("env_id", "MARA-v0"), dict(recorded.get("env_options") or {})
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise CheckpointError(f"{manifest}: unreadable manifest of MaskablePPO checkpoint {checkpoint.name}: {exc}") \
            from exc
    return env_id, options


def save_maskable_ppo(model: Any, path: str | os.PathLike[str], env_id: str = "MARA-v0",
                      details: Mapping[str, Any] | None = None, **env_options: Any) -> Path:
    """Save a trained MaskablePPO ``model`` as ``path`` (a ``.zip``) with a JSON manifest beside it naming the
    env it was trained on and the options that shape its observation (``predictor``, ``forecast``,
    ``flat_history``, …) and the zip's SHA-256, both written atomically; returns the zip's path. ``details``
    (training budget, seed, command, …) go into the manifest as well.
    :class:`MaskablePPOPolicy` reads the manifest to play the model as it was trained."""
    from mara_agents.checkpoint_io import file_sha256, manifest_path

    path = Path(path)
    if path.suffix != ".zip":
        raise ValueError(f"path must end in .zip, got {str(path)!r}")
    if not isinstance(env_options.get("predictor", "fm"), str):
        raise ValueError("predictor must be saved by name ('fm' or 'wls'), got a predictor object")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.partial.zip")
    model.save(partial)
    os.replace(partial, path)
    atomic_write_json(manifest_path(path), {**(details or {}), "checkpoint": path.name,
                                            "checkpoint_sha256": file_sha256(path), "env_id": env_id,
                                            "env_options": env_options})
    return path


class MaskablePPOPolicy:
    """A trained sb3-contrib MaskablePPO network playing the default MARA-v0 observation greedily.

    Stateless across steps and episodes, so it offers ``act_batch`` (one network call for many episodes).
    ``checkpoint`` is kept as a ``Path`` so that the evaluation's fingerprint hashes the zip's bytes.
    """

    def __init__(self, checkpoint: str | Path, device: str = "cpu", verify: bool = True):
        try:
            import sb3_contrib  # noqa: F401 — the checkpoint's policy class lives there
        except ImportError as exc:
            raise ModuleNotFoundError("maskable-ppo needs sb3-contrib; install it with pip install -e \".[sb3]\"") \
                from exc
        self.checkpoint = Path(checkpoint)
        if not self.checkpoint.is_file():
            raise FileNotFoundError(f"MaskablePPO checkpoint {self.checkpoint} not found; train one with "
                                    "`python examples/sb3_maskable_ppo.py --seed S --out DIR`")
        from mara_agents.checkpoint_io import verify_manifest_checksum
        verify_manifest_checksum(self.checkpoint, "MaskablePPO", verify)
        self.network = load_policy_network(self.checkpoint, device)
        nvec = self.network.action_space.nvec
        self.num_nodes, self.num_slots = len(nvec), int(nvec[0]) - 1
        self.env_id, options = read_env_settings(self.checkpoint)
        self.features = None
        from mara_agents.forecast_env import ENV_ID as FORECAST_ENV_ID, forecast_features

        if self.env_id == FORECAST_ENV_ID:

            self.features = forecast_features(options.get("predictor", "fm"), options.get("forecast", "median"),
                                              self.num_nodes)
        extra = 0 if self.features is None else len(self.features.names)
        flat_length = int(self.network.observation_space.shape[0])
        self.history_points = (flat_length - NUM_GLOBAL_FEATURES) // self.num_slots - NUM_TASK_FEATURES - extra
        if self.history_points < 1 or flat_size(self.num_slots, self.history_points, extra=self.features) != \
                flat_length:
            raise ValueError(f"{self.checkpoint}: an input of {flat_length} values is not a flat {self.env_id} "
                             f"observation of {self.num_slots} slots")

    def reset(self) -> None:
        """Nothing to forget: the action depends on the current observation only."""

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[dict[str, Any]]) -> np.ndarray:
        """Joint actions ``(N, M)`` for N dict observations: flatten (with the forecast features, in one predictor
        call, for a model trained on MARA-Forecast-v0), greedy masked picks, repair."""
        batch = {key: np.stack([np.asarray(obs[key]) for obs in observations]) for key in _KEYS}
        mask = batch["action_mask"]
        if mask.shape[1:] != (self.num_nodes, self.num_slots + 1):
            raise ValueError(f"{self.checkpoint.name} was trained for {self.num_nodes} nodes and {self.num_slots} "
                             f"slots, the observation has {mask.shape[1]} nodes and {mask.shape[2] - 1} slots")
        extra = None if self.features is None else self.features(batch)
        flat = flatten_observation(batch, self.history_points, extra)
        picks, _ = self.network.predict(flat, deterministic=True, action_masks=mask.reshape(len(mask), -1) > 0)
        occupied = mask[:, 0, 1:] > 0
        return repair_picks(np.asarray(picks).reshape(len(mask), self.num_nodes), occupied)


def make_maskable_ppo(seed: int = 0, checkpoint: str | Path | None = None, device: str = "cpu",
                      verify: bool = True) -> MaskablePPOPolicy:
    """MaskablePPO from ``checkpoint`` (default: the shipped one for training ``seed``; ``verify=False``
    accepts a checkpoint without a manifest)."""
    return MaskablePPOPolicy(checkpoint or maskable_ppo_checkpoint(seed), device=device, verify=verify)
