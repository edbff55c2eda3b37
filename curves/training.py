"""The supervised training loop every classification family shares (paper Appendix A.2 recipe).

Adam with zero weight decay, constant learning rate, mean-reduced cross-entropy and fixed-size complete
mini-batches drawn without replacement from a fresh permutation each epoch (the incomplete tail batch is
dropped).  The initialisation depends only on ``recipe.seed`` and the data order only on ``recipe.data_seed``,
so the two sources of run-to-run variation are controlled separately and a curve can be regenerated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import nn

from curves.recipe import Recipe


def batch_indices(n_items: int, batch_size: int, data_seed: int) -> Iterator[torch.Tensor]:
    """Endless stream of complete mini-batches: concatenated epoch permutations, tail of each epoch dropped."""
    if batch_size > n_items:
        raise ValueError(f"batch size {batch_size} exceeds the dataset size {n_items}")
    gen = torch.Generator().manual_seed(data_seed)
    while True:
        order = torch.randperm(n_items, generator=gen)
        for start in range(0, n_items - batch_size + 1, batch_size):
            yield order[start:start + batch_size]


def make_optimizer(model: nn.Module, lr: float) -> torch.optim.Optimizer:
    """Adam, zero weight decay, no scheduler — the fixed optimiser of every family."""
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=0.0)


def train_classifier(build_model: Callable[[], nn.Module], inputs: torch.Tensor, labels: torch.Tensor, recipe: Recipe,
                     n_batches: int, log: Callable[[float], None], device: str = "cpu") -> None:
    """Train a fresh model for ``n_batches`` steps, passing each batch's mean cross-entropy to ``log``.

    The logged loss is the one the update is computed from (before the step), as a training job would log it.
    """
    torch.manual_seed(recipe.seed)
    model = build_model().to(device)
    model.train()
    optimizer = make_optimizer(model, recipe.lr)
    inputs, labels = inputs.to(device), labels.to(device)
    stream = batch_indices(inputs.shape[0], recipe.batch_size, recipe.data_seed)
    for _ in range(n_batches):
        idx = next(stream).to(device)
        loss = nn.functional.cross_entropy(model(inputs[idx]), labels[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        log(float(loss.detach()))


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (reported in the datasheet)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
