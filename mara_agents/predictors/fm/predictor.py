"""The flow-matching predictor behind the batched interface, and its checkpoint file (paper §4.1).

For each ready task the queried horizon is its remaining generation cap.  One batched pass encodes every
history, N fixed Sobol noise vectors per task are integrated with Euler steps, each sampled target is
inverted to a trajectory L̂(s_0..s_J) (Eqs. 5–6) and decoded to its first ε crossing, and the median over
the samples is the estimate.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mara_agents.play.checkpoints import CheckpointError, atomic_torch_save, read_checkpoint, write_checksum_manifest
from mara_agents.predictors.base import MIN_INVARIANT_BATCH, Prediction, PredictorQuery, capped_remaining, row_parts
from mara_agents.predictors.fm.decode import first_crossing, median_estimate, remaining_batches
from mara_agents.predictors.fm.encoding import static_context
from mara_agents.predictors.fm.history_states import HistoryStates
from mara_agents.predictors.fm.model import FlowMatchingModel, FMHyperParameters
from mara_agents.predictors.fm.sampling import EULER_STEPS, N_SAMPLES, euler_integrate, sobol_gaussian_points
from mara_agents.predictors.fm.target import bin_boundaries, inverse_log_ratio, reconstruct_cumavg

CHECKPOINT_FORMAT = "mara-fm-predictor"
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "checkpoints" / "fm.pt"  # the shipped predictor
CHECKPOINT_VERSION = 1


class FlowMatchingPredictor:
    """A frozen :class:`FlowMatchingModel` that answers :class:`PredictorQuery` batches deterministically."""

    def __init__(self, model: FlowMatchingModel, n_samples: int = N_SAMPLES, euler_steps: int = EULER_STEPS):
        if n_samples < 1 or euler_steps < 1:
            raise ValueError(f"n_samples and euler_steps must be ≥ 1, got {n_samples} and {euler_steps}")
        self.model = model.eval()
        self.n_samples = n_samples
        self.euler_steps = euler_steps
        self._noise: torch.Tensor | None = None
        self._noise_key: str | None = None
        self._time_terms: dict[str, dict[float, torch.Tensor]] = {}  # per device: the velocity's flow-time terms

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live; inputs are moved there."""
        return next(self.model.parameters()).device

    def noise(self, device: torch.device) -> torch.Tensor:
        """The N fixed Sobol noise vectors as a float32 tensor on ``device`` (N, J), converted once."""
        key = str(device)
        if self._noise_key != key:
            points = sobol_gaussian_points(self.n_samples, self.model.hparams.bins)
            self._noise, self._noise_key = torch.as_tensor(points, dtype=torch.float32, device=device), key
        return self._noise

    @torch.inference_mode()
    def sample_targets(self, query: PredictorQuery, history_states: HistoryStates | None = None) -> np.ndarray:
        """Sampled targets y (n, N, J) for every task of ``query`` (all must have ≥ 1 observation);
        ``history_states``: the history states are taken from there, and kept there (see
        :meth:`predict_invariant`), when ``query`` has enough rows for them to be the ones it would compute."""
        device, dtype = self.device, torch.float32
        width = int(query.length.max())
        history = torch.as_tensor(query.history[:, :width], dtype=dtype, device=device)
        length = torch.as_tensor(query.length, dtype=torch.int64, device=device)
        batch_size = torch.as_tensor(query.batch_size, dtype=dtype, device=device)
        static = static_context(batch_size, torch.as_tensor(query.lr, dtype=dtype, device=device),
                                torch.as_tensor(query.current_loss, dtype=dtype, device=device),
                                torch.as_tensor(query.cap * query.batch_size, dtype=dtype, device=device))
        if history_states is not None and device.type == "cpu" and len(query) >= MIN_INVARIANT_BATCH:
            state = history_states(self.model.history_state, history, length, batch_size)
        else:
            state = self.model.history_state(history, length, batch_size)
        context = self.model.join_context(state, static)
        n, bins = len(query), self.model.hparams.bins
        z0 = self.noise(device).repeat(n, 1)                                 # (n·N, J), task-major
        velocity = self.model.sampling_velocity(context, self.n_samples, self._time_terms.setdefault(str(device), {}))
        z1 = euler_integrate(velocity, z0, self.euler_steps)
        return self.model.unstandardise_target(z1).reshape(n, self.n_samples, bins).double().cpu().numpy()

    def predict_invariant(self, query: PredictorQuery, kept: dict[str, Any]) -> Prediction:
        """:meth:`predict` for a caller that computes answers only in batches of at least
        :data:`~mara_agents.predictors.base.MIN_INVARIANT_BATCH` rows, on kernels where they do not depend on the
        batch (the shared answers, :mod:`~mara_agents.predictors.shared`, check both), and keeps ``kept`` for
        every predictor with these weights: the history states of prefixes seen in earlier such calls are
        kept there and reused (:mod:`~mara_agents.predictors.fm.history_states`)."""
        if "history_states" not in kept:
            kept["history_states"] = HistoryStates(self.model.hparams.hidden)
        return self.predict(query, kept["history_states"])

    def predict(self, query: PredictorQuery, history_states: HistoryStates | None = None) -> Prediction:
        """Median first-crossing estimate per task; the cap for tasks that are not ready.

        Besides ``remaining`` it returns the sampled ``trajectories`` with their ``grid`` and the ``samples``:
        each trajectory's own remaining-batch estimate (its first ε crossing, the horizon if it has none),
        clipped to ``[0, cap]`` like ``remaining``, NaN rows for tasks that are not ready.  ``remaining`` is
        the median of the unclipped samples, then clipped (the samples already lie in ``[0, cap]`` up to
        round-off).
        """
        n, bins = len(query), self.model.hparams.bins
        remaining = np.full(n, np.nan)
        trajectories = np.full((n, self.n_samples, bins + 1), np.nan)
        grid = np.full((n, bins + 1), np.nan)
        per_sample = np.full((n, self.n_samples), np.nan)
        # A network pass holds intermediate tensors for every row (the GRU's gates), so a large query
        # runs in parts; a row's answer does not depend on the rows beside it (the shared answers' canary,
        # mara_agents/predictors/shared.py, checks this per predictor).
        for rows in row_parts(np.flatnonzero(query.ready)):
            ready = query.subset(rows, width=int(query.length[rows].max()))
            batch_size = ready.batch_size.astype(np.float64)
            prefix_samples = ready.length * batch_size
            current_loss = ready.current_loss
            boundaries = bin_boundaries(prefix_samples, ready.cap * batch_size, bins)
            averages = inverse_log_ratio(self.sample_targets(ready, history_states), current_loss,
                                         self.model.hparams.delta)
            paths = reconstruct_cumavg(averages, boundaries, current_loss)
            crossing = first_crossing(paths, boundaries, ready.eps.astype(np.float64))
            per_sample[rows] = remaining_batches(crossing, prefix_samples, ready.cap.astype(np.float64), batch_size)
            remaining[rows] = median_estimate(per_sample[rows])
            trajectories[rows] = paths
            grid[rows] = boundaries / batch_size[:, None]
        samples = np.where(query.ready[:, None], capped_remaining(per_sample, query), np.nan)
        return Prediction(remaining=capped_remaining(remaining, query), trajectories=trajectories, grid=grid,
                          samples=samples)


def save_checkpoint(path: str | os.PathLike[str], model: FlowMatchingModel,
                    extra: dict[str, Any] | None = None) -> None:
    """Write the model (weights, standardisation, hyperparameters) atomically: temp file, then rename; and
    a manifest beside it with the checkpoint's SHA-256 (training replaces it with a fuller one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
               "hparams": model.hparams.to_dict(),
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
               "extra": extra or {}}
    atomic_torch_save(payload, path)
    write_checksum_manifest(path, {"format": "mara-fm-manifest", "hparams": model.hparams.to_dict()})


def load_model(path: str | os.PathLike[str] = DEFAULT_CHECKPOINT,
               device: str | torch.device = "cpu", verify: bool = True) -> FlowMatchingModel:
    """Read a checkpoint written by :func:`save_checkpoint`; raises :class:`CheckpointError` naming the file
    (``verify=False``: one without a manifest is accepted)."""
    path = Path(path)
    payload = read_checkpoint(path, kind="FM", fmt=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION,
                              train_hint="python train.py fm", verify=verify)
    try:
        model = FlowMatchingModel(FMHyperParameters(**payload["hparams"]))
        model.load_state_dict(payload["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: checkpoint does not match the FM architecture: {exc}") from exc
    return model.to(device).eval()


def load_predictor(path: str | os.PathLike[str] = DEFAULT_CHECKPOINT, device: str | torch.device = "cpu",
                   n_samples: int = N_SAMPLES, euler_steps: int = EULER_STEPS,
                   verify: bool = True) -> FlowMatchingPredictor:
    """A ready-to-use frozen FM predictor from a checkpoint file (``verify``: see :func:`load_model`)."""
    return FlowMatchingPredictor(load_model(path, device, verify), n_samples=n_samples, euler_steps=euler_steps)
