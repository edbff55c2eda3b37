"""MAT (Wen et al., 2022) for MARA: model, masks, tokens and policy files; PPO, rollouts and training.

``python train.py mat --seed S`` trains one (:mod:`mara_agents.training.train`, settings in
:mod:`mara_agents.training.config`); :func:`mara_agents.mat.policy.load_mat_policy` plays an exported
checkpoint.  Nothing is imported here, so playing a policy never loads the training modules
(``ppo``, ``rollout``, ``train``, ``config``, ``validation``).
"""
