"""MARA inside Ray Tune: ``MARAScheduler`` decides which trials train, pause or stop on a node budget.

Eight trials of two kinds of model — least squares in NumPy and an MLP on Fashion-MNIST in PyTorch — each with
a target loss (on the running mean of its reported losses) and a deadline in training iterations.  Two nodes
are shared among them: the scheduler trains at most two trials at once, pauses the others (Tune checkpoints
them, and they resume exactly where they stopped) and stops each trial once it meets its target or its
deadline.  The same trials are run with the FIFO, EDF and FM-slack allocators and a table compares them.

    python examples/tune_scheduler.py [--quick]

Needs the ``ray`` extra and Debian's ``dataset-fashion-mnist``: ``make system-packages`` installs it (``make
install`` installs only Python packages).  ``--quick`` runs four trials with looser targets.  The Tune section of
``docs/jobs.md`` is a smaller program that needs no data.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")  # apt-get install dataset-fashion-mnist
POLICIES = ("fifo", "edf", "slack-fm")
# (kind, seed, target, deadline): the trials' grid
TRIALS = [("lsq", 0, 12.0, 40), ("mlp", 1, 1.8, 50), ("lsq", 2, 12.0, 25), ("mlp", 3, 1.8, 35),
          ("lsq", 4, 10.0, 60), ("mlp", 5, 1.9, 30), ("lsq", 6, 12.0, 30), ("mlp", 7, 1.8, 60)]
QUICK_TRIALS = [("lsq", 0, 16.0, 20), ("mlp", 1, 2.05, 25), ("lsq", 4, 16.0, 12), ("mlp", 3, 2.05, 15)]


def fashion_mnist(n=6000):
    import torch

    with gzip.open(FASHION_MNIST / "train-images-idx3-ubyte.gz") as handle:
        images = np.frombuffer(handle.read(), np.uint8, offset=16).reshape(-1, 784)[:n]
    with gzip.open(FASHION_MNIST / "train-labels-idx1-ubyte.gz") as handle:
        labels = np.frombuffer(handle.read(), np.uint8, offset=8)[:n]
    return torch.tensor(images, dtype=torch.float32) / 255.0, torch.tensor(labels, dtype=torch.long)


def make_trainable():
    """The Tune trainable (built in a function so that Ray ships this script's code to the workers)."""
    from ray import tune

    loaded = {}  # per worker process: Fashion-MNIST, read once however many trials the process trains

    class Trainable(tune.Trainable):
        """One training run of either kind; its checkpoint holds everything it needs to resume exactly."""

        def setup(self, config):
            self.kind, self.rng = config["kind"], np.random.default_rng(config["seed"])
            if self.kind == "lsq":
                self.x = self.rng.normal(size=(2048, 16))
                self.y = self.x @ self.rng.normal(size=16) + 0.3 * self.rng.normal(size=2048)
                self.model = np.zeros(16)
            else:
                import torch
                from torch import nn

                torch.manual_seed(config["seed"])
                if not loaded:
                    loaded["data"] = fashion_mnist()
                self.x, self.y = loaded["data"]
                self.model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config["lr"])

        def step(self):
            if self.kind == "lsq":
                rows = self.rng.integers(0, len(self.y), 32)
                error = self.x[rows] @ self.model - self.y[rows]
                self.model -= 0.05 * self.x[rows].T @ error / 32
                return {"loss": float(np.mean(error**2))}
            from torch import nn

            rows = self.rng.integers(0, len(self.y), 64)
            loss = nn.functional.cross_entropy(self.model(self.x[rows]), self.y[rows])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return {"loss": loss.item()}

        def reset_config(self, new_config):
            """Reuse this actor for another trial (Tune's ``reuse_actors``): no new process per resumed trial."""
            self.setup(new_config)
            return True

        def save_checkpoint(self, folder):
            optimizer = getattr(self, "optimizer", None)
            with open(os.path.join(folder, "state.pkl"), "wb") as handle:
                pickle.dump((self.model, optimizer and optimizer.state_dict(), self.rng), handle)

        def load_checkpoint(self, folder):
            with open(os.path.join(folder, "state.pkl"), "rb") as handle:
                model, optimizer, self.rng = pickle.load(handle)
            if self.kind == "lsq":
                self.model = model
            else:
                self.model.load_state_dict(model.state_dict())
                self.optimizer.load_state_dict(optimizer)

    return Trainable


def run(policy: str, trials: list[tuple[str, int, float, int]], nodes: int, storage: Path) -> tuple[dict, float]:
    """Tune the trials under ``MARAScheduler(policy)``; returns the scheduler's outcome per trial and the wall time."""
    from ray import tune

    from mara_agents.live.tune import MARAScheduler

    by_seed = {seed: (kind, target, deadline) for kind, seed, target, deadline in trials}
    space = {"seed": tune.grid_search(list(by_seed)), "lr": 1e-3,
             "kind": tune.sample_from(lambda config: by_seed[config["seed"]][0]),
             "target": tune.sample_from(lambda config: by_seed[config["seed"]][1]),
             "deadline": tune.sample_from(lambda config: by_seed[config["seed"]][2]),
             "batch_size": tune.sample_from(lambda config: 32 if by_seed[config["seed"]][0] == "lsq" else 64)}
    scheduler = MARAScheduler(policy, nodes=nodes)
    began = time.perf_counter()
    tune.Tuner(tune.with_resources(make_trainable(), {"cpu": 1}), param_space=space,
                         tune_config=tune.TuneConfig(scheduler=scheduler, metric="loss", mode="min", reuse_actors=True),
                         run_config=tune.RunConfig(storage_path=str(storage / policy), verbose=0)).fit()
    outcomes = {trial.config["seed"]: (scheduler.outcomes()[trial.trial_id], scheduler.iterations[trial.trial_id])
                for trial in scheduler.trials}
    return {"outcomes": outcomes, "pauses": scheduler.decisions["PAUSE"]}, time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="four trials with looser targets")
    parser.add_argument("--nodes", type=int, default=2, help="trials that train at once")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes must be at least 1, got {args.nodes}")
    if not FASHION_MNIST.is_dir():
        print(f"error: missing data: {FASHION_MNIST}; 'make system-packages' installs it (Debian's "
              f"dataset-fashion-mnist; 'make install' does not)", file=sys.stderr)
        return 2
    import ray

    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no per-result CSV/JSON/TensorBoard files
    trials = QUICK_TRIALS if args.quick else TRIALS
    storage = Path(tempfile.mkdtemp(prefix="mara-tune-"))
    ray.init(num_cpus=args.nodes, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ship this script's code to the workers
    rows = []
    try:
        for policy in POLICIES:
            rows.append((policy, *run(policy, trials, args.nodes, storage)))
    finally:
        ray.shutdown()
    print(f"{len(trials)} Tune trials of 2 kinds on {args.nodes} nodes\n")
    print(f"{'policy':<10}{'succeeded':>10}{'expired':>9}{'pauses':>8}{'wall s':>8}")
    for policy, done, wall in rows:
        succeeded = sum(outcome == "succeeded" for outcome, _ in done["outcomes"].values())
        print(f"{policy:<10}{succeeded:>7}/{len(trials):<2}{len(trials) - succeeded:>9}{done['pauses']:>8}{wall:>8.1f}")
    print("\nper trial (iterations it trained, and its outcome):")
    print(f"{'trial':<10}{'target':>8}{'deadline':>9}" + "".join(f"{policy:>16}" for policy in POLICIES))
    for kind, seed, target, deadline in trials:
        cells = [f"{done['outcomes'][seed][1]} {done['outcomes'][seed][0]}" for _, done, _ in rows]
        print(f"{kind}-{seed:<6}{target:>8g}{deadline:>9}" + "".join(f"{cell:>16}" for cell in cells))
    print(storage)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
