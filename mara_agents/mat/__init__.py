"""MAT (Wen et al., 2022) for MARA: model, masks, PPO, vectorised rollouts, training and the policy.

``python train.py mat --seed S`` trains one (see :mod:`mara_agents.mat.train`); :func:`load_mat_policy`
loads an exported checkpoint as a :class:`~mara_agents.policy.Policy`.
"""

from mara_agents.mat.config import MATTrainConfig, parse_config
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.policy import MATPolicy, load_mat_policy, make_predictor

__all__ = ["MATHyperParameters", "MATModel", "MATPolicy", "MATTrainConfig", "load_mat_policy", "make_predictor",
           "parse_config"]
