"""Throughput of MAT training: ``python -m benchmarks.mat_bench [--predictors fm,wls] [--modes …] [--out F]``.

For each predictor (FM: MARA; WLS: MARA-WLS) and each rollout vectorisation (``vector_entry_point``: the
native vector env training uses; ``sync``: Gymnasium's ``SyncVectorEnv`` over N single envs, the reference
it replaced), the training recipe (``MATTrainConfig`` defaults: 28 envs × 50 steps per PPO update, the paper's
model, 10 epochs of 4 minibatches) is run for a few PPO iterations after a warm-up, and one line per figure is
printed, in env steps per wall-clock second and per CPU second of this process:

* *collection*: env steps/s while collecting rollouts, with the shares of collection time spent in the
  predictor (demand stage), in the env, and in the rest (MAT decoder and tokens);
* *whole iteration*: env steps/s over collection + GAE + the PPO update, as the training loop runs them.

The vectorisations of one predictor take turns iteration by iteration.  They play the same trajectories and
train the same parameters (``tests/agents/test_rollout_vector.py``), so they do identical work apart from the
env, and a machine that speeds up or slows down during the run affects them alike.

The warm-up (``--warmup`` vector steps, untimed) fills the clusters first: an episode's first steps hold few
tasks and are much cheaper than the rest.  The machine's load averages before and after are printed too, since
other work on a shared machine lowers the wall figures (the CPU figures much less).  No file is written unless
``--out`` is given (the training runs write nothing).  Written as a tool script, not a package module, so
adding it left the evaluation's code fingerprint of ``mara_agents`` unchanged.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from mara_common import checks
from curves.bank import BankError
from mara_common.atomic import atomic_write_text
from mara_agents.play.checkpoints import CheckpointError
from mara_common.cli import run_command
from mara_agents.training.config import MATTrainConfig
from mara_agents.mat.model import MATModel
from mara_agents.training.ppo import ValueNorm, gae, ppo_update
from mara_agents.training.rollout import VECTORIZATION_MODES, VectorRollout
from mara_agents.training.train import flatten
from mara_agents.predictors.demand import PREDICTORS, make_demand


class Stopwatch:
    """Accumulates the wall time spent in the calls it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed(self, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
        return wrapper


class TimedDemand:
    """The rollout's demand stage with its calls timed."""

    def __init__(self, demand: Any, watch: Stopwatch):
        self.call = watch.timed(demand)

    def __call__(self, observation: Any) -> np.ndarray:
        return self.call(observation)


class TimedEnvs:
    """The rollout's vector env with ``step`` and ``reset`` timed (everything else is the env's)."""

    def __init__(self, envs: Any, watch: Stopwatch):
        self.envs = envs
        self.step = watch.timed(envs.step)
        self.reset = watch.timed(envs.reset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.envs, name)


class TimedTraining:
    """One training setup (model, optimiser, rollout in one vectorisation) whose PPO iterations are timed one
    at a time, so several setups can take turns and the machine's drift affects them alike."""

    def __init__(self, config: MATTrainConfig, mode: str, warmup: int):
        torch.manual_seed(config.seed)
        self.config, self.device = config, torch.device(config.device)
        self.model = MATModel(config.hparams()).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.ppo.lr, eps=1e-5)
        self.value_norm = ValueNorm().to(self.device)
        self.sampler = torch.Generator(device=self.device).manual_seed(config.seed)
        self.shuffler = torch.Generator().manual_seed(config.seed + 1)
        demand = make_demand(config.predictor, config.fm_checkpoint, config.device, verify=not config.unverified)
        self.rollout = VectorRollout(config.env, config.num_envs, demand, seed=(config.seed, 0), device=self.device,
                                     vectorization_mode=mode)
        if warmup:
            self.rollout.collect(self.model, self.value_norm, warmup, self.sampler)
        self.predictor, self.env = Stopwatch(), Stopwatch()
        self.rollout.demand = TimedDemand(self.rollout.demand, self.predictor)
        self.rollout.loop.env = TimedEnvs(self.rollout.loop.env, self.env)
        self.totals = dict.fromkeys(("collect_wall", "collect_cpu", "total_wall", "total_cpu", "steps"), 0.0)

    def iteration(self) -> None:
        """One timed PPO iteration: collect a rollout, GAE, the PPO update."""
        settings, totals = self.config.ppo, self.totals
        wall, cpu = time.perf_counter(), time.process_time()
        batch = self.rollout.collect(self.model, self.value_norm, self.config.rollout_steps, self.sampler)
        totals["collect_wall"] += time.perf_counter() - wall
        totals["collect_cpu"] += time.process_time() - cpu
        advantages, returns = gae(batch.rewards, batch.values, batch.dones, batch.last_value, settings.gamma,
                                  settings.gae_lambda)
        ppo_update(self.model, self.optimizer, flatten(batch, advantages, returns), self.value_norm, settings,
                   self.shuffler)
        totals["total_wall"] += time.perf_counter() - wall
        totals["total_cpu"] += time.process_time() - cpu
        totals["steps"] += self.config.rollout_steps * self.config.num_envs

    def lines(self, label: str) -> list[str]:
        """The printed figures: collection and whole iteration, with where the time went."""
        totals, steps = self.totals, self.totals["steps"]
        predictor, env = (watch.seconds / totals["collect_wall"] for watch in (self.predictor, self.env))
        return [f"{label} collection       {steps / totals['collect_wall']:8,.0f} env steps/s wall "
                f"{steps / totals['collect_cpu']:8,.0f} /CPU s   (predictor {predictor:.0%}, env {env:.0%}, "
                f"MAT decoder and tokens {1 - predictor - env:.0%} of collection)",
                f"{label} whole iteration  {steps / totals['total_wall']:8,.0f} env steps/s wall "
                f"{steps / totals['total_cpu']:8,.0f} /CPU s   (PPO update "
                f"{1 - totals['collect_wall'] / totals['total_wall']:.0%} of the iteration)"]


def load_line(when: str) -> str:
    """The machine's 1/5/15-minute load averages."""
    return f"load average {when}: " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def choices(text: str, allowed: Sequence[str], name: str) -> list[str]:
    """A comma-separated list whose items must be in ``allowed``."""
    return list(checks.choices(f"--{name}", [item.strip() for item in text.split(",") if item.strip()], allowed))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mat_bench",
                                     description="Env steps/s of MAT training (collection and whole PPO iteration).")
    parser.add_argument("--predictors", default="fm,wls", help="comma-separated: fm, wls")
    parser.add_argument("--modes", default=",".join(VECTORIZATION_MODES),
                        help="comma-separated rollout vectorisations: vector_entry_point, sync")
    parser.add_argument("--iterations", type=int, default=3, help="timed PPO iterations per figure")
    parser.add_argument("--warmup", type=int, default=300, help="untimed vector steps before timing")
    parser.add_argument("--num-envs", type=int, default=MATTrainConfig.num_envs)
    parser.add_argument("--rollout-steps", type=int, default=MATTrainConfig.rollout_steps)
    parser.add_argument("--threads", type=int, default=MATTrainConfig.threads, help="torch CPU threads")
    parser.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
    parser.add_argument("--bank", default=None, help="curve bank directory (default: the shipped one)")
    parser.add_argument("--fm-checkpoint", default="", help="FM checkpoint ('' = the shipped one)")
    parser.add_argument("--unverified", action="store_true",
                        help="accept an --fm-checkpoint without a manifest to verify it against")
    parser.add_argument("--out", type=checks.argparse_type(checks.writable_file), default=None,
                        help="also write the lines to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (2 with one line on stderr for bad settings)."""
    args = parse_args(argv)
    try:
        predictors = choices(args.predictors, PREDICTORS, "predictors")
        modes = choices(args.modes, VECTORIZATION_MODES, "modes")
        if args.iterations < 1 or args.warmup < 0:
            raise ValueError(f"--iterations must be ≥ 1 and --warmup ≥ 0, got {args.iterations} and {args.warmup}")
        base = MATTrainConfig(num_envs=args.num_envs, rollout_steps=args.rollout_steps, threads=args.threads,
                              device=args.device, fm_checkpoint=args.fm_checkpoint, unverified=args.unverified)
        if args.bank:
            base = dataclasses.replace(base, env=base.env.replace(bank=checks.existing_dir("--bank", args.bank)))
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {args.device!r}: CUDA is not available on this machine")
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    lines = [f"MAT training, {base.num_envs} envs x {base.rollout_steps} steps per PPO update, model dim "
             f"{base.model.dim}, {base.ppo.epochs} epochs x {base.ppo.minibatches} minibatches, {args.threads} torch "
             f"thread(s), device {args.device}; {args.warmup} warm-up vector steps, {args.iterations} timed iterations",
             load_line("before")]
    print("\n".join(lines), flush=True)
    for predictor in predictors:
        config = dataclasses.replace(base, predictor=predictor)
        runs = {mode: TimedTraining(config, mode, args.warmup) for mode in modes}
        for _ in range(args.iterations):
            for run in runs.values():
                run.iteration()
        for mode, run in runs.items():
            for line in run.lines(f"{predictor:<3} {mode:<18}"):
                print(line, flush=True)
                lines.append(line)
    lines.append(load_line("after"))
    print(lines[-1], flush=True)
    if args.out:
        atomic_write_text(args.out, "\n".join(lines) + "\n")
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: 2 with one line for an unusable bank or checkpoint, 130 when interrupted."""
    return run_command(lambda: main(argv), (BankError, CheckpointError, OSError), "no figures written")


if __name__ == "__main__":
    sys.exit(run())
