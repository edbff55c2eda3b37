"""What an off-the-shelf trainer reaches: MaskablePPO (the ``sb3_maskable_ppo`` recipe) trained for a fixed
budget on random ID episodes, scored on one root of a fixed workload beside random legal matchings and FIFO.

Prints one row per method (mean per-episode success rate over the root's episodes, conflicts, repaired
picks) and the SHA-256 of the workload file used. Not a test: it takes minutes. Each training run logs to
TensorBoard in a new folder under ``--logdir`` (default: the repository's gitignored ``runs/``). Every flag is
checked before anything is trained.

    python examples/measure_maskable_ppo.py --steps 50000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _args  # noqa: E402  (the examples' shared flag checks)
from sb3_maskable_ppo import evaluate, train  # noqa: E402

RANKING = {"observation": "flat", "actions": "scores"}
DEFAULT_WORKLOAD = Path(__file__).resolve().parents[1] / "mara_env" / "workloads" / "id_p0.04.json"


def root_episodes(workload: Path, root: int) -> list[int]:
    """Indices of the workload's episodes that belong to ``root``; ``ValueError`` naming the file when the
    workload is unreadable or has no such root."""
    from mara_env.engine import cached_workload
    from curves.bank import DEFAULT_BANK

    episodes = cached_workload(str(workload), str(DEFAULT_BANK)).episodes
    indices = [i for i, episode in enumerate(episodes) if episode.root == root]
    if not indices:
        raise ValueError(f"--root {root}: workload {workload} has no episodes of that root")
    return indices


def baseline_rows(name: str, workload: Path, indices: list[int]) -> list[dict[str, float]]:
    """Episode metrics of a registered allocator (``random`` or ``fifo``) on the listed episodes."""
    import gymnasium as gym
    from mara_agents import make_policy

    policy = make_policy(name, seed=0) if name == "random" else make_policy(name)
    env = gym.make("MARA-v0", workload=str(workload))
    rows = []
    for index in indices:
        obs, _ = env.reset(options={"episode": index})
        policy.reset()
        while True:
            obs, _, terminated, truncated, info = env.step(policy.act(obs))
            if terminated or truncated:
                rows.append(info["episode_metrics"])
                break
    return rows


def train_ranking(steps: int, seed: int, logdir: Path) -> Any:
    """Plain SB3 PPO on the ranking action (``actions="scores"``): a Gaussian policy over the K slot scores."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    envs = make_vec_env("MARA-v0", n_envs=4, seed=seed, env_kwargs={**RANKING, "arrival_window": 500})
    model = PPO("MlpPolicy", envs, n_steps=512, batch_size=256, seed=seed, verbose=0, tensorboard_log=str(logdir))
    return model.learn(steps, tb_log_name=f"ppo_ranking_seed{seed}")


def summary(name: str, rows: list[dict[str, float]]) -> str:
    rate = 100 * np.mean([row["success_rate"] for row in rows])
    conflicts = sum(row["conflicts"] for row in rows)
    repaired = sum(row.get("repaired", 0.0) for row in rows)
    return f"| {name:<34} | {rate:6.1f} | {conflicts:9.0f} | {repaired:8.0f} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=_args.integer(1, 10**9), default=50_000,
                        help="MaskablePPO training budget (env steps)")
    parser.add_argument("--seeds", type=_args.seed, nargs="+", default=[0, 1, 2], help="training seeds")
    parser.add_argument("--workload", type=_args.existing_file, default=DEFAULT_WORKLOAD, help="fixed workload file")
    parser.add_argument("--root", type=_args.integer(0), default=0, help="which root of the workload to score")
    parser.add_argument("--conflicts", choices=("repair", "idle"), default="repair",
                        help="conflict rule while training and playing (idle: the paper's, for comparison)")
    parser.add_argument("--no-baselines", action="store_true", help="skip the random and FIFO rows")
    parser.add_argument("--ranking", action="store_true",
                        help="train plain PPO on the ranking action (actions='scores') instead of MaskablePPO")
    _args.add_logdir(parser)
    args = parser.parse_args(argv)
    args.workload = Path(args.workload)
    indices = _args.check_before_work(parser, lambda: root_episodes(args.workload, args.root))
    digest = hashlib.sha256(args.workload.read_bytes()).hexdigest()
    print(f"workload {args.workload.name} root {args.root} ({len(indices)} episodes), sha256 {digest}")
    print("| method                             | succ % | conflicts | repaired |")
    print("|------------------------------------|--------|-----------|----------|")
    for name in () if args.no_baselines else ("random", "fifo"):
        print(summary(name, baseline_rows(name, args.workload, indices)), flush=True)
    per_seed = []
    name = "PPO ranking" if args.ranking else f"MaskablePPO {args.conflicts}"
    for seed in args.seeds:
        if args.ranking:
            model = train_ranking(args.steps, seed, args.logdir)
            rows = evaluate(model, indices, masked=False, workload=str(args.workload), **RANKING)
        else:
            model = train(args.steps, seed=seed, logdir=args.logdir, conflicts=args.conflicts)
            rows = evaluate(model, indices, workload=str(args.workload), conflicts=args.conflicts)
        per_seed.append(100 * np.mean([row["success_rate"] for row in rows]))
        print(summary(f"{name} {args.steps}, seed {seed}", rows), flush=True)
    print(f"{name} mean over seeds {args.seeds}: {np.mean(per_seed):.1f} % (std {np.std(per_seed):.1f})")


if __name__ == "__main__":
    main()
