"""The behaviour-cloning warm start (``sb3_maskable_ppo.py --bc-from slack-fm``): the expert's actions are the
registered FM-slack allocator's, cloning makes the greedy policy reproduce them on states it never saw, and a
run killed after the cloning stage resumes into PPO without cloning again, to the model an uninterrupted run
trains. All on the small synthetic bank."""

import json

import gymnasium as gym
import numpy as np
import pytest
from test_examples import load, scalar_tags
from test_forecast_recipes import Interrupted, die_after_first_save

from mara_env.features import TASK_FEATURE_INDEX

WINDOW = ["--arrival-window", "40"]
BC = ["--bc-from", "slack-fm", "--n-envs", "4", "--n-steps", "32", "--episodes", "1", *WINDOW]
STATES = 40  # the first states of one busy episode (it lasts longer)
OPTIONS = {"observation": "flat", "conflicts": "repair", "arrival_window": 40}


def held_out_play(bank_dir, steps=512):
    """Expert play on episodes the tests' training never draws (seed 1000)."""
    from mara_agents.training.behaviour_cloning import collect_expert_play
    from mara_agents.envs.sb3_vec import make_sb3_vec_env

    envs = make_sb3_vec_env("MARA-Forecast-v0", 8, seed=1000, bank=str(bank_dir), predictor="fm", **OPTIONS)
    play = collect_expert_play(envs, steps)
    envs.close()
    return play


def test_the_expert_actions_are_the_registered_slack_fm_allocators(bank_dir):
    from mara_agents import make_policy
    from mara_agents.training.behaviour_cloning import expert_actions

    policy = make_policy("slack-fm")
    busy = {"bank": str(bank_dir), "conflicts": "repair", "arrival_window": 40, "arrival_prob": 0.4}
    flat = gym.make("MARA-Forecast-v0", predictor="fm", observation="flat", **busy)
    plain = gym.make("MARA-v0", **busy)
    names = tuple(flat.unwrapped.slot_features.names)
    observation, _ = flat.reset(seed=0)
    view, _ = plain.reset(seed=0)
    policy.reset()
    contended = 0
    for _ in range(STATES):
        action = policy.act(view)
        np.testing.assert_array_equal(expert_actions(observation[None], flat.unwrapped.config, names)[0], action)
        contended += int((view["tasks"][:, TASK_FEATURE_INDEX["present"]] > 0).sum() > len(action))
        observation, _, terminated, _, _ = flat.step(action)
        view, _, _, _, _ = plain.step(action)
        assert not terminated
    assert contended > 10, contended  # the ranking itself was exercised, not only the uncontended rule


def test_cloning_makes_the_greedy_policy_agree_with_fm_slack_on_held_out_states(bank_dir, tmp_path, capsys):
    from sb3_contrib import MaskablePPO

    from mara_agents.training.behaviour_cloning import agreement

    out, logdir = tmp_path / "out", tmp_path / "tb"
    argv = [*BC, "--forecast", "fm", "--bc-steps", "1024", "--bc-epochs", "10", "--steps", "1024",
            "--bank", str(bank_dir), "--out", str(out), "--logdir", str(logdir)]
    load("sb3_maskable_ppo").main(argv)
    assert "behaviour cloning of slack-fm: 1024 env steps of expert play, 10 epochs" in capsys.readouterr().out
    cloned = MaskablePPO.load(out / "maskable_ppo_seed0.zip", device="cpu")
    untrained = MaskablePPO("MlpPolicy", _env(bank_dir), seed=0)
    held_out = held_out_play(bank_dir)
    before, after = agreement(untrained.policy, held_out), agreement(cloned.policy, held_out)
    assert after >= 0.95 and 1 - after < (1 - before) / 4, (before, after)  # errors cut at least fourfold
    manifest = json.loads((out / "maskable_ppo_seed0.json").read_text())
    assert manifest["run"]["bc"] == {"from": "slack-fm", "steps": 1024, "epochs": 10}
    assert manifest["bc"]["env_steps"] == manifest["env_steps"] == 1024
    assert {"bc/loss", "bc/agreement"} <= scalar_tags(logdir)


def _env(bank_dir):
    from mara_agents.envs.sb3_vec import make_sb3_vec_env

    return make_sb3_vec_env("MARA-Forecast-v0", 1, seed=0, bank=str(bank_dir), predictor="fm", **OPTIONS)


def test_the_forecast_less_learner_clones_the_same_states_without_the_forecast(bank_dir, tmp_path):
    from sb3_contrib import MaskablePPO

    from mara_agents.training.behaviour_cloning import forecast_start

    out = tmp_path / "out"
    load("sb3_maskable_ppo").main([*BC, "--bc-steps", "256", "--bc-epochs", "2", "--steps", "256",
                                   "--bank", str(bank_dir), "--out", str(out), "--logdir", str(tmp_path / "tb")])
    model = MaskablePPO.load(out / "maskable_ppo_seed0.zip", device="cpu")
    config = gym.make("MARA-v0", bank=str(bank_dir), **OPTIONS).unwrapped.config
    assert model.observation_space.shape == (forecast_start(config),)
    assert json.loads((out / "maskable_ppo_seed0.json").read_text())["env_id"] == "MARA-v0"


def test_a_run_killed_after_cloning_resumes_into_ppo_without_cloning_again(bank_dir, tmp_path, monkeypatch, capsys):
    import torch
    from sb3_contrib import MaskablePPO

    recipe = load("sb3_maskable_ppo")
    whole, out = tmp_path / "whole", tmp_path / "out"
    common = [*BC, "--forecast", "fm", "--bc-steps", "256", "--bc-epochs", "3", "--steps", "768",
              "--bank", str(bank_dir), "--logdir", str(tmp_path / "tb")]
    recipe.main([*common, "--out", str(whole)])
    save_state = die_after_first_save(recipe, monkeypatch)  # the first save is the state after cloning
    with pytest.raises(Interrupted):
        recipe.main([*common, "--out", str(out)])
    assert MaskablePPO.load(out / "resume_maskable_ppo_seed0.zip").num_timesteps == 256
    assert sorted(p.name for p in out.iterdir()) == ["bc_maskable_ppo_seed0.json", "bc_maskable_ppo_seed0.zip",
                                                     "resume_maskable_ppo_seed0.json", "resume_maskable_ppo_seed0.zip"]
    monkeypatch.setattr(recipe, "save_state", save_state)
    capsys.readouterr()
    recipe.main([*common, "--out", str(out)])
    printed = capsys.readouterr().out
    assert f"resuming from {out / 'resume_maskable_ppo_seed0.zip'}" in printed and "behaviour cloning" not in printed
    manifest = json.loads((out / "maskable_ppo_seed0.json").read_text())
    assert manifest["env_steps"] >= 768 and manifest["bc"]["env_steps"] == 256
    resumed, uninterrupted = (MaskablePPO.load(path / "maskable_ppo_seed0.zip").policy.state_dict()
                              for path in (out, whole))
    assert all(torch.equal(resumed[key], uninterrupted[key]) for key in uninterrupted)
