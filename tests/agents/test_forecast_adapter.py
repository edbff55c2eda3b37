"""A MaskablePPO model trained on MARA-Forecast-v0 is scored by ``evaluate.py --policy NAME=...`` with no class
to write: its manifest names the env and the forecast options, and the policy appends the same features."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import mara_agents  # noqa: F401  (registers MARA-Forecast-v0)
from mara_agents.allocators.third_party import save_maskable_ppo
from mara_agents.evaluation.methods import build_policy
from mara_agents.play.lockstep import evaluate_workload

from conftest import SHORT_WINDOW

FORECAST = {"predictor": "wls", "forecast": "median", "observation": "flat", "conflicts": "repair",
            "flat_history": 6}


@pytest.fixture(scope="module")
def trained(bank_dir, tmp_path_factory):
    """A tiny MaskablePPO trained on the forecast env, saved with its settings."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    options = {**FORECAST, "bank": str(bank_dir), "arrival_window": SHORT_WINDOW, "arrival_prob": 0.3}
    envs = make_vec_env("MARA-Forecast-v0", n_envs=2, seed=1, env_kwargs=options)
    model = MaskablePPO("MlpPolicy", envs, n_steps=64, batch_size=64, seed=1, verbose=0)
    model.learn(256)
    path = save_maskable_ppo(model, tmp_path_factory.mktemp("forecast_ppo") / "model.zip", "MARA-Forecast-v0",
                             **FORECAST)
    return model, path


def test_the_manifest_names_the_env_and_its_options(trained):
    _, path = trained
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["env_id"] == "MARA-Forecast-v0" and manifest["env_options"] == FORECAST
    assert len(manifest["checkpoint_sha256"]) == 64


def test_the_policy_flag_plays_it_as_the_model_plays_the_forecast_env(trained, short_file, bank_dir):
    model, path = trained
    policy = build_policy(f"mine=mara_agents.allocators.third_party:make_maskable_ppo:checkpoint={path}", None)
    assert policy.features is not None and policy.history_points == FORECAST["flat_history"]
    played = evaluate_workload(policy, short_file, bank=bank_dir, arrival_window=SHORT_WINDOW)
    env = gym.make("MARA-Forecast-v0", workload=str(short_file), bank=str(bank_dir), arrival_window=SHORT_WINDOW,
                   **FORECAST)
    for index, row in enumerate(played):
        obs, _ = env.reset(options={"episode": index})
        while True:
            action, _ = model.predict(obs, deterministic=True, action_masks=env.unwrapped.action_masks())
            obs, _, terminated, _, info = env.step(action)
            if terminated:
                break
        assert row["conflicts"] == 0 and row["utilisation"] > 0
        metrics = info["episode_metrics"]
        assert {key: row[key] for key in metrics if key != "conflicts"} == \
            {key: metrics[key] for key in metrics if key != "conflicts"}


def test_saving_needs_a_zip_path_and_a_predictor_name(trained, tmp_path):
    model, _ = trained
    with pytest.raises(ValueError, match="path must end in .zip"):
        save_maskable_ppo(model, tmp_path / "model.pt")
    with pytest.raises(ValueError, match="predictor must be saved by name"):
        save_maskable_ppo(model, tmp_path / "model.zip", "MARA-Forecast-v0", predictor=object())
