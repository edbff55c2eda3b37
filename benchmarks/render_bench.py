"""Time per ``rgb_array`` frame: ``python -m benchmarks.render_bench [--bank DIR] [--seed S] [--every K]``.

Plays one default ``MARA-v0`` episode (``conflicts="repair"``) under each of two rules, renders every K-th
step and the last one, and prints one line per rule: frames drawn, mean and worst wall-clock milliseconds
per frame, and mean CPU milliseconds (which, on a shared machine, do not depend on what else runs). The
rules are random picks (many short stretches per node) and node i serving slot i + 1 (long stretches,
labelled with their task), so both ends of the chart's cost are timed; a frame late in an episode holds the
most.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import mara_env  # noqa: F401  (registers MARA-v0)


def time_frames(rule: str, seed: int, every: int, bank: str | None) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of each frame rendered over one episode played by ``rule``."""
    env = gym.make("MARA-v0", render_mode="rgb_array", conflicts="repair", **({"bank": bank} if bank else {}))
    num_nodes, choices = env.action_space.nvec.size, int(env.action_space.nvec[0])
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    walls, cpus, step, done = [], [], 0, False
    while not done:
        picks = rng.integers(0, choices, size=num_nodes) if rule == "random" else np.arange(1, num_nodes + 1)
        _, _, terminated, truncated, _ = env.step(picks)
        step, done = step + 1, terminated or truncated
        if step % every == 0 or done:
            wall, cpu = time.perf_counter(), time.process_time()
            env.render()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    env.close()
    return walls, cpus


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bank", default=None, help="curve bank directory (default: the shipped bank)")
    parser.add_argument("--seed", type=int, default=0, help="episode and random-picks seed (>= 0)")
    parser.add_argument("--every", type=int, default=10, help="render every K-th step (>= 1)")
    args = parser.parse_args(argv)
    if args.seed < 0 or args.every < 1:
        parser.error(f"--seed must be >= 0 and --every >= 1, got --seed {args.seed} --every {args.every}")
    try:
        gym.make("MARA-v0", **({"bank": args.bank} if args.bank else {})).close()
    except (ValueError, OSError) as exc:
        parser.error(f"--bank {args.bank}: {exc}")
    for rule in ("random", "fixed"):
        walls, cpus = time_frames(rule, args.seed, args.every, args.bank)
        print(f"rgb_array frame, {rule} picks: {len(walls)} frames, {1000 * np.mean(walls):.1f} ms mean, "
              f"{1000 * np.max(walls):.1f} ms worst, {1000 * np.mean(cpus):.1f} ms CPU mean")


if __name__ == "__main__":
    main()
