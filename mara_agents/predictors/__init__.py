"""Demand predictors: given loss histories, estimate each task's remaining batches.

* :class:`WLSPredictor` — LARA's exponentially weighted power-law fit.
* :class:`FlowMatchingPredictor` — the paper's flow-matching trajectory predictor (load one with
  :func:`load_predictor`; train one with ``python train.py fm`` / :mod:`mara_agents.predictors.train`).
* :func:`make_demand` — the demand stage (:class:`Demand`) every allocator, MAT's training and the wrappers
  call: observation → remaining-batch estimate per slot, one batched call per step.
* :class:`PredictedRemaining` (Gymnasium), :class:`PredictedRemainingVector` (``make_vec``),
  :class:`PredictedRemainingAEC` / :class:`PredictedRemainingParallel` (PettingZoo) and
  :func:`add_predictions` — put a frozen predictor's estimates into the observation as ``predicted_remaining``.
"""

from mara_agents.predictors.base import MIN_OBSERVATIONS, Prediction, Predictor, PredictorQuery
from mara_agents.predictors.demand import Demand, make_demand, make_predictor
from mara_agents.predictors.fm import CheckpointError, FlowMatchingPredictor, load_predictor
from mara_agents.predictors.wls import WLSPredictor
from mara_agents.predictors.wrapper import (
    PredictedRemaining,
    PredictedRemainingAEC,
    PredictedRemainingParallel,
    PredictedRemainingVector,
    add_predictions,
)

__all__ = ["MIN_OBSERVATIONS", "CheckpointError", "Demand", "FlowMatchingPredictor", "PredictedRemaining",
           "PredictedRemainingAEC", "PredictedRemainingParallel", "PredictedRemainingVector", "Prediction",
           "Predictor", "PredictorQuery", "WLSPredictor", "add_predictions", "load_predictor", "make_demand",
           "make_predictor"]
