"""The demand stage: observation → remaining-batch estimate per slot, in one batched predictor call.

Every consumer of demand estimates goes through :class:`Demand` — the predictive allocators (LARA, FM-slack),
the MAT policy, MAT's training rollouts and the observation wrappers — so there is one way to stack
observations, one way to turn them into a :class:`~mara_agents.predictors.base.PredictorQuery`, and one memo.

Everything is read from the observation contract (``mara_env/features.py``): ``tasks`` (K, F),
``history`` (K, H_max), ``history_len`` (K,) and ``budget`` (K,), the available time B per slot.  A slot's cap
is its remaining *generation cap* 2·B − s: every bank curve is recorded to twice its available time (paper
Appendix A.2, "each task runs to twice its scheduling budget"), s batches are done, and an estimate may
not look past the recorded curve.  The cap deliberately reaches beyond the deadline (at most B − s more
batches can still run): a task whose forecast never meets ε then reads as needing more than it has left,
instead of exactly the steps left, which would make "just fits" and "never gets there" identical.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from mara_agents.predictors.base import Predictor, PredictorQuery
from mara_agents.predictors.memo import StepMemo
from mara_env.features import TASK_FEATURE_INDEX

PREDICTORS = ("fm", "wls")
GENERATION_CAP_FACTOR = 2  # curves are recorded to twice the available time (curves/README.md)
STACKED_KEYS = ("tasks", "history", "history_len", "budget", "global")  # what predictors and MAT tokens read
NODE_KEYS = ("nodes", "slot_nodes")  # present with the env's node options; MAT's node tokens read them


def stack_observations(observations: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays a batched consumer reads from N observations, stacked along a new first axis (the node
    entries too when the observations carry them)."""
    keys = STACKED_KEYS + tuple(key for key in NODE_KEYS if key in observations[0])
    return {key: np.stack([observation[key] for observation in observations]) for key in keys}


def observation_query(observation: Mapping[str, np.ndarray]) -> PredictorQuery:
    """One :class:`PredictorQuery` row per slot of an observation with any leading batch axes."""
    tasks = np.asarray(observation["tasks"])
    features = tasks.reshape(-1, tasks.shape[-1]).astype(np.float64)
    present = features[:, TASK_FEATURE_INDEX["present"]] > 0
    budget = np.asarray(observation["budget"], dtype=np.float64).reshape(-1)
    length = np.where(present, np.asarray(observation["history_len"]).reshape(-1), 0).astype(np.int64)
    cap = np.where(present, np.maximum(GENERATION_CAP_FACTOR * budget - length, 0.0), 0.0)
    history = np.asarray(observation["history"])
    return PredictorQuery(
        history=history.reshape(-1, history.shape[-1]),
        length=length,
        batch_size=np.rint(np.exp(features[:, TASK_FEATURE_INDEX["log_batch_size"]])),  # an integer, stored as a log
        lr=np.exp(features[:, TASK_FEATURE_INDEX["log_lr"]]),
        eps=features[:, TASK_FEATURE_INDEX["target_loss"]],
        cap=cap)


def predict_forecast(observation: Mapping[str, np.ndarray],
                     predictor: Predictor) -> tuple[np.ndarray, np.ndarray | None]:
    """(remaining, samples) in one predictor call: the remaining-batch estimates shaped like ``history_len``
    (…, K) float32, and, when the predictor samples (FM), the per-sample estimates (…, K, S) float64 with NaN
    rows for slots it did not predict for (empty or in warm-up), else ``None``."""
    prediction = predictor.predict(observation_query(observation))
    shape = np.shape(observation["history_len"])
    remaining = prediction.remaining.astype(np.float32).reshape(shape)
    samples = None if prediction.samples is None else prediction.samples.reshape(*shape, -1)
    return remaining, samples


def predict_remaining(observation: Mapping[str, np.ndarray], predictor: Predictor) -> np.ndarray:
    """Remaining-batch estimates shaped like ``history_len`` (…, K), float32, in one predictor call."""
    return predict_forecast(observation, predictor)[0]


class Demand:
    """A frozen predictor behind a one-step memo (:mod:`~mara_agents.predictors.memo`: a task that was not
    served keeps last step's estimate), answering single or stacked observations."""

    def __init__(self, predictor: Predictor, name: str = "custom"):
        self.name = name
        self.predictor = predictor
        self.memo = StepMemo(predictor)

    def __call__(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        """Estimates shaped like ``observation["history_len"]`` (…, K), float32; 0 for empty slots."""
        return predict_remaining(observation, self.memo)

    def forecast(self, observation: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """(estimates (…, K), per-sample estimates (…, K, S) or ``None``), see :func:`predict_forecast`."""
        return predict_forecast(observation, self.memo)

    def stacked(self, observations: Sequence[Mapping[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(stacked observations, their (N, K) estimates) for N observations, in one predictor call."""
        stacked = stack_observations(observations)
        return stacked, self(stacked)


def make_predictor(name: str, fm_checkpoint: str | os.PathLike[str] = "", device: str = "cpu",
                   verify: bool = True) -> Predictor:
    """A frozen stage-I predictor by name: ``wls`` or ``fm`` (the shipped checkpoint unless a path is given;
    ``verify=False`` accepts one without a manifest)."""
    if name == "wls":
        from mara_agents.predictors.wls import WLSPredictor
        return WLSPredictor()
    if name == "fm":
        from mara_agents.predictors.fm.predictor import DEFAULT_CHECKPOINT, load_predictor
        return load_predictor(fm_checkpoint or DEFAULT_CHECKPOINT, device=device, verify=verify)
    raise ValueError(f"unknown predictor {name!r}; choose one of {PREDICTORS}")


def make_demand(name: str, fm_checkpoint: str | os.PathLike[str] = "", device: str = "cpu",
                verify: bool = True) -> Demand:
    """The demand stage over the named predictor (see :func:`make_predictor`)."""
    return Demand(make_predictor(name, fm_checkpoint, device, verify), name)


def as_demand(source: Demand | Predictor) -> Demand:
    """``source`` itself when it is a :class:`Demand`, else a new demand stage over that predictor."""
    return source if isinstance(source, Demand) else Demand(source)
