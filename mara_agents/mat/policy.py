"""The trained MAT allocator behind the :class:`~mara_agents.play.policy.Policy` protocol (inference only).

Self-contained: the policy holds the demand stage of the predictor it was trained on and computes the
remaining-batch estimates from the raw observation's history itself (one batched call per step, as in
training, through :func:`~mara_agents.mat.tokens.mat_inputs`), so it plays the plain Gymnasium env,
``mara_agents.play.lockstep.evaluate_workload`` and the PettingZoo envs through
:class:`~mara_agents.play.policy.NodeActor` with no wrapper.  Any ``predicted_remaining`` already in
the observation is ignored, so the checkpoint alone decides which predictor is used.

A policy plays only in the setting it was trained for (:class:`~mara_agents.mat.setting.Setting`: M, node
speeds, c): every call checks the first observation it is given against the setting its checkpoint records
and refuses, naming the checkpoint and both settings, as far as the observation shows the env's setting
(:meth:`~mara_agents.mat.setting.Setting.contradiction`).  A policy of unknown setting (an old file with node
tokens and no manifest) is not checked.

``act_batch`` acts for many observations at once; the evaluation harness uses it to play all episodes of a
workload file in lock-step (:mod:`mara_agents.play.lockstep`).

Evaluation decodes **greedily** by default, so it is deterministic: in node order, each node takes its most
likely legal slot and idles only when no occupied slot is left (work-conserving; see
:meth:`~mara_agents.mat.model.MATModel.act` for why).  So only the contended observations (more tasks than
nodes) go through the predictor and the network; the others serve every task
(:mod:`~mara_agents.rules.uncontended`).  ``sample=True`` samples from the policy with a seeded generator
instead, idle included, for every observation.  Nothing here imports training code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from mara_agents.rules.uncontended import decide_contended
from mara_agents.mat.checkpoint import check_trained_fm, load_policy
from mara_agents.mat.model import MATModel
from mara_agents.mat.setting import Setting
from mara_agents.mat.tokens import mat_inputs
from mara_agents.predictors.base import Predictor
from mara_agents.predictors.demand import Demand, as_demand, make_demand, stack_observations


class MATPolicy:
    """A frozen MAT model + the demand stage of its frozen predictor, for the ``setting`` it was trained in
    (left out: a model without node tokens is for its node count with the default options, one with node
    tokens is unchecked); ``checkpoints`` are the files it was loaded from, which an error names (kept as paths,
    which the evaluation cache hashes by content, so the spelling of a path does not change a cache key)."""

    def __init__(self, model: MATModel, demand: Demand | Predictor, sample: bool = False, seed: int = 0,
                 setting: Setting | None = None, checkpoints: Sequence[str | os.PathLike[str]] = ()):
        self.model = model.eval()
        self.setting = setting if setting is not None or model.hparams.node_features else \
            Setting(model.hparams.num_nodes)
        self.checkpoints = tuple(Path(path) for path in checkpoints)
        self.demand = as_demand(demand)
        self.device = next(model.parameters()).device
        self.seed = seed  # kept so that evaluation caches tell differently seeded sampling runs apart
        self.generator = torch.Generator(device=self.device).manual_seed(seed) if sample else None

    @property
    def abandons(self) -> bool:
        """Whether the model has the abandon head, so it plays only in ``MARA-v0`` with ``abandon=True``."""
        return bool(self.model.hparams.abandon)

    def reset(self) -> None:
        """Nothing to clear; a sampling generator keeps running so the sequence depends only on the seed."""

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """Actions (N, M) for N observations in one predictor call and one decoder sweep (greedy decoding:
        for the contended observations only; the others serve every occupied slot). A model with node tokens
        decides every observation: which node serves which task matters even when every task is served.

        With greedy decoding each row depends only on its own observation, so the evaluation harness plays
        a whole workload file in lock-step and gets the same actions as one episode at a time.
        """
        if observations:
            self._check_choices(observations[0])
        env = self.setting.contradiction(observations[0]) if self.setting is not None and observations else None
        if env is not None:
            name = "+".join(map(str, self.checkpoints)) or "this MAT policy"
            raise ValueError(f"{name} was trained in {self.setting.describe()}; the env it is asked to play "
                             f"has {env}: play it with {self.setting.flags()}, or train a policy for that setting")
        if self.generator is not None or self.model.hparams.node_features:
            return self._decode(observations)
        return decide_contended(observations, self._decode)

    def _check_choices(self, observation: dict[str, np.ndarray]) -> None:
        """Refuse, in one line naming the checkpoint, an env whose action mask is not as wide as the model's
        head: K + 1 choices per node, 2K + 1 with the abandon head (``MARA-v0`` with ``abandon=True``)."""
        hparams = self.model.hparams
        expected = (2 if hparams.abandon else 1) * hparams.num_slots + 1
        width = np.shape(observation["action_mask"])[-1]
        if width != expected:
            name = "+".join(map(str, self.checkpoints)) or "this MAT policy"
            trained = "with" if hparams.abandon else "without"
            raise ValueError(f"{name} was trained {trained} the abandon action ({expected} choices per node for "
                             f"K = {hparams.num_slots}); the env it is asked to play has {width}: play it in "
                             f"MARA-v0 with abandon={hparams.abandon}")

    def _decode(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """The network's actions for the observations: one predictor call, one decoder sweep."""
        tokens = mat_inputs(stack_observations(observations), self.demand, self.model.hparams.slack_prior,
                            self.device, self.setting.switch_cost if self.setting is not None else None,
                            self.model.hparams.abandon_nodes)
        with torch.inference_mode():  # same numbers as no_grad, less bookkeeping per tensor
            actions, _, _ = self.model.act(tokens, generator=self.generator)
        return actions.cpu().numpy()


def load_mat_policy(path: str | os.PathLike[str], device: str = "cpu", sample: bool = False, seed: int = 0,
                    fm_checkpoint: str = "", verify: bool = True) -> MATPolicy:
    """A :class:`MATPolicy` from an exported checkpoint, with the predictor recorded in it (the policy was
    trained on that predictor's estimates, so it is never swapped, and an FM file other than the one it was
    trained with is refused: :func:`~mara_agents.mat.checkpoint.check_trained_fm`); ``verify=False`` accepts
    checkpoints without a manifest and plays with another FM after a warning."""
    loaded = load_policy(path, device, verify)
    check_trained_fm(path, loaded.predictor, fm_checkpoint, verify)
    return MATPolicy(loaded.model, make_demand(loaded.predictor, fm_checkpoint, device, verify), sample=sample,
                     seed=seed, setting=loaded.setting, checkpoints=[path])
