"""Every setting of MAT training as one dataclass tree; ``python train.py mat`` and ``python train.py mat-il``
are generated from it (:mod:`mara_common.config_cli`: the flags are the field names, nested groups included).

:class:`RunSettings` holds what both recipes share — seed, predictor, parallel environments, the validation
workloads of the checkpoint rule, device, paths — and two nested groups, ``env`` (the environment's own
:class:`~mara_env.config.MARAConfig`, of which a few fields are flags) and ``model``
(:class:`~mara_agents.mat.model.MATHyperParameters`; nodes and slots come from the env).  Each recipe adds
its own:

* :class:`MATTrainConfig` (stage II, PPO): the run length, rollout size, resumable checkpoints, the ``ppo``
  group (:class:`~mara_agents.training.ppo.PPOSettings`) and the ``finetune`` group
  (:class:`FineTuneSettings`: PPO from an exported policy, and the method that run trains);
* :class:`MATILConfig` (MAT-IL, DAgger; not the paper's recipe): the ``imitation`` group
  (:class:`~mara_agents.training.imitation.ImitationSettings`).

Defaults follow paper Appendix A.3 (one block, 64-dim, one head; PPO clip 0.2, c_v = 1, c_e = 0.01, γ = 1,
λ = 0.95, β = 0.1; 100k environment steps; arrival load p = 0.04; ID task set over train/val curves).

The paper does not give the rollout size.  An allocation decision matters only when more tasks compete than
there are nodes, so most transitions carry little signal and a PPO batch must be large for the advantage
estimate to rise above noise: 28 environments × 50 steps per update and 10 PPO epochs.  How that and the
learning rate were chosen, on `val` curves only, is in ``mara_agents/checkpoints/README.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mara_common import checks
from curves.bank import DEFAULT_BANK
from mara_agents.play.checkpoints import CheckpointError
from mara_common.config_cli import changed_settings, check_integers, check_range, check_run_files
from mara_common.config_cli import parse_config as parse_dataclass
from mara_agents.mat.checkpoint import load_policy
from mara_agents.training.imitation import ImitationSettings
from mara_agents.mat.model import MATHyperParameters
from mara_agents.training.ppo import PPOSettings
from mara_agents.mat.setting import Setting
from mara_agents.mat.tokens import NUM_NODE_TOKEN_FEATURES, NUM_SLOT_FEATURES, SLOT_NODE_TOKEN_FEATURES
from mara_agents.predictors.demand import PREDICTORS
from mara_env.config import MARAConfig

MAX_TRANSITIONS = 1_000_000  # one PPO update's rollout buffer, held in memory with every slot's tokens
MAX_IL_ENVS = 4096  # MAT-IL's parallel environments, each holding its episode and the expert's view of it
PAPER_METHODS = {("fm", "shaped"): "mara", ("wls", "shaped"): "mara-wls", ("fm", "sparse"): "mara-sparse",
                 ("wls", "sparse"): "mara-wls-sparse"}
FINETUNE_METHODS = ("mat-il-ens", "mat-il")
SETTING_FLAGS = {  # the setting a policy is trained for (beyond the paper); both recipes train in one
    "num_nodes": "M, compute nodes (give --node-speeds one speed per node)",
    "node_speeds": "batches each node runs per step, e.g. 1,1,1,4 with --num-nodes 4 (beyond the paper; "
                   "default: all 1)",
    "switch_cost": "setup steps a task spends on a node that did not serve it at the previous step (beyond the paper)",
    "abandon": "the env's abandon action (2K + 1 choices per node): the policy gets a second pointer head that gives "
               "up tasks; MAT-IL then imitates the abandoning expert (docs/research/abandon_rules.md)",
}
ENV_FLAGS = {
    "arrival_prob": "training arrival load p",
    "task_set": "training task set (train/val curves only)",
    "reward": "shaped (successes + potential) or sparse",
    "shaping_beta": "potential-shaping weight β",
    "bank": "curve bank directory (default: the shipped curves/bank)",
    **SETTING_FLAGS,
}
IL_ENV_FLAGS = {
    "arrival_prob": "load p of the validation mixture (training loads: --load-low to --load-high)",
    "task_set": "training and validation task set (train/val curves only)",
    "bank": "curve bank directory (default: the shipped curves/bank)",
    **SETTING_FLAGS,
}


@dataclass
class RunSettings(ABC):
    """The settings every MAT training recipe shares; a recipe's config adds its own."""

    seed: int = field(default=0, metadata={
        "help": "seed of initialisation, episodes and action sampling (MAT-IL: and of the expert/student mix)"})
    predictor: str = field(default="fm", metadata={"help": "frozen demand predictor: fm (MARA) or wls (MARA-WLS)"})
    fm_checkpoint: str = field(default="", metadata={"help": "FM predictor checkpoint ('' = the shipped one)"})
    num_envs: int = field(default=28, metadata={"help": "parallel environments"})
    validation_roots: int = field(default=4, metadata={"help": "roots of the validation mixture"})
    validation_episodes: int = field(default=12, metadata={"help": "episodes per root of the validation mixture"})
    validation_stress_episodes: int = field(default=8, metadata={
        "help": "also score this many stress-test episodes drawn from val curves; the validation score is the "
                "mean of the two workloads' success rates (0: the mixture workload only)"})
    device: str = field(default="cpu", metadata={"help": "torch device: cpu or cuda"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    run_dir: str = field(default="", metadata={
        "help": "logs, validation workloads and PPO's resumable state ('' = runs/mat/<predictor>-<reward>-seed<S>, "
                "runs/mat-il/seed<S>)"})
    out: str = field(default="", metadata={
        "help": "exported checkpoint ('' = <run_dir>/selected.pt); a .json manifest goes beside it"})
    force: bool = field(default=False, metadata={"help": "replace a run directory that already holds a run"})
    unverified: bool = field(default=False, metadata={
        "help": "accept an input checkpoint (the FM predictor's, or a policy to start from) without a manifest "
                "to verify it against"})
    progress: bool = field(default=True, metadata={"help": "print a line per PPO update or DAgger round"})
    env: MARAConfig = field(default_factory=MARAConfig, metadata={"flags": ENV_FLAGS})
    model: MATHyperParameters = field(default_factory=MATHyperParameters)

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ValueError(f"predictor must be one of {PREDICTORS}, got {self.predictor!r}")
        check_integers(self, ("num_envs", "threads", "validation_roots", "validation_episodes"), 1)
        check_integers(self, ("seed", "validation_stress_episodes"), 0)
        if self.env.observation != "dict" or self.env.workload is not None:
            raise ValueError("env: MAT trains on the dict observation of random episodes (observation='dict', "
                             "workload=None)")
        if self.env.abandon and self.env.node_options:
            raise ValueError("abandon: a MAT with the abandon action trains in the paper's setting; drop "
                             "--node-speeds/--switch-cost or --abandon")

    def check_files(self, **inputs: str) -> None:
        """Check the device, thread count, output paths, bank and the input checkpoints ``inputs`` (the
        recipe's ``__post_init__`` calls this once its own numbers are known to be sound)."""
        check_run_files(self.run_path, self.out_path, device=self.device, threads=self.threads, bank=self.env.bank,
                        inputs={"fm_checkpoint": self.fm_checkpoint, **inputs})

    @property
    def run_path(self) -> Path:
        """Where logs, validation workloads (and PPO's resumable state) go."""
        return Path(self.run_dir or self.default_run_dir())

    @property
    def out_path(self) -> Path:
        """Where the selected policy is exported."""
        return Path(self.out) if self.out else self.run_path / "selected.pt"

    @property
    def bank(self) -> str:
        """The curve bank directory (the shipped one unless ``--bank`` names another)."""
        return self.env.bank or str(DEFAULT_BANK)

    @property
    @abstractmethod
    def method(self) -> str:
        """The method the exported policy is, as its manifest records it."""

    @abstractmethod
    def default_run_dir(self) -> str:
        """The run directory when ``--run-dir`` is not given."""

    @abstractmethod
    def validated_when(self) -> str:
        """When the checkpoint rule scores the policy, in words."""

    @abstractmethod
    def training_loads(self) -> float | list[float]:
        """The arrival load trained at, or the [low, high] range of loads, for the manifest."""

    def hparams(self) -> MATHyperParameters:
        """The architecture: ``model`` with the env's node and slot counts, and node tokens (two more slot
        features) when the env has node options."""
        extra = len(SLOT_NODE_TOKEN_FEATURES) if self.env.node_options else 0
        return dataclasses.replace(self.model, num_nodes=self.env.num_nodes, num_slots=self.env.max_active,
                                   slot_features=NUM_SLOT_FEATURES + extra,
                                   node_features=NUM_NODE_TOKEN_FEATURES if self.env.node_options else 0,
                                   abandon=self.env.abandon)

    def play_options(self) -> dict[str, Any]:
        """The env options the validation plays use: the setting's, and ``abandon=True`` for a run with the
        abandon action."""
        return {**self.setting.options(), **({"abandon": True} if self.env.abandon else {})}

    @property
    def setting(self) -> Setting:
        """The setting the run trains for and validates in (M, node speeds, c)."""
        return Setting.of(self.env)

    def record(self) -> dict[str, Any]:
        """The config as plain JSON-able data (nested groups as dicts) for manifests and run states."""
        record = dataclasses.asdict(self)
        record["env"]["curve_splits"] = list(self.env.curve_splits)
        return record

    def selection_rule(self) -> str:
        """The checkpoint rule in words, for the manifest."""
        stress = (f" and {self.validation_stress_episodes} stress-test episodes (equal weight)"
                  if self.validation_stress_episodes else "")
        return (f"highest greedy success rate on the validation workloads ({self.validation_roots} roots x "
                f"{self.validation_episodes} episodes, {self.env.task_set} task set, p={self.env.arrival_prob}"
                f"{stress}; val curves), scored {self.validated_when()}; ties keep the earlier model (fixed "
                "before evaluation; no test curve used)")


@dataclass(frozen=True)
class FineTuneSettings:
    """PPO from an exported policy instead of random weights (the second stage of the ``mat-il-ens`` recipe),
    and what such a run trains."""

    init_from: str = field(default="", metadata={
        "help": "start from this exported MAT policy (e.g. one trained by `train.py mat-il`) instead of random "
                "weights; it is also the reference of --reference-kl"})
    method: str = field(default="mat-il-ens", metadata={
        "help": "the method a run --init-from trains: mat-il-ens (one member of the ensemble, from a "
                "--slack-prior student) or mat-il (an unregistered policy, from a plain student)"})
    critic_warmup: int = field(default=0, metadata={
        "help": "PPO updates at the start that fit only the value head, so that the policy moves only once the "
                "critic's advantages carry signal (for --init-from)"})
    reference_kl: float = field(default=0.0, metadata={
        "help": "weight of a KL penalty that keeps the policy near the one it started from (with --init-from)"})
    start_candidate: bool = field(default=False, metadata={
        "help": "also score the --init-from policy at step 0 as a checkpoint candidate, so PPO's policy is kept "
                "only where it beats its start"})
    privileged_critic: bool = field(default=False, metadata={
        "help": "train with a separate critic that also reads each task's true remaining batches (training only; "
                "the exported policy is the actor alone and sees only the observation)"})

    def __post_init__(self) -> None:
        check_integers(self, ("critic_warmup",), 0)
        check_range("reference_kl", self.reference_kl, 0.0, math.inf)
        checks.choice("method", self.method, FINETUNE_METHODS)
        if self.reference_kl > 0 and not self.init_from:
            raise ValueError("reference_kl needs init_from: the penalty keeps the policy near the one it starts from")
        if self.start_candidate and not self.init_from:
            raise ValueError("start_candidate needs init_from: it scores the policy the run starts from")


@dataclass
class MATTrainConfig(RunSettings):
    """Stage-II (PPO) settings; ``python train.py mat --help`` lists them."""

    steps: int = field(default=100_000, metadata={"help": "environment steps to train for"})
    rollout_steps: int = field(default=50, metadata={
        "help": "vector steps per rollout (per PPO update); num_envs × rollout_steps transitions per update"})
    validate_every: int = field(default=20_000, metadata={
        "help": "checkpoint rule, fixed before evaluation: score the greedy policy on the validation workload "
                "(val curves) every this many env steps and at the end, and export the best-scoring model "
                "(0: no validation, export the final model)"})
    snapshot_every: int = field(default=0, metadata={
        "help": "also export <run_dir>/snapshots/step_<N>.pt every this many env steps and at the last step (0: off), "
                "for learning curves"})
    checkpoint_every: int = field(default=4000, metadata={"help": "env steps between resumable checkpoints"})
    resume: bool = field(default=True, metadata={"help": "continue from <run_dir>/last.pt when it exists"})
    force: bool = field(default=False, metadata={
        "help": "with --no-resume, start afresh even if <run_dir> already holds a run (its state is replaced)"})
    ppo: PPOSettings = field(default_factory=PPOSettings)
    finetune: FineTuneSettings = field(default_factory=FineTuneSettings)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_integers(self, ("steps", "rollout_steps", "checkpoint_every"), 1)
        check_integers(self, ("validate_every", "snapshot_every"), 0)
        transitions = self.num_envs * self.rollout_steps
        if transitions < self.ppo.minibatches:
            raise ValueError(f"num_envs × rollout_steps ({transitions}) must be at least the number of minibatches "
                             f"({self.ppo.minibatches})")
        if transitions > MAX_TRANSITIONS:
            raise ValueError(f"num_envs × rollout_steps ({transitions}) must be at most {MAX_TRANSITIONS:,} "
                             "transitions per update (the rollout buffer is held in memory)")
        self.check_files(init_from=self.finetune.init_from)
        if self.finetune.init_from:
            self._check_start()
        if self.finetune.init_from and self.finetune.method == "mat-il-ens" and not self.model.slack_prior:
            raise ValueError("method mat-il-ens: the ensemble's members are --slack-prior policies; add "
                             "--slack-prior, or train --method mat-il")

    def _check_start(self) -> None:
        """Read the ``--init-from`` policy, so that a corrupt file or another kind of checkpoint (an FM) is
        named before any setting that depends on it."""
        try:
            load_policy(self.finetune.init_from, verify=not self.unverified)
        except CheckpointError as exc:
            raise ValueError(f"--init-from: {exc}") from exc

    def default_run_dir(self) -> str:
        """``runs/mat/<predictor>-<reward>-seed<S>``."""
        return f"runs/mat/{self.predictor}-{self.env.reward}-seed{self.seed}"

    @property
    def method(self) -> str:
        """The method this run trains: ``finetune.method`` for a run ``--init-from`` a policy, else the paper
        recipe's name for the predictor and reward (``mara``, ``mara-wls``, ``mara-sparse``)."""
        if self.finetune.init_from:
            return self.finetune.method
        return PAPER_METHODS[self.predictor, self.env.reward]

    def validated_when(self) -> str:
        """Every ``validate_every`` env steps and at the end."""
        return f"every {self.validate_every} env steps and at the end"

    def selection_rule(self) -> str:
        """The checkpoint rule in words, for the manifest (the final model without validation)."""
        return super().selection_rule() if self.validate_every else "the final model (no validation)"

    def training_loads(self) -> float:
        """The one arrival load PPO trains at."""
        return self.env.arrival_prob


@dataclass
class MATILConfig(RunSettings):
    """MAT-IL settings; ``python train.py mat-il --help`` lists them."""

    num_envs: int = field(default=16, metadata={"help": "parallel environments (loads spread over the range)"})
    env: MARAConfig = field(default_factory=MARAConfig, metadata={"flags": IL_ENV_FLAGS})
    imitation: ImitationSettings = field(default_factory=ImitationSettings)

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.integer("num_envs", self.num_envs, 1, MAX_IL_ENVS)
        if self.imitation.stress_envs >= self.num_envs:
            raise ValueError(f"stress_envs ({self.imitation.stress_envs}) must be below num_envs ({self.num_envs})")
        self.check_files()

    def default_run_dir(self) -> str:
        """``runs/mat-il/seed<S>``."""
        return f"runs/mat-il/seed{self.seed}"

    @property
    def method(self) -> str:
        """MAT-IL's students are the ``mat-il`` method (a policy file, not a registered name)."""
        return "mat-il"

    def validated_when(self) -> str:
        """After every DAgger round."""
        return "after every DAgger round"

    def training_loads(self) -> list[float]:
        """The range the environments' arrival loads are spread over."""
        return [self.imitation.load_low, self.imitation.load_high]


def upgrade_record(record: dict[str, Any]) -> dict[str, Any]:
    """A :class:`MATTrainConfig` record (a run state's or a manifest's ``config``) in today's layout.  Records
    written before the ``finetune`` group existed hold its settings at the top level and ``reference_kl`` in
    ``ppo``, and name no method: theirs was ``mat-il`` for a run from a plain student, else the default.
    Settings added since a record was written (the env's node options, the model's node tokens) read as
    their defaults, which is what such a run had."""
    if "finetune" not in record:
        record = copy.deepcopy(record)
        finetune = {"init_from": record.pop("init_from", ""), "critic_warmup": record.pop("critic_warmup", 0),
                    "reference_kl": record.get("ppo", {}).pop("reference_kl", 0.0),
                    "privileged_critic": record.pop("privileged_critic", False)}
        plain_student = finetune["init_from"] and not record.get("model", {}).get("slack_prior", False)
        record["finetune"] = {**finetune, "method": "mat-il" if plain_student else FineTuneSettings.method}
    return with_defaults(record, MATTrainConfig().record())


def with_defaults(record: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every key it lacks, at any depth, taken from ``defaults``."""
    merged = dict(record)
    for key, value in defaults.items():
        if key not in merged:
            merged[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(merged[key], dict):
            merged[key] = with_defaults(merged[key], value)
    return merged


def parse_config(argv: Sequence[str] | None = None) -> MATTrainConfig:
    """The command line generated from :class:`MATTrainConfig` (``--num-envs``, ``--clip``, ``--no-resume``, …)."""
    return parse_dataclass(MATTrainConfig, argv, "python train.py mat", "Train the MAT allocator (stage II).")


def parse_il_config(argv: Sequence[str] | None = None) -> MATILConfig:
    """The command line generated from :class:`MATILConfig`."""
    return parse_dataclass(MATILConfig, argv, "python train.py mat-il",
                           "Train MAT by DAgger from a privileged expert (MAT-IL; not the paper's recipe).")


# Fields that may differ when a run is resumed; any other change is refused.  Paths compare by what they name.
_RESUMABLE_CHANGES = frozenset({"device", "threads", "steps", "resume", "force", "out", "checkpoint_every",
                                "snapshot_every", "run_dir", "progress", "unverified"})
_PATHS = frozenset({"fm_checkpoint", "env.bank"})


def changed_run_settings(recorded: dict[str, Any], config: RunSettings) -> list[str]:
    """The settings of ``config`` that differ from a run's recorded config in a way that changes what is
    trained (the device, ``--out``, the step budget and the like may differ; paths compare by what they name)."""
    return changed_settings(recorded, config.record(), _RESUMABLE_CHANGES, _PATHS)
