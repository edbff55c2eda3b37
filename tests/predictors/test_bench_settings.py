"""The benchmark runs FM as the paper does per task set (Appendix A.2: 4 samples × 1 Euler step on ViT)."""

from __future__ import annotations

import torch

from mara_agents.predictors.bench import FM_INFERENCE, for_task_set
from mara_agents.predictors.fm import FlowMatchingModel
from mara_agents.predictors.fm.predictor import FlowMatchingPredictor
from mara_agents.predictors.wls import WLSPredictor


def test_vit_uses_four_samples_and_one_euler_step():
    torch.manual_seed(0)
    fm = FlowMatchingPredictor(FlowMatchingModel())
    vit = for_task_set(fm, "ViT OOD")
    assert isinstance(vit, FlowMatchingPredictor) and (vit.n_samples, vit.euler_steps) == FM_INFERENCE["ViT OOD"] == (4, 1)
    assert vit.model is fm.model
    assert for_task_set(fm, "ID") is fm and for_task_set(fm, "RL OOD") is fm
    wls = WLSPredictor()
    assert for_task_set(wls, "ViT OOD") is wls
