"""Throughput of the environments: ``python -m benchmarks.env_bench [--bank DIR] [--steps N] [--sizes …] [--out F]``.

Prints one line per figure:

* the Gymnasium env (``gym.make``) under a FIFO rule and under random legal matchings, steps/s;
* the PettingZoo AEC env under the same two rules, node turns/s;
* the settings other RL libraries use (``docs/environment.md``), with the precomputed matching below: the gym
  env with ``observation="flat", conflicts="repair"`` (sb3-contrib, SuperSuit) and the AEC env with
  ``observation="rllib"`` (RLlib);
* the native vector env (``gym.make_vec(..., vectorization_mode="vector_entry_point")``) at N = 1, 4, 16, 64
  and 256, env steps/s, with precomputed actions (node i serves slot i + 1 — a matching, so nothing but the
  simulator is timed), the same with ``copy=False`` (the history buffer is not copied), and with the FIFO
  rule computed on the batched observation every step;
* the vector env in the ``flat`` and ``rllib`` formats (and ``flat`` with ``conflicts="repair"``, the
  sb3-contrib setting, and ``flat`` with the node options :data:`NODE_SPEEDS` and ``switch_cost=2``) at every N,
  with the precomputed actions;
* ``MARA-Forecast-v0`` (``mara_agents``' forecast env, found through Gymnasium's registry so that this package
  still imports nothing from ``mara_agents``) as the native vector env in the ``flat`` format with the shipped
  FM predictor at every N, over :data:`FORECAST_STEPS` steps after :data:`FORECAST_WARMUP` untimed ones, twice,
  each in a process of its own: with an empty answer store (*cold*: FM computes every new row) and with the
  store the first run left (*warm*: the same seeds again, as any replayed run), and the warm rate as a share of
  the flat vector env's in this run (the line says so when ``mara_agents`` or torch is missing);
* the ratio of the vector env at N = 64 to the single env with the same precomputed actions, in this run;
  each vector figure times at least three arrival windows of steps per sub-env (1,500 by default), so every
  sub-env plays whole episodes, resets included, as the single env does over its ``--steps``: an episode's
  first steps hold fewer tasks and are cheaper than the rest;
* the process's peak resident memory.

Rates are per wall-clock second and per CPU second of this process; on a shared machine the second does not
depend on what else runs. ``--out`` also writes the lines to a file; a path that cannot be written is refused
with one line and exit status 2 before anything runs. The rules live here, in NumPy, so the
environment package needs nothing from the agents package.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

import mara_env
from mara_common.atomic import atomic_write_text
from mara_common.checks import argparse_type, existing_dir, integer, writable_file
from mara_common.cli import Parser
from mara_env.config import MARAConfig
from mara_env.features import TASK_FEATURE_INDEX

_PRESENT = TASK_FEATURE_INDEX["present"]
_REMAINING = TASK_FEATURE_INDEX["remaining_time"]
VECTOR_SIZES = (1, 4, 16, 64, 256)
FORECAST_ID = "mara_agents:MARA-Forecast-v0"
FORECAST_WARMUP, FORECAST_STEPS = 20, 100
NODE_SPEEDS = (1, 1, 1, 2, 2, 2, 4)  # the node-options figure: mixed speeds and a setup of 2 steps
# The vector env's other observation formats, timed with the precomputed matching.
FORMATS = (("flat, precomputed", {"observation": "flat"}),
           ("flat+repair, precomputed", {"observation": "flat", "conflicts": "repair"}),
           ("rllib, precomputed", {"observation": "rllib"}),
           ("flat, node options, precomputed", {"observation": "flat", "node_speeds": NODE_SPEEDS, "switch_cost": 2}))

Rule = Callable[[dict[str, np.ndarray]], np.ndarray]


def fifo_picks(observation: dict[str, np.ndarray]) -> np.ndarray:
    """FIFO on a batched observation: node i serves the i-th earliest-arrived active task (ties: lower slot).

    Elapsed time since arrival is B·(1 − remaining_time); returns (N, M) picks (0 idle, j slot j − 1).
    """
    tasks, budget = observation["tasks"], observation["budget"]
    num_nodes = observation["action_mask"].shape[-2]
    present = tasks[..., _PRESENT] > 0
    elapsed = np.where(present, budget * (1.0 - tasks[..., _REMAINING]), -np.inf)
    order = np.argsort(-elapsed, axis=-1, kind="stable")[..., :num_nodes]
    chosen = np.take_along_axis(present, order, axis=-1)
    picks = np.zeros(present.shape[:-1] + (num_nodes,), dtype=np.int64)
    picks[..., : order.shape[-1]] = np.where(chosen, order + 1, 0)
    return picks


def random_legal_picks(observation: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """A random matching per episode of a batched observation: a random number of distinct occupied slots,
    served by randomly chosen distinct nodes; the other nodes idle. Returns (N, M) picks."""
    occupied = observation["action_mask"][:, 0, 1:].astype(bool)
    n, k = occupied.shape
    m = observation["action_mask"].shape[1]
    order = np.argsort(np.where(occupied, rng.random((n, k)), np.inf), axis=1)  # occupied slots, shuffled
    width = min(m, k)
    serve = np.arange(width)[None, :] < rng.integers(0, np.minimum(occupied.sum(axis=1), m) + 1)[:, None]
    slots = np.zeros((n, m), dtype=np.int64)
    slots[:, :width] = np.where(serve, order[:, :width] + 1, 0)
    return np.take_along_axis(slots, np.argsort(rng.random((n, m)), axis=1), axis=1)  # shuffle the nodes


class Rate:
    """Counts per wall-clock second and per CPU second of this process, timed around a block."""

    def __enter__(self) -> Rate:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def per_second(self, count: int) -> tuple[float, float]:
        """(wall, CPU) rates."""
        return count / self.wall, count / max(self.cpu, 1e-9)

    def text(self, count: int, unit: str) -> str:
        wall, cpu = self.per_second(count)
        return f"{wall:11,.0f} {unit}/s wall, {cpu:11,.0f} {unit}/s CPU"


def single_env(bank: str | None, rule: Rule | None, steps: int, **options: str) -> Rate:
    """``steps`` steps of ``gym.make("MARA-v0", **options)``; ``rule`` maps one observation to an action
    (``None``: the precomputed matching)."""
    env = gym.make("MARA-v0", bank=bank, disable_env_checker=True, **options)
    fixed = np.arange(1, env.unwrapped.config.num_nodes + 1) % (env.unwrapped.config.max_active + 1)
    obs, _ = env.reset(seed=0)
    with Rate() as rate:
        for _ in range(steps):
            action = fixed if rule is None else rule({key: value[None] for key, value in obs.items()})[0]
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
    return rate


def aec_env(bank: str | None, rule: Rule | None, turns: int, **options: str) -> Rate:
    """``turns`` node turns of ``mara_env.env(**options)``; each cycle's joint action comes from ``rule`` on
    node 0's view (``None``: the precomputed matching, which any observation format allows)."""
    env = mara_env.env(bank=bank, **options)
    env.reset(seed=0)
    node_of = {agent: i for i, agent in enumerate(env.possible_agents)}
    done = 0
    joint = np.arange(1, len(env.possible_agents) + 1) % (env.unwrapped.config.max_active + 1)
    with Rate() as rate:
        while done < turns:
            for agent in env.agent_iter():
                obs, _, terminated, truncated, _ = env.last()
                node = node_of[agent]
                if node == 0 and rule is not None:
                    inner = obs["observation"]
                    batched = {**{key: value[None] for key, value in inner.items()},
                               "action_mask": np.broadcast_to(obs["action_mask"], (1, len(env.possible_agents),
                                                                                  obs["action_mask"].size))}
                    joint = rule(batched)[0]
                env.step(None if terminated or truncated else int(joint[node]))
                done += 1
                if done >= turns:
                    break
            else:
                env.reset()
    return rate


def vector_env(bank: str | None, num_envs: int, rule: Rule | None, steps: int, copy: bool = True,
               env_id: str = "MARA-v0", warmup: int = 0, **options: object) -> Rate:
    """``steps`` steps of the native vector env (``num_envs × steps`` env steps) after ``warmup`` untimed ones;
    ``rule`` needs the dict format, ``None`` (the precomputed matching) runs in any."""
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", bank=bank,
                        copy=copy, **options)
    cfg = envs.unwrapped.config
    fixed = np.tile(np.arange(1, cfg.num_nodes + 1) % (cfg.max_active + 1), (num_envs, 1))
    obs, _ = envs.reset(seed=0)
    for _ in range(warmup):
        obs, *_ = envs.step(fixed if rule is None else rule(obs))
    with Rate() as rate:
        for _ in range(steps):
            obs, *_ = envs.step(fixed if rule is None else rule(obs))
    envs.close()
    return rate


def forecast_seconds(bank: str | None, num_envs: int) -> None:
    """Print the wall and CPU seconds of :data:`FORECAST_STEPS` steps of ``MARA-Forecast-v0`` with FM forecasts
    in the flat format (what :func:`forecast_figures` runs in a process of its own)."""
    import torch
    torch.set_num_threads(1)  # as the examples train: one thread per process
    rate = vector_env(bank, num_envs, None, FORECAST_STEPS, env_id=FORECAST_ID, warmup=FORECAST_WARMUP,
                      predictor="fm", observation="flat")
    print(rate.wall, rate.cpu)


def forecast_figures(bank: str | None, num_envs: int) -> tuple[Rate, Rate] | str:
    """The (cold, warm) rates of ``MARA-Forecast-v0`` with FM forecasts, or why there are none.

    Each runs in a new process over the same seeds, with an answer store of its own (``MARA_FM_STORE``): the
    cold one starts from an empty store and writes the answers it computed when it ends; the warm one, like
    any later run, reads them back and computes only what is not there.
    """
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("mara_agents") is None:
        return "not run: needs torch and mara_agents (pip install -e .)"
    where = None if bank is None else str(bank)
    code = f"from benchmarks.env_bench import forecast_seconds; forecast_seconds({where!r}, {num_envs})"
    rates = []
    with tempfile.TemporaryDirectory() as store:
        for _ in range(2):
            child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                                   env={**os.environ, "MARA_FM_STORE": store})
            if child.returncode != 0:
                return "not run: " + (child.stderr.strip().splitlines() or ["the run failed"])[-1]
            rate = Rate()
            rate.wall, rate.cpu = map(float, child.stdout.split()[-2:])
            rates.append(rate)
    return rates[0], rates[1]


def emit_forecast(emit: Callable[[str], None], bank: str | None, num_envs: int, flat_cpu: float) -> None:
    """The forecast env's cold and warm lines, the warm one with its share of the flat vector env's CPU rate
    in this run (the same format, steps and picks, without forecasts)."""
    figures = forecast_figures(bank, num_envs)
    label = f"forecast env N={num_envs:<3}, FM, flat"
    if isinstance(figures, str):
        emit(f"{label}: {figures}")
        return
    count = FORECAST_STEPS * num_envs
    for name, rate in zip(("cold store", "warm store"), figures):
        emit(f"{label}, {name}: {rate.text(count, 'env steps')}")
    emit(f"{label}, warm / flat vector env: {100 * figures[1].per_second(count)[1] / flat_cpu:5.1f} % CPU")


def run(bank: str | None, steps: int, emit: Callable[[str], None], sizes: tuple[int, ...] = VECTOR_SIZES) -> None:
    """Measure every figure and pass each printed line to ``emit``; ``sizes`` are the vector env's N."""
    rng = np.random.default_rng(0)

    def random_rule(obs: dict[str, np.ndarray]) -> np.ndarray:
        return random_legal_picks(obs, rng)

    fixed_single = single_env(bank, None, steps)
    emit(f"gym env, precomputed matching:    {fixed_single.text(steps, 'steps')}")
    emit(f"gym env, FIFO rule:               {single_env(bank, fifo_picks, steps).text(steps, 'steps')}")
    emit(f"gym env, random legal matchings:  {single_env(bank, random_rule, steps).text(steps, 'steps')}")
    turns = steps * 7
    emit(f"AEC env, FIFO rule:               {aec_env(bank, fifo_picks, turns).text(turns, 'node turns')}")
    emit(f"AEC env, random legal matchings:  {aec_env(bank, random_rule, turns).text(turns, 'node turns')}")
    library = single_env(bank, None, steps, observation="flat", conflicts="repair")
    emit(f"gym env, flat+repair, precomputed:{library.text(steps, 'steps')}")
    library = aec_env(bank, None, turns, observation="rllib")
    emit(f"AEC env, rllib, precomputed:      {library.text(turns, 'node turns')}")
    at_64 = {}
    whole_episodes = 3 * MARAConfig().arrival_window
    for num_envs in sizes:
        vector_steps = max(steps // num_envs, whole_episodes)
        count = vector_steps * num_envs
        for label, rule, copy in (("precomputed", None, True), ("precomputed, copy=False", None, False),
                                  ("FIFO rule", fifo_picks, True)):
            rate = vector_env(bank, num_envs, rule, vector_steps, copy)
            emit(f"vector env N={num_envs:<3}, {label + ':':24s} {rate.text(count, 'env steps')}")
            if num_envs == 64 and rule is None:
                at_64[label] = rate.per_second(count)
        for label, options in FORMATS:
            rate = vector_env(bank, num_envs, None, vector_steps, **options)
            emit(f"vector env N={num_envs:<3}, {label + ':':24s} {rate.text(count, 'env steps')}")
            if options == {"observation": "flat"}:
                flat_cpu = rate.per_second(count)[1]
        emit_forecast(emit, bank, num_envs, flat_cpu)
    single_wall, single_cpu = fixed_single.per_second(steps)
    for label, (vector_wall, vector_cpu) in at_64.items():
        emit(f"vector env N=64 / gym env, {label}: {vector_wall / single_wall:5.1f}x wall, "
             f"{vector_cpu / single_cpu:5.1f}x CPU")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    emit(f"peak memory (this process):       {peak:11,.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description="MARA-v0 environment throughput")
    parser.add_argument("--bank", default=None, type=argparse_type(existing_dir),
                        help="curve bank directory (default: the shipped bank)")
    parser.add_argument("--steps", type=argparse_type(integer, None, int, low=1000, high=10**8), default=20000,
                        help="env steps per single-env figure (>= 1000)")
    parser.add_argument("--sizes", default=",".join(map(str, VECTOR_SIZES)),
                        help="comma-separated numbers of episodes N for the vector env")
    parser.add_argument("--out", default=None, type=argparse_type(writable_file),
                        help="also write the figures to this file (checked before the bench runs)")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(size) for size in args.sizes.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or max(sizes) > 65536:
        parser.error(f"--sizes must list integers in 1 … 65536 such as 1,4,16, got {args.sizes!r}")
    lines: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    run(args.bank, args.steps, emit, sizes)
    if args.out:
        atomic_write_text(Path(args.out), "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
