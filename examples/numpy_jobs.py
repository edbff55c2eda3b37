"""A second job file, of kinds unlike the example's: fifteen small jobs that need no download and no Debian data.

Five kinds, three jobs each, written as a user would write them (``python -m mara_agents.live.jobs run
examples/numpy_jobs.py`` schedules them; ``check``, ``forecast`` and ``twin`` read them the same way):

* ``sine``: a PyTorch MLP fitting sin(x) on [−π, π] by Adam, squared error;
* ``logreg``: logistic regression on two Gaussian clouds, in NumPy, by SGD, log loss;
* ``ridge``: ridge regression by SGD on synthetic data, in NumPy, penalised squared error;
* ``kmeans``: mini-batch k-means (Sculley's update) on Gaussian blobs, in NumPy, mean squared distance;
* ``autoencoder``: a PyTorch autoencoder with a 4-unit code on 32-dimensional data of rank 4, squared error.

Each job's data comes from its seed, so a job's losses depend on its seed alone.  Budgets are 30–120 steps;
each target is the job's running-mean loss at 60, 75 or 90 % of its budget when it runs alone (read off
``python -m mara_agents.live.jobs forecast examples/numpy_jobs.py --crossings-only --fraction F``, to three
significant digits), so alone it meets its target in time.
"""

from __future__ import annotations

import numpy as np

from mara_agents.live.jobs import Job


# ---------------------------------------------------------------- sine: a PyTorch MLP fitting sin(x)
def sine_setup(seed, lr=3e-3):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    return {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=lr), "rng": np.random.default_rng(seed)}


def sine_step(state, batch=32):
    import torch

    x = torch.as_tensor(state["rng"].uniform(-np.pi, np.pi, (batch, 1)), dtype=torch.float32)
    loss = torch.mean((state["model"](x) - torch.sin(x)) ** 2)
    state["opt"].zero_grad()
    loss.backward()
    state["opt"].step()
    return state, loss.item()


# ---------------------------------------------------------------- logreg: logistic regression in NumPy
def logreg_setup(seed, n=4096, dim=10):
    rng = np.random.default_rng(seed)
    shift = rng.normal(size=dim) * 0.4
    labels = rng.integers(0, 2, n)
    x = rng.normal(size=(n, dim)) + np.where(labels[:, None] == 1, shift, -shift)
    return {"x": x, "y": labels.astype(float), "w": np.zeros(dim), "b": 0.0, "rng": rng}


def logreg_step(state, lr=0.1, batch=32):
    rows = state["rng"].integers(0, len(state["y"]), batch)
    x, y = state["x"][rows], state["y"][rows]
    p = 1.0 / (1.0 + np.exp(-(x @ state["w"] + state["b"])))
    loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
    state["w"] -= lr * x.T @ (p - y) / batch
    state["b"] -= lr * float(np.mean(p - y))
    return state, float(loss)


# ---------------------------------------------------------------- ridge: ridge regression by SGD in NumPy
def ridge_setup(seed, n=4096, dim=24):
    rng = np.random.default_rng(seed)
    scales = np.linspace(0.3, 2.0, dim)  # unequal feature scales: SGD converges at several speeds
    x = rng.normal(size=(n, dim)) * scales
    y = x @ rng.normal(size=dim) + 0.5 * rng.normal(size=n)
    return {"x": x, "y": y, "w": np.zeros(dim), "rng": rng}


def ridge_step(state, lr=0.01, batch=16, penalty=0.05):
    rows = state["rng"].integers(0, len(state["y"]), batch)
    x, y = state["x"][rows], state["y"][rows]
    error = x @ state["w"] - y
    loss = float(np.mean(error**2) + penalty * state["w"] @ state["w"])
    state["w"] -= lr * (2 * x.T @ error / batch + 2 * penalty * state["w"])
    return state, loss


# ---------------------------------------------------------------- kmeans: mini-batch k-means in NumPy
def kmeans_setup(seed, n=3000, k=8, dim=6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(k, dim))
    x = centres[rng.integers(0, k, n)] + rng.normal(size=(n, dim))
    start = x[rng.choice(n, k, replace=False)].copy()
    return {"x": x, "centres": start, "counts": np.zeros(k), "rng": rng}


def kmeans_step(state, batch=64):
    x = state["x"][state["rng"].integers(0, len(state["x"]), batch)]
    distances = ((x[:, None, :] - state["centres"][None]) ** 2).sum(axis=2)
    nearest = distances.argmin(axis=1)
    loss = float(distances[np.arange(batch), nearest].mean())
    for point, cluster in zip(x, nearest):  # Sculley (2010): each centre moves by a per-centre learning rate
        state["counts"][cluster] += 1
        state["centres"][cluster] += (point - state["centres"][cluster]) / state["counts"][cluster]
    return state, loss


# ---------------------------------------------------------------- autoencoder: PyTorch, rank-4 data
def autoencoder_setup(seed, lr=2e-3, n=2048, dim=32, rank=4):
    import torch
    from torch import nn

    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, dim)) / np.sqrt(rank) + 0.1 * rng.normal(size=(n, dim))
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, rank), nn.Linear(rank, 16), nn.ReLU(),
                          nn.Linear(16, dim))
    return {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=lr),
            "data": torch.as_tensor(data, dtype=torch.float32), "rng": rng}


def autoencoder_step(state, batch=32):
    import torch

    x = state["data"][torch.as_tensor(state["rng"].integers(0, len(state["data"]), batch))]
    loss = torch.mean((state["model"](x) - x) ** 2)
    state["opt"].zero_grad()
    loss.backward()
    state["opt"].step()
    return state, loss.item()


# ---------------------------------------------------------------- the jobs
KINDS = {
    "sine": dict(setup=sine_setup, step=sine_step, batch_size=32, lr=3e-3),
    "logreg": dict(setup=logreg_setup, step=logreg_step, batch_size=32, lr=0.1),
    "ridge": dict(setup=ridge_setup, step=ridge_step, batch_size=16, lr=0.01),
    "kmeans": dict(setup=kmeans_setup, step=kmeans_step, batch_size=64, lr=1.0),
    "autoencoder": dict(setup=autoencoder_setup, step=autoencoder_step, batch_size=32, lr=2e-3),
}
# (kind, arrival, budget, target on the running mean of the losses)
PLAN = [("sine", 0, 60, 0.0906), ("logreg", 0, 40, 0.549), ("ridge", 1, 90, 4.31), ("kmeans", 3, 50, 19.5),
        ("autoencoder", 4, 80, 0.88), ("sine", 6, 100, 0.0828), ("logreg", 8, 70, 0.324), ("ridge", 9, 30, 20.9),
        ("kmeans", 11, 120, 9.08), ("autoencoder", 12, 70, 0.942), ("sine", 14, 120, 0.132),
        ("logreg", 15, 100, 0.379), ("ridge", 17, 60, 7.85), ("kmeans", 18, 80, 10.8), ("autoencoder", 20, 120, 0.587)]

JOBS = [Job(f"{kind}-{number}", seed=number, arrival=arrival, budget=budget, target=target, **KINDS[kind])
        for number, (kind, arrival, budget, target) in enumerate(PLAN)]
