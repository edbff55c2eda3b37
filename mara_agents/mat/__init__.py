"""MAT (Wen et al., 2022) for MARA: model, masks, PPO, vectorised rollouts, training and the policy.

``python train.py mat --seed S`` trains one (see :mod:`mara_agents.mat.train`, settings in
:mod:`mara_agents.mat.config`); :func:`load_mat_policy` loads an exported checkpoint as a
:class:`~mara_agents.policy.Policy`.  The training modules are not imported here: playing a policy never
needs them (see ``mara_agents.evaluation.fingerprint.TRAINING_ONLY``).
"""

from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.policy import MATPolicy, load_mat_policy, make_predictor

__all__ = ["MATHyperParameters", "MATModel", "MATPolicy", "load_mat_policy", "make_predictor"]
