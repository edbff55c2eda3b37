"""Every recipe in examples/ runs, at a few hundred steps, on the small synthetic bank, logs to TensorBoard,
and refuses a bad flag with one line and exit status 2 before any work."""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def scalar_tags(logdir):
    """The TensorBoard scalar tags written under ``logdir`` (which must hold exactly one run)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = [path.parent for path in logdir.rglob("events.out.tfevents.*")]
    assert len(set(runs)) == 1, runs
    events = EventAccumulator(str(runs[0]))
    events.Reload()
    return set(events.Tags()["scalars"])


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


def test_maskable_ppo_recipe_trains_and_plays_matchings(bank_dir, tmp_path):
    rows = load("sb3_maskable_ppo").main(["--steps", "512", "--n-steps", "64", "--n-envs", "2", "--episodes", "1",
                                          "--arrival-window", "20", "--bank", str(bank_dir),
                                          "--logdir", str(tmp_path)])
    assert len(rows) == 1
    assert all(row["conflicts"] == 0 and 0.0 <= row["success_rate"] <= 1.0 for row in rows)
    assert "train/loss" in scalar_tags(tmp_path) and (tmp_path / "maskable_ppo_seed0_1").is_dir()


def test_rllib_recipe_completes_masked_training_iterations(bank_dir, tmp_path, capsys):
    result = load("rllib_ppo").main(["--iterations", "2", "--batch-size", "400", "--arrival-window", "10",
                                     "--bank", str(bank_dir), "--logdir", str(tmp_path)])
    assert len(result["returns"]) == 2 and any(math.isfinite(r) for r in result["returns"])
    assert result["masked_picks"] == 0  # the module honoured the env's action masks
    assert result["metrics"]["conflicts"] == 0
    assert "env_runners/episode_return_mean" in scalar_tags(tmp_path)
    assert "nan" not in capsys.readouterr().out


def test_supersuit_recipe_trains_a_shared_policy(bank_dir, tmp_path):
    rows = load("supersuit_vec").main(["--steps", "512", "--n-steps", "32", "--episodes", "1",
                                       "--arrival-window", "20", "--bank", str(bank_dir), "--logdir", str(tmp_path)])
    assert len(rows) == 1 and rows[0]["conflicts"] == 0 and rows[0]["steps"] > 0
    assert "train/value_loss" in scalar_tags(tmp_path)


def test_supersuit_wrappers_accept_the_flat_observation(bank_dir):
    import supersuit as ss

    import mara_env

    env = ss.flatten_v0(mara_env.parallel_env(bank=str(bank_dir), observation="flat"))
    observations, _ = env.reset(seed=0)
    assert all(obs.dtype == np.float32 and obs.ndim == 1 for obs in observations.values())


def test_cleanrl_recipe_runs_updates_and_finishes_episodes(bank_dir, tmp_path, capsys):
    rates = load("cleanrl_ppo").main(["--total-timesteps", "800", "--num-envs", "2", "--num-steps", "20",
                                      "--num-minibatches", "2", "--arrival-window", "20", "--bank", str(bank_dir),
                                      "--logdir", str(tmp_path)])
    finished = [r for r in rates if not math.isnan(r)]  # an episode without tasks has no success rate
    assert finished and all(0.0 <= r <= 1.0 for r in finished)
    assert {"charts/success_rate", "charts/SPS", "losses/policy"} <= scalar_tags(tmp_path)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("update ")]
    assert len(lines) == 20 and "no episode finished yet" in lines[0] and "recent success rate" in lines[-1]
    assert not any("nan" in line for line in lines)


SMOKE = {
    "sb3_maskable_ppo": ["--steps", "64", "--n-steps", "32", "--n-envs", "1", "--episodes", "1"],
    "supersuit_vec": ["--steps", "64", "--n-steps", "8", "--episodes", "1"],
    "rllib_ppo": ["--iterations", "1", "--batch-size", "40"],
    "cleanrl_ppo": ["--total-timesteps", "64", "--num-envs", "1", "--num-steps", "8"],
}
BAD_FLAGS = [
    ("sb3_maskable_ppo", ["--n-envs", "0"], "--n-envs"),
    ("sb3_maskable_ppo", ["--n-envs", "-3"], "--n-envs"),
    ("sb3_maskable_ppo", ["--steps", "many"], "--steps"),
    ("sb3_maskable_ppo", ["--workload", "/no/such.json"], "--workload"),
    ("sb3_maskable_ppo", ["--bank", "/no/such/bank"], "--bank"),
    ("sb3_maskable_ppo", ["--seed", "-1"], "--seed"),
    ("sb3_maskable_ppo", ["--out", "{file}/x"], "--out"),
    ("sb3_maskable_ppo", ["--out", ""], "--out"),
    ("sb3_maskable_ppo", ["--out", "/proc/x"], "--out"),
    ("sb3_maskable_ppo", ["--logdir", "{file}"], "--logdir"),
    ("sb3_maskable_ppo", ["--arrival-window", "0"], "--arrival-window"),
    ("sb3_maskable_ppo", ["--workload", "{file}"], "workload"),  # exists but is no workload
    ("sb3_maskable_ppo", ["--forecast", "lstm"], "--forecast"),
    ("sb3_maskable_ppo", ["--forecast", "wls", "--forecast-kind", "samples"], "--forecast-kind"),
    ("sb3_maskable_ppo", ["--checkpoint-every", "0"], "--checkpoint-every"),
    ("sb3_maskable_ppo", ["--bc-from", "fifo"], "--bc-from"),
    ("sb3_maskable_ppo", ["--bc-steps", "32"], "--bc-steps"),  # without --bc-from
    ("sb3_maskable_ppo", ["--bc-epochs", "3"], "--bc-epochs"),  # without --bc-from
    ("sb3_maskable_ppo", ["--bc-from", "slack-fm", "--bc-steps", "0"], "--bc-steps"),
    ("sb3_maskable_ppo", ["--bc-from", "slack-fm", "--bc-epochs", "-1"], "--bc-epochs"),
    ("sb3_maskable_ppo", ["--bc-from", "slack-fm", "--bc-steps", "65"], "--bc-steps"),  # more than --steps 64
    ("sb3_maskable_ppo", ["--bc-from", "slack-fm", "--forecast", "wls"], "--forecast"),
    ("supersuit_vec", ["--num-envs", "0"], "--num-envs"),
    ("supersuit_vec", ["--num-envs", "-1"], "--num-envs"),
    ("supersuit_vec", ["--logdir", "{file}/runs"], "--logdir"),
    ("rllib_ppo", ["--batch-size", "0"], "--batch-size"),
    ("rllib_ppo", ["--iterations", "2.5"], "--iterations"),
    ("rllib_ppo", ["--logdir", "{file}"], "--logdir"),
    ("rllib_ppo", ["--forecast-kind", "samples"], "--forecast-kind"),
    ("cleanrl_ppo", ["--num-envs", "0"], "--num-envs"),
    ("cleanrl_ppo", ["--num-envs", "-2"], "--num-envs"),
    ("cleanrl_ppo", ["--gamma", "1.5"], "--gamma"),
    ("cleanrl_ppo", ["--learning-rate", "nan"], "--learning-rate"),
    ("cleanrl_ppo", ["--num-minibatches", "100"], "--num-minibatches"),
    ("cleanrl_ppo", ["--bank", "/no/such/bank"], "--bank"),
    ("cleanrl_ppo", ["--logdir", "{file}/x"], "--logdir"),
    ("cleanrl_ppo", ["--forecast", "FM"], "--forecast"),
    ("cleanrl_ppo", ["--forecast-kind", "spread"], "--forecast-kind"),
    ("cleanrl_ppo", ["--out", "{file}/x"], "--out"),
    ("measure_maskable_ppo", ["--seeds", "0", "-4"], "--seeds"),
    ("measure_maskable_ppo", ["--root", "99"], "--root"),
    ("measure_maskable_ppo", ["--workload", "/no/such.json"], "--workload"),
    ("measure_maskable_ppo", ["--logdir", "{file}"], "--logdir"),
]


@pytest.mark.parametrize("name, flags, culprit", BAD_FLAGS)
def test_a_bad_flag_is_one_line_and_exit_2_before_any_work(bank_dir, tmp_path, capsys, name, flags, culprit):
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("not a directory, not a workload\n")
    logdir = tmp_path / "runs"
    argv = [*SMOKE.get(name, []), "--bank", str(bank_dir), "--logdir", str(logdir)]
    flags = [flag.format(file=not_a_dir) for flag in flags]
    argv = [*([] if name == "measure_maskable_ppo" else argv), *flags]
    with pytest.raises(SystemExit) as exit_info:
        load(name).main(argv)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2
    message = err.strip().splitlines()[-1]
    assert "error:" in message and culprit in message and flags[-1] in message
    assert out == "" and not logdir.exists()  # nothing trained, printed or logged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


@pytest.mark.parametrize("name", ["sb3_maskable_ppo", "rllib_ppo", "supersuit_vec", "cleanrl_ppo",
                                  "measure_maskable_ppo"])
def test_examples_explain_themselves(name):
    module = load(name)
    assert module.__doc__ and "python examples/" in module.__doc__


DOCS = Path(__file__).resolve().parents[2] / "docs"
TORCH_LIBRARIES = ("stable_baselines3", "sb3_contrib", "ray.rllib", "supersuit", "make_demand", "make_policy(\"mara\"",
                   "evaluate_workload")


def python_snippets():
    for page in sorted(DOCS.glob("*.md")):
        for number, block in enumerate(page.read_text().split("```python\n")[1:]):
            yield pytest.param(block.split("```")[0], id=f"{page.name}-{number}")


@pytest.mark.parametrize("snippet", list(python_snippets()))
def test_doc_snippets_that_train_or_play_networks_use_one_thread_as_the_examples_do(snippet):
    if any(library in snippet for library in TORCH_LIBRARIES):
        assert "torch.set_num_threads(1)" in snippet


def test_the_documented_gif_recipe_writes_an_animated_gif(tmp_path, monkeypatch):
    from PIL import Image

    text = (DOCS / "environment.md").read_text()
    recipe = next(block.split("```")[0] for block in text.split("```python\n") if "save_episode(frames" in block)
    monkeypatch.chdir(tmp_path)
    exec(compile(recipe, "docs/environment.md", "exec"), {})
    with Image.open(tmp_path / "episode.gif") as gif:
        assert gif.n_frames > 10 and gif.size == (640, 400)
