"""Throughput benchmark of the environments: ``python -m mara_env.bench [--bank DIR] [--steps N]``.

Prints one line per figure: Gymnasium env steps/s under FIFO and under random legal matchings (policy time
included, single process), AEC node turns/s under both, ``gymnasium.make_vec`` with 8 envs (sync and
async) in env steps/s, and the process's peak resident memory.  Single-process figures are given per
wall-clock second and per CPU second of this process; on a shared machine the second is the one that
does not depend on what else runs.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import mara_env
from mara_agents.baselines import FIFOPolicy, RandomPolicy
from mara_agents.policy import NodeActor, Policy


class Rate:
    """Counts per wall-clock second and per CPU second of this process, measured around a block."""

    def __enter__(self) -> Rate:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def text(self, count: int, unit: str) -> str:
        return f"{count / self.wall:10,.0f} {unit}/s wall, {count / self.cpu:10,.0f} {unit}/s CPU"


def gym_steps_per_second(make: Callable[[], gym.Env], policy: Policy, steps: int) -> str:
    env = make()
    obs, _ = env.reset(seed=0)
    policy.reset()
    with Rate() as rate:
        for _ in range(steps):
            obs, _, terminated, truncated, _ = env.step(policy.act(obs))
            if terminated or truncated:
                obs, _ = env.reset()
                policy.reset()
    return rate.text(steps, "steps")


def aec_turns_per_second(bank: str | None, policy: Policy, turns: int) -> str:
    env = mara_env.env(bank=bank)
    env.reset(seed=0)
    actor = NodeActor(policy)
    actor.reset()
    done = 0
    with Rate() as rate:
        while done < turns:
            for agent in env.agent_iter():
                obs, _, terminated, truncated, _ = env.last()
                env.step(None if terminated or truncated else actor.act(agent, obs))
                done += 1
                if done >= turns:
                    break
            else:
                env.reset()
                actor.reset()
    return rate.text(turns, "node turns")


def vector_steps_per_second(bank: str | None, mode: str, steps: int, num_envs: int = 8) -> float:
    envs = gym.make_vec("MARA-v0", num_envs=num_envs, vectorization_mode=mode, bank=bank)
    obs, _ = envs.reset(seed=0)
    policy = FIFOPolicy()
    start = time.perf_counter()
    for _ in range(steps):
        actions = np.stack([policy.act({key: value[i] for key, value in obs.items()}) for i in range(num_envs)])
        obs, *_ = envs.step(actions)
    elapsed = time.perf_counter() - start
    envs.close()
    return steps * num_envs / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="MARA-v0 environment throughput")
    parser.add_argument("--bank", default=None, help="curve bank directory (default: the shipped bank)")
    parser.add_argument("--steps", type=int, default=20000, help="environment steps per single-env figure")
    args = parser.parse_args(argv)

    def make() -> gym.Env:
        return gym.make("MARA-v0", bank=args.bank)

    print(f"gym env, FIFO policy:           {gym_steps_per_second(make, FIFOPolicy(), args.steps)}")
    print(f"gym env, random legal actions:  {gym_steps_per_second(make, RandomPolicy(0), args.steps)}")
    turns = args.steps * 7
    print(f"AEC env, FIFO policy:           {aec_turns_per_second(args.bank, FIFOPolicy(), turns)}")
    print(f"AEC env, random legal actions:  {aec_turns_per_second(args.bank, RandomPolicy(0), turns)}")
    for mode in ("sync", "async"):
        rate = vector_steps_per_second(args.bank, mode, args.steps // 8)
        print(f"make_vec x8 ({mode:>5}), FIFO:      {rate:10,.0f} env steps/s wall")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (this process):     {peak:10,.0f} MiB")


if __name__ == "__main__":
    main()
