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

A model trained on ``MARA-Forecast-v0`` (:mod:`mara_agents.envs.forecast`) plays the same way once its manifest
names that env and its options (:func:`save_maskable_ppo` writes both): the policy then computes the forecast
features with the same predictor and appends them as the training env did, so
``evaluate.py --policy NAME=mara_agents.allocators.third_party:make_maskable_ppo:checkpoint=PATH.zip`` scores it
with no code to write.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mara_common.atomic import atomic_write_json
from mara_env.actions import repair_picks
from mara_env.features import NUM_GLOBAL_FEATURES, NUM_TASK_FEATURES
from mara_env.flat import flat_size, flatten_observation

THIRD_PARTY_DIR = Path(__file__).resolve().parents[1] / "checkpoints" / "third_party"
FORECAST_DIR = THIRD_PARTY_DIR / "forecast"  # the models trained on MARA-Forecast-v0 with FM's forecast
_KEYS = ("tasks", "history", "history_len", "budget", "global", "action_mask")
_PREFIX = "maskable_ppo_seed"
_EXPORTED = "cleanrl_ppo_seed{seed}_policy"


def maskable_ppo_name(seed: int) -> str:
    """File name (without suffix) of a MaskablePPO checkpoint and its manifest for a training seed."""
    return f"{_PREFIX}{seed}"


def exported_policy_name(seed: int) -> str:
    """File name (without suffix) of the CleanRL-style recipe's exported policy and its manifest for a seed."""
    return _EXPORTED.format(seed=seed)


def maskable_ppo_checkpoint(seed: int = 0, directory: Path = THIRD_PARTY_DIR) -> Path:
    """The shipped MaskablePPO checkpoint of a training seed (``directory``: :data:`FORECAST_DIR` for the
    models trained with FM's forecast)."""
    return directory / f"{maskable_ppo_name(seed)}.zip"


def shipped_seeds(directory: Path = THIRD_PARTY_DIR, stem: str = f"{_PREFIX}*", suffix: str = ".zip") -> tuple[int, ...]:
    """Training seeds of the shipped third-party models in ``directory`` whose file names match ``stem`` (each
    model file with its manifest), in order."""
    manifests = directory.glob(f"{stem}.json")
    return tuple(sorted(json.loads(path.read_text())["seed"] for path in manifests
                        if path.with_suffix(suffix).is_file()))


class _NoOptimizer:
    """Stands in for the policy's Adam: playing needs no optimizer, and building a torch optimizer imports
    ``torch._dynamo`` (with SymPy) into every process that plays the method (its memory: ``docs/research/performance.md``)."""

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
    from mara_agents.play.checkpoints import CheckpointError, manifest_path

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
    from mara_agents.play.checkpoints import file_sha256, manifest_path

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


class FlatNetworkPolicy:
    """A network trained on the flat observation of ``MARA-v0`` or ``MARA-Forecast-v0`` (with conflict repair),
    playing the default dict observation greedily.

    It does what the training env did around the network: flattens the observation (with the forecast
    features, in one predictor call for the whole batch, when the manifest names the forecast env), asks the
    subclass for the greedy masked picks, and repairs them. Stateless across steps and episodes, so it offers
    ``act_batch`` (one network call for many episodes). ``checkpoint`` is kept as a ``Path`` so that the
    evaluation's fingerprint hashes the file's bytes.
    """

    kind = "flat-observation"

    def __init__(self, checkpoint: str | Path, num_nodes: int, num_slots: int, flat_length: int):
        self.checkpoint = Path(checkpoint)
        self.num_nodes, self.num_slots = num_nodes, num_slots
        self.env_id, options = read_env_settings(self.checkpoint)
        self.features = None
        from mara_agents.envs.forecast import ENV_ID as FORECAST_ENV_ID, forecast_features

        if self.env_id == FORECAST_ENV_ID:
            self.features = forecast_features(options.get("predictor", "fm"), options.get("forecast", "median"),
                                              self.num_nodes)
        extra = 0 if self.features is None else len(self.features.names)
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
        """Joint actions ``(N, M)`` for N dict observations: flatten, greedy masked picks, repair."""
        batch = {key: np.stack([np.asarray(obs[key]) for obs in observations]) for key in _KEYS}
        mask = batch["action_mask"] > 0
        if mask.shape[1:] != (self.num_nodes, self.num_slots + 1):
            raise ValueError(f"{self.checkpoint.name} was trained for {self.num_nodes} nodes and {self.num_slots} "
                             f"slots, the observation has {mask.shape[1]} nodes and {mask.shape[2] - 1} slots")
        extra = None if self.features is None else self.features(batch)
        picks = self.greedy_picks(flatten_observation(batch, self.history_points, extra), mask)
        return repair_picks(np.asarray(picks).reshape(len(mask), self.num_nodes), mask[:, 0, 1:])

    def greedy_picks(self, flat: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(N, M) picks of the network for (N, D) flat observations and their (N, M, K + 1) masks."""
        raise NotImplementedError


class MaskablePPOPolicy(FlatNetworkPolicy):
    """A trained sb3-contrib MaskablePPO network (a ``.zip``) playing the default MARA-v0 observation greedily."""

    kind = "MaskablePPO"

    def __init__(self, checkpoint: str | Path, device: str = "cpu", verify: bool = True):
        try:
            import sb3_contrib  # noqa: F401 — the checkpoint's policy class lives there
        except ImportError as exc:
            raise ModuleNotFoundError("maskable-ppo needs sb3-contrib; install it with pip install -e \".[sb3]\"") \
                from exc
        checkpoint = _verified(checkpoint, self.kind, verify,
                               "`python examples/sb3_maskable_ppo.py --seed S --out DIR`")
        self.network = load_policy_network(checkpoint, device)
        nvec = self.network.action_space.nvec
        super().__init__(checkpoint, len(nvec), int(nvec[0]) - 1, int(self.network.observation_space.shape[0]))

    def greedy_picks(self, flat: np.ndarray, mask: np.ndarray) -> np.ndarray:
        picks, _ = self.network.predict(flat, deterministic=True, action_masks=mask.reshape(len(mask), -1))
        return picks


class ExportedPolicy(FlatNetworkPolicy):
    """Any torch policy exported with ``torch.export`` (a ``.pt2`` file) that maps a batch of flat
    observations (N, D) to per-node logits (N, M, K + 1) over [idle, slot 0 … slot K − 1], played greedily.

    Its manifest (``<file>.json``, :func:`save_exported_policy`) names the env it was trained on and its options
    (``predictor``, ``forecast``, ``flat_history``), the sizes, and the file's SHA-256. The CleanRL-style recipe
    (``examples/cleanrl_ppo.py --out DIR``) writes one; so can any other learner.
    """

    kind = "exported torch policy"

    def __init__(self, checkpoint: str | Path, verify: bool = True):
        import torch

        checkpoint = _verified(checkpoint, self.kind, verify, "`python examples/cleanrl_ppo.py --out DIR`")
        from mara_agents.play.checkpoints import CheckpointError, manifest_path

        try:
            sizes = json.loads(manifest_path(checkpoint).read_text())["sizes"]
            num_nodes, choices, flat_length = (int(sizes[key]) for key in ("nodes", "choices", "observation"))
            self.program = torch.export.load(checkpoint).module()
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise CheckpointError(f"{checkpoint}: not an exported flat-observation policy with its manifest: "
                                  f"{exc}") from exc
        super().__init__(checkpoint, num_nodes, choices - 1, flat_length)

    def __deepcopy__(self, memo: dict[int, Any]) -> ExportedPolicy:
        """A copy that shares the exported program (read-only while playing; copying it is slow and warns)."""
        clone = copy.copy(self)
        memo[id(self)] = clone
        for key, value in vars(self).items():
            if key != "program":
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone

    def greedy_picks(self, flat: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            logits = self.program(torch.as_tensor(flat, dtype=torch.float32)).numpy()
        return np.where(mask, logits, -np.inf).argmax(axis=-1)


def _verified(checkpoint: str | Path, kind: str, verify: bool, train_hint: str) -> Path:
    """``checkpoint`` as a path, refused (naming it) when it is missing or its manifest's SHA-256 differs."""
    from mara_agents.play.checkpoints import verify_manifest_checksum

    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"{kind} checkpoint {path} not found; train one with {train_hint}")
    verify_manifest_checksum(path, kind, verify)
    return path


def save_exported_policy(program: Any, path: str | os.PathLike[str], env_id: str, num_nodes: int, choices: int,
                         observation_size: int, details: Mapping[str, Any] | None = None,
                         **env_options: Any) -> Path:
    """Save an ``ExportedProgram`` (flat observations → per-node logits) as ``path`` (a ``.pt2``) with its
    manifest: the env it was trained on and the options that shape its observation, the sizes, ``details``
    and the file's SHA-256; both written atomically. :class:`ExportedPolicy` plays it."""
    import torch

    from mara_agents.play.checkpoints import write_checksum_manifest

    path = Path(path)
    if path.suffix != ".pt2":
        raise ValueError(f"path must end in .pt2, got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.partial.pt2")
    torch.export.save(program, partial)
    os.replace(partial, path)
    write_checksum_manifest(path, {**(details or {}), "env_id": env_id, "env_options": env_options,
                                   "sizes": {"nodes": num_nodes, "choices": choices,
                                             "observation": observation_size}})
    return path


def make_maskable_ppo(seed: int = 0, checkpoint: str | Path | None = None, device: str = "cpu",
                      verify: bool = True) -> MaskablePPOPolicy:
    """MaskablePPO from ``checkpoint`` (default: the shipped one for training ``seed``; ``verify=False``
    accepts a checkpoint without a manifest)."""
    return MaskablePPOPolicy(checkpoint or maskable_ppo_checkpoint(seed), device=device, verify=verify)


def make_maskable_ppo_fm(seed: int = 0, device: str = "cpu") -> MaskablePPOPolicy:
    """The shipped MaskablePPO trained on ``MARA-Forecast-v0`` with FM's forecast, for training ``seed``."""
    return MaskablePPOPolicy(maskable_ppo_checkpoint(seed, FORECAST_DIR), device=device)


def make_exported_policy(checkpoint: str | Path, verify: bool = True) -> ExportedPolicy:
    """An exported flat-observation torch policy (see :class:`ExportedPolicy`), e.g.
    ``evaluate.py --policy NAME=mara_agents.allocators.third_party:make_exported_policy:checkpoint=PATH.pt2``."""
    return ExportedPolicy(checkpoint, verify=verify)


def make_cleanrl_ppo_fm(seed: int = 0) -> ExportedPolicy:
    """The shipped CleanRL-style PPO trained on ``MARA-Forecast-v0`` with FM's forecast, for training ``seed``."""
    return ExportedPolicy(FORECAST_DIR / f"{exported_policy_name(seed)}.pt2")
