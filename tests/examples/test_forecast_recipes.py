"""The recipes with forecasts (``--forecast fm``): MaskablePPO on MARA-Forecast-v0 saves a model that the
shipped adapter plays and resumes an interrupted run to the same budget; CleanRL-style PPO trains on the
native forecast vector env; RLlib trains on the PettingZoo forecast env. All on the small synthetic bank."""

import json
import math

import gymnasium as gym
import numpy as np
import pytest
from test_examples import load, scalar_tags

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

SB3 = ["--n-steps", "64", "--n-envs", "2", "--episodes", "1", "--arrival-window", "20", "--forecast", "fm"]


class Interrupted(Exception):
    """Stands in for a kill right after the first state the recipe saves."""


def die_after_first_save(recipe, monkeypatch):
    """Make ``recipe.save_state`` raise :class:`Interrupted` once it has written the state; returns the original."""
    save_state = recipe.save_state

    def save_then_die(*args):
        save_state(*args)
        raise Interrupted

    monkeypatch.setattr(recipe, "save_state", save_then_die)
    return save_state


def test_maskable_ppo_with_forecasts_saves_a_model_the_shipped_adapter_plays(bank_dir, tmp_path):
    from mara_agents.allocators.third_party import make_maskable_ppo

    out = tmp_path / "out"
    rows = load("sb3_maskable_ppo").main([*SB3, "--steps", "256", "--bank", str(bank_dir), "--out", str(out),
                                          "--logdir", str(tmp_path / "tb")])
    assert rows[0]["conflicts"] == 0
    assert sorted(p.name for p in out.iterdir()) == ["maskable_ppo_seed0.json", "maskable_ppo_seed0.zip"]
    manifest = json.loads((out / "maskable_ppo_seed0.json").read_text())
    assert manifest["env_id"] == "MARA-Forecast-v0" and manifest["env_steps"] >= 256
    assert manifest["env_options"]["predictor"] == "fm" and manifest["env_options"]["forecast"] == "median"
    policy = make_maskable_ppo(checkpoint=out / "maskable_ppo_seed0.zip")
    assert policy.features is not None and policy.network.observation_space.shape == (404,)


def test_an_interrupted_maskable_ppo_run_resumes_to_the_same_budget(bank_dir, tmp_path, monkeypatch, capsys):
    recipe = load("sb3_maskable_ppo")
    out = tmp_path / "out"
    argv = [*SB3, "--steps", "512", "--checkpoint-every", "128", "--bank", str(bank_dir), "--out", str(out),
            "--logdir", str(tmp_path / "tb")]
    save_state = die_after_first_save(recipe, monkeypatch)
    with pytest.raises(Interrupted):
        recipe.main(argv)
    state = json.loads((out / "resume_maskable_ppo_seed0.json").read_text())
    assert state["run"]["steps"] == 512 and not (out / "maskable_ppo_seed0.zip").exists()
    from sb3_contrib import MaskablePPO
    done = MaskablePPO.load(out / "resume_maskable_ppo_seed0.zip").num_timesteps
    assert 128 <= done < 512

    monkeypatch.setattr(recipe, "save_state", save_state)
    with pytest.raises(SystemExit) as refused:  # other settings: not resumed, not overwritten
        recipe.main([*argv[:-6], "--steps", "1024", *argv[-6:]])
    assert refused.value.code == 2 and "steps" in capsys.readouterr().err.splitlines()[-1]
    recipe.main(argv)
    assert f"resuming from {out / 'resume_maskable_ppo_seed0.zip'}" in capsys.readouterr().out
    manifest = json.loads((out / "maskable_ppo_seed0.json").read_text())
    assert manifest["env_steps"] == 512  # 4 rollouts of 2 × 64 steps, as an uninterrupted run
    assert sorted(p.name for p in out.iterdir()) == ["maskable_ppo_seed0.json", "maskable_ppo_seed0.zip"]
    assert len({path.parent for path in (tmp_path / "tb").rglob("events.out.tfevents.*")}) == 1  # one curve


def test_cleanrl_recipe_trains_on_the_native_forecast_vector_env(bank_dir, tmp_path, capsys):
    import torch

    recipe = load("cleanrl_ppo")
    args = recipe.parse_args(["--forecast", "fm", "--num-envs", "3", "--bank", str(bank_dir)])
    envs = recipe.make_envs(args)
    assert type(envs).__name__ == "ForecastVectorEnv" and envs.single_observation_space.shape == (404,)
    envs.close()
    rates = recipe.main(["--forecast", "fm", "--total-timesteps", "800", "--num-envs", "2", "--num-steps", "50",
                         "--num-minibatches", "2", "--arrival-window", "20", "--bank", str(bank_dir),
                         "--check-episodes", "3", "--logdir", str(tmp_path / "tb"), "--out", str(tmp_path / "out")])
    finished = [r for r in rates if not math.isnan(r)]
    assert finished and all(0.0 <= r <= 1.0 for r in finished)
    assert {"charts/success_rate", "charts/SPS"} <= scalar_tags(tmp_path / "tb")
    lines = capsys.readouterr().out.splitlines()
    assert "training env steps/s" in lines[-3] and "over 3 episodes on val curves" in lines[-2]
    manifest = json.loads((tmp_path / "out" / "cleanrl_ppo_seed0.json").read_text())
    assert manifest["env_id"] == "MARA-Forecast-v0" and manifest["env_steps"] == 800
    assert len(manifest["check_val_success_rates"]) == 3
    weights = torch.load(tmp_path / "out" / "cleanrl_ppo_seed0.pt", weights_only=True)
    assert weights["trunk.0.weight"].shape == (128, 404)

    # The exported program plays through evaluate.py's adapter: the same logits as the trained agent, greedy
    # masked picks, no conflicts, on the default dict observation.
    from mara_agents.allocators.third_party import make_exported_policy

    policy = make_exported_policy(tmp_path / "out" / "cleanrl_ppo_seed0_policy.pt2")
    agent = recipe.Agent(404, np.full(7, 11))
    agent.load_state_dict(weights)
    probe = torch.randn(5, 404)
    torch.testing.assert_close(policy.program(probe), recipe.GreedyLogits(agent)(probe), rtol=0, atol=0)
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_window=20)
    observation, _ = env.reset(seed=1)
    terminated = False
    while not terminated:
        observation, _, terminated, _, info = env.step(policy.act(observation))
    assert info["episode_metrics"]["conflicts"] == 0 and info["episode_metrics"]["steps"] > 0


def test_the_rllib_env_carries_the_forecast_per_node(bank_dir):
    recipe = load("rllib_ppo")
    plain = recipe.parallel_env({"bank": str(bank_dir)})
    forecast = recipe.parallel_env({"bank": str(bank_dir), "predictor": "fm", "forecast": "median"})
    size = {env: env.observation_space("node_0")["observations"].shape[0] for env in (plain, forecast)}
    assert size[forecast] - size[plain] == 10 * 13  # K slots × (6 + M) features
    observations, _ = forecast.reset(seed=0)
    assert np.all(np.isfinite(observations["node_0"]["observations"]))


def test_rllib_recipe_trains_with_forecasts(bank_dir, tmp_path):
    result = load("rllib_ppo").main(["--iterations", "1", "--batch-size", "200", "--arrival-window", "10",
                                     "--forecast", "fm", "--bank", str(bank_dir), "--logdir", str(tmp_path)])
    assert result["masked_picks"] == 0 and result["metrics"]["conflicts"] == 0
