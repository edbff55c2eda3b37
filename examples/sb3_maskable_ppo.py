"""sb3-contrib MaskablePPO on ``gym.make("MARA-v0")``: an off-the-shelf trainer, no wrapper.

Two env options make it work out of the box: ``observation="flat"`` (one float32 vector, so the stock
``MlpPolicy`` applies; the mask comes from the env's ``action_masks()``) and ``conflicts="repair"``
(MaskablePPO's mask is per node, so two nodes may pick the same slot; the env moves the later pick to the
next free task instead of idling it, and every action is a matching).

Training draws random ID episodes from the bank's train/val curves; the check after training plays greedy
episodes on val curves (or a ``--workload`` file's episodes). ``--out DIR`` writes the model as
``DIR/maskable_ppo_seed{S}.zip`` with a JSON manifest beside it (budget, seed, wall time, env steps/s, library
versions, SHA-256 of the zip, the command); both files are written atomically. The same seed gives the same
model. Training curves go to TensorBoard under ``--logdir`` (default: the repository's gitignored ``runs/``):
``tensorboard --logdir runs``. Every flag is checked before anything is built.

    python examples/sb3_maskable_ppo.py --steps 50000 --seed 0 --out /tmp/mara_maskable
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shlex
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import mara_env  # registers MARA-v0

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the examples' shared flag checks)

ENV_OPTIONS = {"observation": "flat", "conflicts": "repair"}
LIBRARIES = ("stable-baselines3", "sb3-contrib", "torch", "gymnasium", "numpy")


def train(steps: int, n_envs: int = 4, seed: int = 0, n_steps: int = 512, logdir: Path | None = None,
          **env_kwargs: Any) -> Any:
    """A MaskablePPO model trained for ``steps`` environment steps on random episodes; with ``logdir``, its
    training curves go to TensorBoard in a new ``maskable_ppo_seed{S}_N`` folder there."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(1)  # tiny networks: more threads only contend for the cores
    envs = make_vec_env("MARA-v0", n_envs=n_envs, seed=seed, env_kwargs={**ENV_OPTIONS, **env_kwargs})
    model = MaskablePPO("MlpPolicy", envs, n_steps=n_steps, batch_size=min(256, n_steps * n_envs),
                        gamma=0.99, seed=seed, verbose=0, tensorboard_log=None if logdir is None else str(logdir))
    if logdir is None:
        model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves an empty /tmp/SB3-* folder
    model.learn(total_timesteps=steps, tb_log_name=f"maskable_ppo_seed{seed}")
    return model


def evaluate(model: Any, episodes: int | list[int], masked: bool = True,
             **env_kwargs: Any) -> list[dict[str, float]]:
    """Greedy play: the episode metrics of each listed workload episode (or of ``episodes`` random ones),
    plus ``repaired``, the picks the env had to move (an agent that respects the matching has none).
    ``masked=False`` plays a model without action masks (plain PPO, e.g. on ``actions="scores"``)."""
    env = gym.make("MARA-v0", **{**ENV_OPTIONS, **env_kwargs})
    indices = list(range(episodes)) if isinstance(episodes, int) else episodes
    rows = []
    for index in indices:
        options = {"episode": index} if env_kwargs.get("workload") else None
        obs, _ = env.reset(seed=index, options=options)
        repaired = 0
        while True:
            masks = {"action_masks": env.unwrapped.action_masks()} if masked else {}
            action, _ = model.predict(obs, deterministic=True, **masks)
            obs, _, terminated, truncated, info = env.step(action)
            repaired += info.get("repaired", 0)
            if terminated or truncated:
                rows.append({**info["episode_metrics"], "repaired": float(repaired)})
                break
    env.close()
    return rows


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it: readers never see a partial file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def save(model: Any, out: Path, manifest: dict[str, Any]) -> Path:
    """Write ``maskable_ppo_seed{S}.zip`` and its manifest (plus the zip's size and SHA-256) into ``out``."""
    from mara_agents.allocators.third_party import maskable_ppo_name

    buffer = io.BytesIO()
    model.save(buffer)
    data = buffer.getvalue()
    out.mkdir(parents=True, exist_ok=True)
    name = maskable_ppo_name(manifest["seed"])
    zip_path = out / f"{name}.zip"
    write_atomically(zip_path, data)
    manifest = {"checkpoint": zip_path.name, "checkpoint_sha256": hashlib.sha256(data).hexdigest(),
                "checkpoint_bytes": len(data), **manifest}
    write_atomically(out / f"{name}.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return zip_path


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=_args.integer(1, 10**9), default=50_000, help="training environment steps")
    parser.add_argument("--n-envs", type=_args.integer(1, 256), default=4, help="parallel training envs")
    parser.add_argument("--n-steps", type=_args.integer(2, 10**6), default=512,
                        help="rollout length per env and update")
    parser.add_argument("--episodes", type=_args.integer(1, 10**5), default=5, help="check episodes after training")
    _args.add_env_flags(parser)
    parser.add_argument("--workload", type=_args.existing_file, default=None,
                        help="check on this workload file's episodes")
    parser.add_argument("--out", type=_args.writable_dir, default=None,
                        help="write maskable_ppo_seed{S}.zip and its JSON manifest into this directory")
    _args.add_logdir(parser)
    args = parser.parse_args(argv)
    env_kwargs = _args.env_kwargs(args)
    check_kwargs = {**env_kwargs, "workload": args.workload} if args.workload else {**env_kwargs,
                                                                                     "curve_splits": ("val",)}
    check_env = _args.check_before_work(parser, lambda: gym.make("MARA-v0", **ENV_OPTIONS, **check_kwargs))
    if args.workload and args.episodes > len(check_env.unwrapped.engine.workload.episodes):
        parser.error(f"--episodes {args.episodes} exceeds the {len(check_env.unwrapped.engine.workload.episodes)} "
                     f"episodes of --workload {args.workload}")
    check_env.close()
    started = time.perf_counter()
    model = train(args.steps, args.n_envs, args.seed, args.n_steps, args.logdir, **env_kwargs)
    wall = time.perf_counter() - started
    print(f"TensorBoard log: {model.logger.dir}")
    rows = evaluate(model, args.episodes, **check_kwargs)
    rates = [row["success_rate"] for row in rows if not np.isnan(row["success_rate"])]  # NaN: no tasks came
    check = {"episodes": len(rows), "on": args.workload or "random ID episodes, val curves",
             "success_rate": float(np.mean(rates)) if rates else None,
             "conflicts": float(sum(r["conflicts"] for r in rows)), "repaired": float(sum(r["repaired"] for r in rows))}
    rate = f"{100 * check['success_rate']:.1f} %" if rates else "n/a"
    print(f"MaskablePPO, {args.steps} steps, seed {args.seed} ({wall:.0f} s, {model.num_timesteps / wall:.0f} env "
          f"steps/s): check success rate {rate} over {len(rows)} episodes "
          f"({check['on']}); conflicts {check['conflicts']:.0f}, repaired picks {check['repaired']:.0f}")
    if args.out is not None:
        defaults = mara_env.MARAConfig()
        command = shlex.join(["python", "examples/sb3_maskable_ppo.py", *(sys.argv[1:] if argv is None else argv)])
        manifest = {"method": "maskable-ppo", "trainer": "sb3-contrib MaskablePPO, MlpPolicy", "seed": args.seed,
                    "steps": args.steps, "env_steps": int(model.num_timesteps), "n_envs": args.n_envs,
                    "n_steps": args.n_steps, "batch_size": model.batch_size,
                    "env_options": {**ENV_OPTIONS, **env_kwargs, "task_set": defaults.task_set,
                                    "curve_splits": list(defaults.curve_splits)},
                    "wall_s": round(wall, 1), "env_steps_per_s": round(model.num_timesteps / wall, 1),
                    "check": check, "versions": {"python": platform.python_version(),
                                                 **{name: version(name) for name in LIBRARIES}},
                    "command": command}
        print(f"wrote {save(model, args.out, manifest)}")
    return rows


if __name__ == "__main__":
    main()
