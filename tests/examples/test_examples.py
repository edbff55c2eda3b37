"""Every recipe in examples/ runs, at a few hundred steps, on the small synthetic bank."""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_sb3_make_vec_env_works_with_no_env_kwargs():
    from stable_baselines3.common.env_util import make_vec_env

    import mara_env  # noqa: F401

    envs = make_vec_env("MARA-v0", n_envs=4)
    obs = envs.reset()
    assert obs["action_mask"].shape == (4, 7, 11)
    envs.step(np.zeros((4, 7), dtype=np.int64))
    assert envs.get_attr("render_mode") == ["rgb_array"] * 4
    assert envs.env_method("render", indices=[0])[0].dtype == np.uint8
    envs.close()


def test_maskable_ppo_recipe_trains_and_plays_matchings(bank_dir):
    rows = load("sb3_maskable_ppo").main(["--steps", "512", "--n-steps", "64", "--n-envs", "2", "--episodes", "1",
                                          "--arrival-window", "20", "--bank", str(bank_dir)])
    assert len(rows) == 1
    assert all(row["conflicts"] == 0 and 0.0 <= row["success_rate"] <= 1.0 for row in rows)


def test_rllib_recipe_completes_masked_training_iterations(bank_dir):
    result = load("rllib_ppo").main(["--iterations", "2", "--batch-size", "400", "--arrival-window", "10",
                                     "--bank", str(bank_dir)])
    assert len(result["returns"]) == 2 and any(math.isfinite(r) for r in result["returns"])
    assert result["masked_picks"] == 0  # the module honoured the env's action masks
    assert result["metrics"]["conflicts"] == 0


def test_supersuit_recipe_trains_a_shared_policy(bank_dir):
    rows = load("supersuit_vec").main(["--steps", "512", "--n-steps", "32", "--episodes", "1",
                                       "--arrival-window", "20", "--bank", str(bank_dir)])
    assert len(rows) == 1 and rows[0]["conflicts"] == 0 and rows[0]["steps"] > 0


def test_supersuit_wrappers_accept_the_flat_observation(bank_dir):
    import supersuit as ss

    import mara_env

    env = ss.flatten_v0(mara_env.parallel_env(bank=str(bank_dir), observation="flat"))
    observations, _ = env.reset(seed=0)
    assert all(obs.dtype == np.float32 and obs.ndim == 1 for obs in observations.values())


def test_cleanrl_recipe_runs_updates_and_finishes_episodes(bank_dir):
    rates = load("cleanrl_ppo").main(["--total-timesteps", "800", "--num-envs", "2", "--num-steps", "200",
                                      "--arrival-window", "20", "--bank", str(bank_dir)])
    finished = [r for r in rates if not math.isnan(r)]  # an episode without tasks has no success rate
    assert finished and all(0.0 <= r <= 1.0 for r in finished)


@pytest.mark.parametrize("name", ["sb3_maskable_ppo", "rllib_ppo", "supersuit_vec", "cleanrl_ppo",
                                  "measure_maskable_ppo"])
def test_examples_explain_themselves(name):
    module = load(name)
    assert module.__doc__ and "python examples/" in module.__doc__
