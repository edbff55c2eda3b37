"""MAT (Wen et al., 2022) for MARA: model, masks, tokens, policy files and the policy that plays them.

``python train.py mat --seed S`` trains one (:mod:`mara_agents.training.train`, settings in
:mod:`mara_agents.training.config`); :func:`mara_agents.mat.policy.load_mat_policy` plays an exported
checkpoint.  Training lives above the allocators (it validates against any registered method), so playing
a policy never loads it.
"""
