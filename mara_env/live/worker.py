"""What runs inside a Ray worker: one optimisation batch of a live task, from its state in the object store.

This is the only part of the live backend that uses torch, and it imports torch (and ``curves.families``)
inside the functions, so importing :mod:`mara_env.live` never does.  A task's state between batches is a
plain dict — model and optimiser state dicts on the CPU, the global torch RNG state, and the position in the
data order (epoch, batch within the epoch) — so any worker can continue any task: preemption and migration
cost one state transfer.  The batches follow :func:`curves.training.train_classifier` exactly, so a live
task's losses equal the offline curve of the same recipe (with one torch thread, as the generator uses).
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

TaskState = dict[str, Any]


def family_facts(names: list[str], preset: str) -> dict[str, dict[str, Any]]:
    """Per family: the recipe batch sizes, its bank description, the dataset, and whether it can run live.

    Families trained by the shared classifier loop can; a family with its own trainer (the DAgger family
    interleaves environment steps with batches) cannot.
    """
    from curves.catalog import get_family
    from curves.families import Family

    default = Family.__dataclass_fields__["trainer"].default
    out = {}
    for name in names:
        family = get_family(name)
        out[name] = {"batch_sizes": list(family.batch_sizes), "spec": family.spec(preset),
                     "source": family.dataset, "live": family.trainer is default}
    return out


def warm_up(names: list[str], preset: str, data_root: str | None) -> dict[str, dict[str, Any]]:
    """Load the data of every family that can run live (a node does this once, before its first batch);
    returns :func:`family_facts`.  A missing data set raises its install hint here, not mid-episode."""
    from curves.catalog import get_family
    from curves.data.sources import load_source

    facts = family_facts(names, preset)
    for name, fact in facts.items():
        if fact["live"]:
            load_source(get_family(name).source, data_root)
    return facts


@lru_cache(maxsize=64)
def _epoch_order(n_items: int, data_seed: int, epoch: int) -> Any:
    """The data order of one epoch: the ``epoch``-th permutation of the stream of
    :func:`curves.training.batch_indices` (cached per worker process: a task revisits its epoch every batch)."""
    import torch

    generator = torch.Generator().manual_seed(data_seed)
    for _ in range(epoch + 1):
        order = torch.randperm(n_items, generator=generator)
    return order


def _to_cpu(value: Any) -> Any:
    """A state dict with every tensor moved to the CPU (so the object store holds device-free state)."""
    if hasattr(value, "detach"):
        return value.detach().to("cpu")
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_cpu(item) for item in value]
    return value


def train_batch(family: str, preset: str, data_root: str | None, device: str, seed: int, data_seed: int,
                batch_size: int, lr: float, state: TaskState | None) -> tuple[TaskState, dict[str, float]]:
    """Run one optimisation batch of a task; returns (its next state, {loss, compute_s, worker_s}).

    ``state`` is ``None`` before the first batch: the model is then initialised from ``seed``.  ``compute_s``
    times the forward pass, backward pass and optimiser step; ``worker_s`` the whole call, state restore
    and save included.
    """
    began = time.perf_counter()
    import torch
    from torch import nn

    from curves.catalog import get_family
    from curves.data.sources import load_source
    from curves.training import make_optimizer

    torch.set_num_threads(1)
    spec = get_family(family)
    data = load_source(spec.source, data_root)
    if state is None:
        torch.manual_seed(seed)
    model = spec.build(preset, data.info).to(device)
    model.train()
    optimizer = make_optimizer(model, lr)
    epoch, offset = 0, 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        epoch, offset = state["epoch"], state["offset"]
    n_items = data.inputs.shape[0]
    if batch_size > n_items:
        raise ValueError(f"batch size {batch_size} exceeds the dataset size {n_items}")
    idx = _epoch_order(n_items, data_seed, epoch)[offset * batch_size:(offset + 1) * batch_size]
    offset += 1
    if offset == n_items // batch_size:
        epoch, offset = epoch + 1, 0
    inputs, labels = data.inputs[idx].to(device), data.labels[idx].to(device)
    computed = time.perf_counter()
    loss = nn.functional.cross_entropy(model(inputs), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    value = float(loss.detach())
    compute_s = time.perf_counter() - computed
    new_state = {"model": _to_cpu(model.state_dict()), "optimizer": _to_cpu(optimizer.state_dict()),
                 "rng": torch.get_rng_state(), "epoch": epoch, "offset": offset}
    return new_state, {"loss": value, "compute_s": compute_s, "worker_s": time.perf_counter() - began}
