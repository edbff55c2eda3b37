"""Every setting of stage-II (MAT) training as one dataclass tree; ``python train.py mat`` is generated from it.

:class:`MATTrainConfig` holds the run's own settings and three nested groups, each with its defaults in one
place: ``env`` (the environment's own :class:`~mara_env.config.MARAConfig`, of which the training load, task
set, reward, shaping weight and bank are flags), ``ppo`` (:class:`~mara_agents.mat.ppo.PPOSettings`) and
``model`` (:class:`~mara_agents.mat.model.MATHyperParameters`; nodes and slots come from the env).

Defaults follow paper Appendix A.3 (one block, 64-dim, one head; PPO clip 0.2, c_v = 1, c_e = 0.01, γ = 1,
λ = 0.95, β = 0.1; 100k environment steps; arrival load p = 0.04; ID task set over train/val curves).

The paper does not give the rollout size.  An allocation decision matters only when more tasks compete than
there are nodes, so most transitions carry little signal and a PPO batch must be large for the advantage
estimate to rise above noise: 28 environments × 50 steps (1,400 transitions) and 10 PPO epochs per update.
How that and the learning rate were chosen, on `val` curves only, is in ``mara_agents/checkpoints/README.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from mara_agents.config_cli import check_integers, check_run_files
from mara_agents.config_cli import parse_config as parse_dataclass
from mara_agents.mat.model import MATHyperParameters
from mara_agents.mat.ppo import PPOSettings
from mara_agents.predictors.demand import PREDICTORS
from mara_env.config import MARAConfig

MAX_TRANSITIONS = 1_000_000  # one PPO update's rollout buffer, held in memory with every slot's tokens
ENV_FLAGS = {
    "arrival_prob": "training arrival load p",
    "task_set": "training task set (train/val curves only)",
    "reward": "shaped (successes + potential) or sparse",
    "shaping_beta": "potential-shaping weight β",
    "bank": "curve bank directory (default: the shipped curves/bank)",
}


@dataclass
class MATTrainConfig:
    """Stage-II settings; ``python train.py mat --help`` lists them."""

    seed: int = field(default=0, metadata={"help": "seed of initialisation, episodes and action sampling"})
    predictor: str = field(default="fm", metadata={"help": "frozen demand predictor: fm (MARA) or wls (MARA-WLS)"})
    fm_checkpoint: str = field(default="", metadata={"help": "FM predictor checkpoint ('' = the shipped one)"})
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
    run_dir: str = field(default="", metadata={
        "help": "logs + resumable state ('' = runs/mat/<predictor>-<reward>-seed<S>)"})
    out: str = field(default="", metadata={
        "help": "exported checkpoint ('' = <run_dir>/selected.pt); a .json manifest goes beside it"})
    snapshot_every: int = field(default=0, metadata={
        "help": "also export <run_dir>/snapshots/step_<N>.pt every this many env steps and at the last step (0: off), "
                "for learning curves"})
    checkpoint_every: int = field(default=4000, metadata={"help": "env steps between resumable checkpoints"})
    resume: bool = field(default=True, metadata={"help": "continue from <run_dir>/last.pt when it exists"})
    force: bool = field(default=False, metadata={
        "help": "with --no-resume, start afresh even if <run_dir> already holds a run (its state is replaced)"})
    init_from: str = field(default="", metadata={
        "help": "start from this exported MAT policy (e.g. one trained by `train.py mat-il`) instead of random "
                "weights; it is also the reference of --reference-kl"})
    critic_warmup: int = field(default=0, metadata={
        "help": "PPO updates at the start that fit only the value head, so that the policy moves only once the "
                "critic's advantages carry signal (for --init-from)"})
    privileged_critic: bool = field(default=False, metadata={
        "help": "train with a separate critic that also reads each task's true remaining batches (training only; "
                "the exported policy is the actor alone and sees only the observation)"})
    unverified: bool = field(default=False, metadata={
        "help": "accept an --fm-checkpoint or --init-from without a manifest to verify it against"})
    progress: bool = field(default=True, metadata={"help": "print a line per PPO update"})
    env: MARAConfig = field(default_factory=MARAConfig, metadata={"flags": ENV_FLAGS})
    ppo: PPOSettings = field(default_factory=PPOSettings)
    model: MATHyperParameters = field(default_factory=MATHyperParameters)

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {PREDICTORS}, got {self.predictor!r}")
        check_integers(self, ("steps", "num_envs", "rollout_steps", "checkpoint_every", "threads", "validation_roots",
                              "validation_episodes"), 1)
        check_integers(self, ("validate_every", "validation_stress_episodes", "snapshot_every", "seed",
                              "critic_warmup"), 0)
        if self.env.observation != "dict" or self.env.workload is not None:
            raise ValueError("env: MAT trains on the dict observation of random episodes (observation='dict', "
                             "workload=None)")
        if self.ppo.reference_kl > 0 and not self.init_from:
            raise ValueError("reference_kl needs init_from: the penalty keeps the policy near the one it starts from")
        if self.num_envs * self.rollout_steps < self.ppo.minibatches:
            raise ValueError(f"num_envs × rollout_steps ({self.num_envs * self.rollout_steps}) must be at least "
                             f"the number of minibatches ({self.ppo.minibatches})")
        if self.num_envs * self.rollout_steps > MAX_TRANSITIONS:
            raise ValueError(f"num_envs × rollout_steps ({self.num_envs * self.rollout_steps}) must be at most "
                             f"{MAX_TRANSITIONS:,} transitions per update (the rollout buffer is held in memory)")
        check_run_files(self.run_path, self.out_path, device=self.device, threads=self.threads, bank=self.env.bank,
                        inputs={"fm_checkpoint": self.fm_checkpoint, "init_from": self.init_from})

    @property
    def run_path(self) -> str:
        """Where logs and the resumable state go."""
        return self.run_dir or f"runs/mat/{self.predictor}-{self.env.reward}-seed{self.seed}"

    @property
    def out_path(self) -> str:
        """Where the selected policy is exported."""
        return self.out or f"{self.run_path}/selected.pt"

    @property
    def method(self) -> str:
        """The method this run trains (``mara``, ``mara-wls``, ``mara-sparse``, …): a fine-tuning run from a
        ``--slack-prior`` student trains one member of the ``mat-il-ens`` ensemble; one from a plain student
        trains an unregistered ``mat-il`` policy (load it with ``make_policy("mara", checkpoint=...)``)."""
        if self.init_from:
            return "mat-il-ens" if self.model.slack_prior else "mat-il"
        return {"fm": "mara", "wls": "mara-wls"}[self.predictor] + ("" if self.env.reward == "shaped" else "-sparse")

    def hparams(self) -> MATHyperParameters:
        """The architecture: ``model`` with the env's node and slot counts."""
        return dataclasses.replace(self.model, num_nodes=self.env.num_nodes, num_slots=self.env.max_active)


def parse_config(argv: Sequence[str] | None = None) -> MATTrainConfig:
    """The command line generated from :class:`MATTrainConfig` (``--num-envs``, ``--clip``, ``--no-resume``, …)."""
    return parse_dataclass(MATTrainConfig, argv, "python train.py mat", "Train the MAT allocator (stage II).")
