"""The flow-matching trajectory predictor (paper §4.1): encoding, target, model, sampling, decode."""

from mara_agents.predictors.fm.model import FlowMatchingModel, FMHyperParameters
from mara_agents.predictors.fm.predictor import (
    CheckpointError,
    FlowMatchingPredictor,
    load_model,
    load_predictor,
    save_checkpoint,
)

__all__ = ["CheckpointError", "FMHyperParameters", "FlowMatchingModel", "FlowMatchingPredictor", "load_model",
           "load_predictor", "save_checkpoint"]
