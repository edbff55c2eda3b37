"""Training the learned allocators: MAT by PPO (``python train.py mat``) and by imitation (``train.py mat-il``),
and behaviour cloning of FM-slack into an SB3 policy.

* :mod:`~mara_agents.training.train`, :mod:`~mara_agents.training.config`, :mod:`~mara_agents.training.ppo`,
  :mod:`~mara_agents.training.rollout`, :mod:`~mara_agents.training.critic` — PPO.
* :mod:`~mara_agents.training.il_train`, :mod:`~mara_agents.training.imitation`,
  :mod:`~mara_agents.training.experts` — imitation of a privileged expert.
* :mod:`~mara_agents.training.validation` — the checkpoint rule's validation score, against any registered
  method (so this package sits above the allocators).
* :mod:`~mara_agents.training.behaviour_cloning` — the warm start of an imitation-then-RL SB3 pipeline.

FM's training (stage I) is :mod:`mara_agents.predictors.train`: it needs nothing above the predictors.
"""
