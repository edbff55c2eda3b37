"""sb3-contrib MaskablePPO on ``gym.make("MARA-v0")``: an off-the-shelf trainer, no wrapper.

Two env options make it work out of the box: ``observation="flat"`` (one float32 vector, so the stock
``MlpPolicy`` applies; the mask comes from the env's ``action_masks()``) and ``conflicts="repair"``
(MaskablePPO's mask is per node, so two nodes may pick the same slot; the env moves the later pick to the
next free task instead of idling it, and every action is a matching).

    python examples/sb3_maskable_ppo.py --steps 50000 --save /tmp/mara_maskable.zip
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np

import mara_env  # noqa: F401  (registers MARA-v0)

ENV_OPTIONS = {"observation": "flat", "conflicts": "repair"}


def train(steps: int, n_envs: int = 4, seed: int = 0, n_steps: int = 512, **env_kwargs: Any) -> Any:
    """A MaskablePPO model trained for ``steps`` environment steps on random episodes."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)  # tiny networks: more threads only contend for the cores
    envs = make_vec_env("MARA-v0", n_envs=n_envs, seed=seed, env_kwargs={**ENV_OPTIONS, **env_kwargs})
    model = MaskablePPO("MlpPolicy", envs, n_steps=n_steps, batch_size=min(256, n_steps * n_envs),
                        gamma=0.99, seed=seed, verbose=0)
    model.learn(total_timesteps=steps)
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


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000, help="training environment steps")
    parser.add_argument("--n-envs", type=int, default=4, help="parallel training envs")
    parser.add_argument("--n-steps", type=int, default=512, help="rollout length per env and update")
    parser.add_argument("--episodes", type=int, default=5, help="evaluation episodes")
    parser.add_argument("--bank", default=None, help="curve bank directory (default: the shipped bank)")
    parser.add_argument("--workload", default=None, help="evaluate on this workload file's episodes")
    parser.add_argument("--arrival-window", type=int, default=500, help="T, steps during which tasks arrive")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="write the trained model here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.episodes < 1:
        parser.error("--steps and --episodes must be positive")
    env_kwargs: dict[str, Any] = {"arrival_window": args.arrival_window}
    if args.bank:
        env_kwargs["bank"] = args.bank
    model = train(args.steps, args.n_envs, args.seed, args.n_steps, **env_kwargs)
    if args.save:
        model.save(args.save)
    if args.workload:
        env_kwargs["workload"] = args.workload
    rows = evaluate(model, args.episodes, **env_kwargs)
    rates = [row["success_rate"] for row in rows]
    print(f"MaskablePPO, {args.steps} steps: success rate {100 * np.nanmean(rates):.1f} % over {len(rows)} "
          f"episodes; conflicts {sum(r['conflicts'] for r in rows):.0f}, repaired picks "
          f"{sum(r['repaired'] for r in rows):.0f}")
    return rows


if __name__ == "__main__":
    main()
