"""SuperSuit vectorisation: the PettingZoo parallel env as a Stable-Baselines3 vector env, one entry per
node, trained with plain PPO and one shared policy (parameter sharing).

``observation="flat"`` makes every node's observation a float32 ``Box`` (SuperSuit's wrappers and SB3's
``MlpPolicy`` need one; the node's one-hot is part of it), and ``conflicts="repair"`` turns the nodes'
independent picks into a matching, so no mask is needed. ``black_death_v3`` is not needed (all nodes end
together) and must not be used: SuperSuit 3.11's version ends an episode only when it is terminated *and*
truncated, so it would step past the end (where the env raises ``RuntimeError``). Training curves go to
TensorBoard in a new ``supersuit_ppo_N`` folder under ``--logdir`` (default: the repository's gitignored
``runs/``). Every flag is checked before anything is built.

    python examples/supersuit_vec.py --steps 20000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

import mara_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the examples' shared flag checks)

ENV_OPTIONS = {"observation": "flat", "conflicts": "repair"}


def make_vec_env(num_envs: int, **env_kwargs: Any) -> Any:
    """``num_envs`` copies of the parallel env, each node an entry of one SB3 ``VecEnv``."""
    import supersuit as ss

    vec = ss.pettingzoo_env_to_vec_env_v1(mara_env.parallel_env(**ENV_OPTIONS, **env_kwargs))
    return ss.concat_vec_envs_v1(vec, num_envs, num_cpus=0, base_class="stable_baselines3")


def play(model: Any, seed: int, **env_kwargs: Any) -> dict[str, float]:
    """One greedy episode of the shared policy on the parallel env; returns its episode metrics."""
    env = mara_env.parallel_env(**ENV_OPTIONS, **env_kwargs)
    observations, _ = env.reset(seed=seed)
    while env.agents:
        agents = list(observations)
        actions, _ = model.predict(np.stack([observations[a] for a in agents]), deterministic=True)
        observations, _, _, _, infos = env.step(dict(zip(agents, actions.tolist())))
    return infos["node_0"]["episode_metrics"]


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=_args.integer(1, 10**9), default=20_000,
                        help="training steps, counted per node")
    parser.add_argument("--num-envs", type=_args.integer(1, 256), default=2, help="parallel env copies (x 7 nodes)")
    parser.add_argument("--n-steps", type=_args.integer(1, 10**5), default=256,
                        help="rollout length per vector entry")
    parser.add_argument("--episodes", type=_args.integer(1, 10**5), default=3, help="evaluation episodes")
    _args.add_env_flags(parser)
    _args.add_logdir(parser)
    args = parser.parse_args(argv)
    env_kwargs = _args.env_kwargs(args)
    _args.check_before_work(parser, lambda: mara_env.parallel_env(**ENV_OPTIONS, **env_kwargs)).close()

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.utils import set_random_seed

    torch.set_num_threads(1)
    vec = make_vec_env(args.num_envs, **env_kwargs)
    # SuperSuit 3.11's vector env has no seed(), which SB3 calls for PPO(seed=...): seed the envs through
    # their reset (later resets continue each env's generator) and the networks through SB3's helper.
    vec.venv.reset(seed=args.seed)
    set_random_seed(args.seed)
    model = PPO("MlpPolicy", vec, n_steps=args.n_steps, batch_size=args.n_steps * args.num_envs, verbose=0,
                tensorboard_log=str(args.logdir))
    model.learn(total_timesteps=args.steps, tb_log_name="supersuit_ppo")
    print(f"TensorBoard log: {model.logger.dir}")
    vec.close()
    rows = [play(model, seed=1000 + i, **env_kwargs) for i in range(args.episodes)]
    successes, tasks = sum(row["successes"] for row in rows), sum(row["tasks"] for row in rows)
    print(f"PPO via SuperSuit, {args.steps} steps: {successes:.0f} of {tasks:.0f} tasks met over {len(rows)} "
          f"episodes, conflicts {sum(row['conflicts'] for row in rows):.0f}")
    return rows


if __name__ == "__main__":
    main()
