"""Fixtures for the agent tests: small workload files and one tiny trained MAT checkpoint (synthetic bank)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from curves.bank import load_bank
from mara_agents.allocators.naive import FIFOPolicy
from mara_agents.training.config import FineTuneSettings, MATTrainConfig
from mara_agents.mat.model import MATHyperParameters
from mara_agents.training.ppo import PPOSettings
from mara_agents.training.train import TrainResult, train
from mara_agents.predictors.fm import FlowMatchingModel, save_checkpoint
from mara_env.config import MARAConfig
from mara_env.features import TASK_FEATURE_INDEX, TASK_FEATURES
from mara_env.fixed_workloads import build_workload
from mara_env.workload import Episode, Workload, save_workload

torch.set_num_threads(1)  # the machine is shared; one thread is faster than two contended ones


SHORT_WINDOW = 40  # pass ``arrival_window=SHORT_WINDOW`` when playing ``short_file``


@pytest.fixture(scope="session")
def short_file(bank_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 short id episodes (test curves): busy arrivals in the first 40 steps, budgets cut to ≤ 60 steps,
    so a whole episode takes about 100 steps instead of about 800."""
    drawn = build_workload(load_bank(bank_dir), "id", 0.3, roots=2, episodes=1).episodes
    short = []
    for episode in drawn:
        keep = episode.arrival < SHORT_WINDOW
        short.append(Episode.from_lists(episode.arrival[keep], np.asarray(episode.curve)[keep].tolist(),
                                        episode.eps[keep], np.minimum(episode.budget[keep], 60),
                                        episode.root, episode.index))
    path = tmp_path_factory.mktemp("workloads") / "short.json"
    save_workload(path, Workload(tuple(short), "id"))
    return path


@pytest.fixture(scope="session")
def stress_file(bank_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One stress-test episode."""
    path = tmp_path_factory.mktemp("workloads") / "stress.json"
    save_workload(path, build_workload(load_bank(bank_dir), "stress", 0.0, roots=1, episodes=1))
    return path


@pytest.fixture(scope="session")
def fm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained FM predictor checkpoint: enough to exercise every code path that loads one."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("fm") / "fm.pt"
    save_checkpoint(path, FlowMatchingModel())
    return path


def tiny_config(bank_dir: Path, run_dir: Path, **changes: object) -> MATTrainConfig:
    """A few dozen env steps of MAT-over-WLS training (20 per update), scored on a one-episode validation
    workload every 20 steps: fast, but the whole loop runs (:func:`trained` adds the stress workload)."""
    groups = {"env": MARAConfig(), "ppo": PPOSettings(epochs=2, minibatches=2), "model": MATHyperParameters(dim=16),
              "finetune": FineTuneSettings()}
    settings = dict(predictor="wls", run_dir=str(run_dir), steps=60, validate_every=20, validation_roots=1,
                    validation_episodes=1, validation_stress_episodes=0, num_envs=2, rollout_steps=10,
                    checkpoint_every=20)
    env_changes = {"bank": str(bank_dir)}
    for name, value in changes.items():
        group = next((g for g, default in groups.items() if name in default.__dataclass_fields__), None)
        if group == "env":
            env_changes[name] = value
        elif group is not None:
            groups[group] = dataclasses.replace(groups[group], **{name: value})
        else:
            settings[name] = value
    groups["env"] = groups["env"].replace(**env_changes)
    return MATTrainConfig(**settings, **groups)


@pytest.fixture(scope="session")
def trained(bank_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    """One tiny training run shared by the tests that need a checkpoint, validated on the mixture and the
    stress workload."""
    return train(tiny_config(bank_dir, tmp_path_factory.mktemp("run"), validation_stress_episodes=1))


def hand_observation(history_len, remaining_steps, budget=100, nodes=2):
    """A hand-built observation with flat-loss histories (WLS then predicts the generation cap 2·B − s:
    never reaching ε; LARA clips that to the steps left)."""
    k = len(history_len)
    tasks = np.zeros((k, len(TASK_FEATURES)), dtype=np.float32)
    column = TASK_FEATURE_INDEX
    tasks[:, column["present"]] = 1.0
    tasks[:, column["remaining_time"]] = np.asarray(remaining_steps) / budget
    tasks[:, column["target_loss"]] = 0.5
    tasks[:, column["log_batch_size"]] = np.log(32.0)
    tasks[:, column["log_lr"]] = np.log(1e-3)
    history = np.zeros((k, 50), dtype=np.float32)
    for i, n in enumerate(history_len):
        history[i, :n] = 1.0
    return {"action_mask": np.ones((nodes, k + 1), dtype=np.int8), "tasks": tasks, "history": history,
            "history_len": np.asarray(history_len, dtype=np.int64),
            "budget": np.full(k, budget, dtype=np.float32), "global": np.zeros(4, dtype=np.float32)}


def fifo_observations(config: MARAConfig, steps: int, seed: int = 4) -> list[dict[str, np.ndarray]]:
    """The observations of one episode of ``config`` played by FIFO, at most ``steps`` of them."""
    env = gym.make("MARA-v0", config=config, disable_env_checker=True)
    observation, _ = env.reset(seed=seed)
    fifo, seen = FIFOPolicy(), []
    for _ in range(steps):
        seen.append(observation)
        observation, _, terminated, _, _ = env.step(fifo.act(observation))
        if terminated:
            break
    return seen
