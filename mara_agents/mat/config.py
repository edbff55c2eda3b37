"""Every setting of stage-II (MAT) training in one dataclass; the command line is generated from it.

Defaults follow paper Appendix A.3 (one block, 64-dim, one head; PPO clip 0.2, c_v = 1, c_e = 0.01, γ = 1,
λ = 0.95, β = 0.1; 100k environment steps; arrival load p = 0.04; ID task set over train/val curves).

The paper does not give the rollout size.  An allocation decision matters only when more tasks compete than
there are nodes, so most transitions carry little signal and a PPO batch must be large for the advantage
estimate to rise above noise.  With 14 environments × 25 steps (350 transitions) and 5 epochs, the greedy
policy stayed at FIFO's level on the validation mixture (mean 60.3 % over three seeds, FIFO 60.1 %); with
28 × 50 (1,400 transitions) and 10 epochs it reached 62.4–63.7 % (mean 63.0 %) with the same number of
environment steps.  Both were measured on `val` curves only (2026-12-03).  Doubling again (56 × 50 for 200k
steps, the same 72 updates) scored lower on the `val` check mixture over six seeds (60.9 against 61.7 %), so
it was not adopted (``mara_agents/checkpoints/README.md``).  Neither was a learning rate of 1e-3 or 2.5e-4
(sixth session): on fresh seeds, 2.5e-4 gained 0.17 points on the check mixture, short of the 0.5 the rule
written beforehand asked for.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from mara_agents.mat.model import MATHyperParameters
from mara_agents.mat.ppo import PPOSettings

PREDICTORS = ("fm", "wls")


@dataclass
class MATTrainConfig:
    """Stage-II settings; ``python train.py mat --help`` lists them."""

    seed: int = field(default=0, metadata={"help": "seed of initialisation, episodes and action sampling"})
    predictor: str = field(default="fm", metadata={"help": "frozen demand predictor: fm (MARA) or wls (MARA-WLS)"})
    fm_checkpoint: str = field(default="", metadata={"help": "FM predictor checkpoint ('' = the shipped one)"})
    reward: str = field(default="shaped", metadata={"help": "shaped (successes + potential) or sparse"})
    steps: int = field(default=100_000, metadata={"help": "environment steps to train for"})
    validate_every: int = field(default=20_000, metadata={
        "help": "checkpoint rule, fixed before evaluation: score the greedy policy on the validation workload "
                "(val curves) every this many env steps and at the end, and export the best-scoring model "
                "(0: no validation, export the final model)"})
    validation_roots: int = field(default=4, metadata={"help": "roots of the validation workload"})
    validation_episodes: int = field(default=12, metadata={"help": "episodes per root of the validation workload"})
    validation_stress_episodes: int = field(default=8, metadata={
        "help": "also score this many stress-test episodes drawn from val curves; the validation score is the "
                "mean of the two workloads' success rates (0: the mixture workload only)"})
    device: str = field(default="cpu", metadata={"help": "torch device: cpu or cuda"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    num_envs: int = field(default=28, metadata={"help": "parallel environments per rollout"})
    rollout_steps: int = field(default=50, metadata={
        "help": "vector steps per rollout (per PPO update); num_envs × rollout_steps transitions per update"})
    lr: float = field(default=5e-4, metadata={"help": "Adam learning rate"})
    anneal_lr: bool = field(default=True, metadata={
        "help": "decay the learning rate linearly from lr to 0 over the run (damps late-run policy swings)"})
    gamma: float = field(default=1.0, metadata={"help": "discount γ (1: the undiscounted success count)"})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE λ"})
    clip: float = field(default=0.2, metadata={"help": "PPO ratio clip ε_PPO"})
    value_coef: float = field(default=1.0, metadata={"help": "value-loss coefficient c_v"})
    entropy_coef: float = field(default=0.01, metadata={"help": "entropy coefficient c_e"})
    epochs: int = field(default=10, metadata={"help": "PPO epochs per update"})
    minibatches: int = field(default=4, metadata={"help": "minibatches per epoch"})
    max_grad_norm: float = field(default=0.5, metadata={"help": "gradient-norm clip"})
    shaping_beta: float = field(default=0.1, metadata={"help": "potential-shaping weight β"})
    arrival_prob: float = field(default=0.04, metadata={"help": "training arrival load p"})
    task_set: str = field(default="id", metadata={"help": "training task set (train/val curves only)"})
    bank: str = field(default="", metadata={"help": "curve bank directory ('' = curves/bank)"})
    dim: int = field(default=64, metadata={"help": "embedding width"})
    heads: int = field(default=1, metadata={"help": "attention heads"})
    blocks: int = field(default=1, metadata={"help": "encoder and decoder blocks"})
    run_dir: str = field(default="", metadata={"help": "logs + resumable state ('' = runs/mat/<predictor>-<reward>-seed<S>)"})
    out: str = field(default="", metadata={"help": "exported checkpoint ('' = <run_dir>/selected.pt); a .json manifest goes beside it"})
    snapshot_every: int = field(default=0, metadata={
        "help": "also export <run_dir>/snapshots/step_<N>.pt every this many env steps (0: off), for learning curves"})
    checkpoint_every: int = field(default=4000, metadata={"help": "env steps between resumable checkpoints"})
    resume: bool = field(default=True, metadata={"help": "continue from <run_dir>/last.pt when it exists"})

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {PREDICTORS}, got {self.predictor!r}")
        if self.reward not in ("shaped", "sparse"):
            raise ValueError(f"reward must be shaped or sparse, got {self.reward!r}")
        for name in ("steps", "num_envs", "rollout_steps", "epochs", "minibatches", "checkpoint_every",
                     "validation_roots", "validation_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.validate_every < 0 or self.validation_stress_episodes < 0:
            raise ValueError("validate_every and validation_stress_episodes must be ≥ 0, got "
                             f"{self.validate_every} and {self.validation_stress_episodes}")
        if self.num_envs * self.rollout_steps < self.minibatches:
            raise ValueError("num_envs × rollout_steps must be at least the number of minibatches")

    @property
    def run_path(self) -> str:
        """Where logs and the resumable state go."""
        return self.run_dir or f"runs/mat/{self.predictor}-{self.reward}-seed{self.seed}"

    @property
    def out_path(self) -> str:
        """Where the selected policy is exported."""
        return self.out or f"{self.run_path}/selected.pt"

    def hparams(self, num_nodes: int, num_slots: int) -> MATHyperParameters:
        """The architecture for an environment with ``num_nodes`` nodes and ``num_slots`` slots."""
        return MATHyperParameters(num_nodes=num_nodes, num_slots=num_slots, dim=self.dim, heads=self.heads,
                                  blocks=self.blocks)

    def ppo(self) -> PPOSettings:
        """The PPO update's settings."""
        return PPOSettings(clip=self.clip, value_coef=self.value_coef, entropy_coef=self.entropy_coef,
                           epochs=self.epochs, minibatches=self.minibatches, max_grad_norm=self.max_grad_norm)


def parse_config(argv: Sequence[str] | None = None) -> MATTrainConfig:
    """The command line generated from :class:`MATTrainConfig` (``--num-envs``, ``--no-resume``, …)."""
    parser = argparse.ArgumentParser(prog="python train.py mat", description="Train the MAT allocator (stage II).")
    for f in dataclasses.fields(MATTrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata["help"])
        else:
            kind = {"int": int, "float": float, "str": str}[f.type if isinstance(f.type, str) else f.type.__name__]
            parser.add_argument(flag, type=kind, default=f.default, help=f"{f.metadata['help']} (default: {f.default})")
    return MATTrainConfig(**vars(parser.parse_args(argv)))
