"""Bring your own jobs: MARA schedules your own training jobs, live on Ray.

Twelve jobs of four kinds, written here as a user would write them — no ``curves`` recipes:

* least squares on synthetic data, in NumPy;
* an MLP on Fashion-MNIST (read from Debian's ``dataset-fashion-mnist``), in PyTorch;
* a small CNN on the same data;
* a character model on a text every Debian system ships (the GPL-3 licence text).

They arrive over time on two nodes, each with a target loss and a budget of steps.  The same arrivals are
scheduled with FIFO, EDF and FM-slack, and a table compares how many jobs met their target.

    python examples/own_jobs.py [--quick] [--nodes 2] [--out DIR]

Needs the ``ray`` extra and Debian's ``dataset-fashion-mnist``: ``make system-packages`` installs the Debian
packages (``make install`` installs only Python packages).  ``--quick`` runs the first eight jobs.  ``python -m mara_agents.live.jobs run examples/own_jobs.py``
schedules the same jobs (``JOBS``) from the command line, and ``python -m mara_agents.live.jobs forecast
examples/own_jobs.py`` scores the FM and WLS forecasts on them.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mara_agents.live.jobs import Job, schedule

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")  # apt-get install dataset-fashion-mnist
TEXT = Path("/usr/share/common-licenses/GPL-3")             # in every Debian system (base-files)
POLICIES = ("fifo", "edf", "slack-fm")


# ---------------------------------------------------------------- kind 1: least squares in NumPy
def least_squares_setup(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2048, 16))
    y = x @ rng.normal(size=16) + 0.3 * rng.normal(size=2048)
    return {"x": x, "y": y, "w": np.zeros(16), "rng": rng}


def least_squares_step(state, lr=0.05, batch=32):
    rows = state["rng"].integers(0, len(state["y"]), batch)
    x, y = state["x"][rows], state["y"][rows]
    error = x @ state["w"] - y
    state["w"] -= lr * x.T @ error / batch
    return state, float(np.mean(error**2))


# ---------------------------------------------------------------- kinds 2 and 3: Fashion-MNIST in PyTorch
def fashion_mnist(n=12000):
    """The first n training images (as 1×28×28 floats in [0, 1]) and labels."""
    import torch

    with gzip.open(FASHION_MNIST / "train-images-idx3-ubyte.gz") as handle:
        images = np.frombuffer(handle.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n]
    with gzip.open(FASHION_MNIST / "train-labels-idx1-ubyte.gz") as handle:
        labels = np.frombuffer(handle.read(), np.uint8, offset=8)[:n]
    return torch.tensor(images, dtype=torch.float32) / 255.0, torch.tensor(labels, dtype=torch.long)


def mlp_setup(seed, data, lr=1e-3):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    return {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=lr), "rng": np.random.default_rng(seed)}


def cnn_setup(seed, data, lr=2e-3):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 8, 5, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 5, stride=2), nn.ReLU(),
                          nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    return {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=lr), "rng": np.random.default_rng(seed)}


def classifier_step(state, data, batch=64):
    from torch import nn

    images, labels = data
    rows = state["rng"].integers(0, len(labels), batch)
    loss = nn.functional.cross_entropy(state["model"](images[rows]), labels[rows])
    state["opt"].zero_grad()
    loss.backward()
    state["opt"].step()
    return state, loss.item()


# ---------------------------------------------------------------- kind 4: a character model on a text
CONTEXT = 8


def characters():
    """The text as integer codes of its characters, and the alphabet's size."""
    import torch

    text = TEXT.read_text(encoding="utf-8")
    alphabet = sorted(set(text))
    codes = torch.tensor([alphabet.index(ch) for ch in text], dtype=torch.long)
    return codes, len(alphabet)


def char_setup(seed, data, lr=3e-3):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    _, size = data
    model = nn.Sequential(nn.Embedding(size, 16), nn.Flatten(), nn.Linear(16 * CONTEXT, 128), nn.ReLU(),
                          nn.Linear(128, size))
    return {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=lr), "rng": np.random.default_rng(seed)}


def char_step(state, data, batch=64):
    import torch
    from torch import nn

    codes, _ = data
    starts = torch.as_tensor(state["rng"].integers(0, len(codes) - CONTEXT - 1, batch))
    windows = codes[starts[:, None] + torch.arange(CONTEXT + 1)]
    loss = nn.functional.cross_entropy(state["model"](windows[:, :-1]), windows[:, -1])
    state["opt"].zero_grad()
    loss.backward()
    state["opt"].step()
    return state, loss.item()


# ---------------------------------------------------------------- the jobs
def make_jobs(quick: bool = False) -> list[Job]:
    """The jobs with their arrivals, targets (on the running mean of the losses) and budgets in steps."""
    kinds = {
        "lsq": dict(setup=least_squares_setup, step=least_squares_step, batch_size=32, lr=0.05, target=12.0),
        "mlp": dict(setup=mlp_setup, step=classifier_step, data=fashion_mnist, batch_size=64, lr=1e-3, target=1.8),
        "cnn": dict(setup=cnn_setup, step=classifier_step, data=fashion_mnist, batch_size=64, lr=2e-3, target=1.8),
        "char": dict(setup=char_setup, step=char_step, data=characters, batch_size=64, lr=3e-3, target=3.45),
    }
    plan = [("lsq", 0, 40), ("mlp", 0, 60), ("char", 2, 70), ("cnn", 4, 60), ("lsq", 6, 30), ("mlp", 8, 50),
            ("char", 10, 60), ("cnn", 12, 70), ("lsq", 14, 40), ("mlp", 16, 40), ("char", 18, 80), ("cnn", 20, 50)]
    if quick:
        plan = plan[:8]
    return [Job(f"{kind}-{number}", seed=number, arrival=arrival, budget=steps, **kinds[kind])
            for number, (kind, arrival, steps) in enumerate(plan)]


JOBS = make_jobs()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first eight jobs only")
    parser.add_argument("--nodes", type=int, default=2, help="M, nodes the jobs share")
    parser.add_argument("--out", default=None, help="output folder (default: a new scratch folder)")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes must be at least 1, got {args.nodes}")
    missing = [str(path) for path in (FASHION_MNIST, TEXT) if not path.exists()]
    if missing:
        print(f"error: missing data: {', '.join(missing)}; 'make system-packages' installs it (Debian's "
              f"dataset-fashion-mnist and base-files; 'make install' does not)", file=sys.stderr)
        return 2
    import ray

    out = Path(args.out or tempfile.mkdtemp(prefix="mara-own-jobs-"))
    jobs = make_jobs(args.quick)
    ray.init(num_cpus=max(args.nodes, 2), include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        for policy in POLICIES:
            began = time.perf_counter()
            result = schedule(jobs, policy=policy, nodes=args.nodes, out=out / policy)
            rows.append((policy, result, time.perf_counter() - began))
    finally:
        ray.shutdown()
    print(f"{len(jobs)} jobs of 4 kinds on {args.nodes} nodes, the same arrivals for every policy\n")
    print(f"{'policy':<10}{'succeeded':>10}{'expired':>9}{'failed':>8}{'steps':>7}{'util %':>8}"
          f"{'overhead ms/step':>18}{'replay':>10}{'wall s':>8}")
    for policy, result, wall in rows:
        counts = {name: sum(job.outcome == name for job in result.jobs) for name in ("succeeded", "expired", "failed")}
        overhead = np.median([s["dispatch_s"] - s["compute_max_s"] for s in result.steps]) * 1e3
        print(f"{policy:<10}{counts['succeeded']:>7}/{len(jobs):<2}{counts['expired']:>9}{counts['failed']:>8}"
              f"{len(result.steps):>7}{100 * result.metrics['utilisation']:>8.1f}{overhead:>18.1f}"
              f"{'same' if not result.mismatches else 'DIFFERS':>10}{wall:>8.1f}")
    print("\nper job (step at which it met its target, or its outcome):")
    print(f"{'job':<10}{'arrival':>8}{'budget':>8}" + "".join(f"{policy:>12}" for policy in POLICIES))
    for k, job in enumerate(rows[0][1].jobs):
        cells = []
        for _, result, _ in rows:
            row = result.jobs[k]
            cells.append(f"@{row.finished_at}" if row.outcome == "succeeded" else row.outcome)
        print(f"{job.name:<10}{job.arrival:>8}{job.budget:>8}" + "".join(f"{cell:>12}" for cell in cells))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
