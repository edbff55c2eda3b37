"""MAT-IL: the privileged expert, DAgger's labelled states, the imitation fit and the recipe end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import train as train_cli
from curves.bank import load_bank
from mara_agents.mat.policy import load_mat_policy
from mara_agents.training.experts import TRUE_REMAINING, PrivilegedObservation, PrivilegedSlackExpert
from mara_agents.training.config import MATILConfig
from mara_agents.training.config import parse_il_config as parse_config
from mara_agents.training.il_train import train_il
from mara_agents.training.imitation import ExpertRollout, ImitationSettings, LabelledStates, environment_configs, fit
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.predictors.demand import make_demand
from mara_agents.play.lockstep import evaluate_workload
from mara_env.config import MARAConfig
from mara_env.gym_env import MARAEnv

from conftest import hand_observation

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

BUSY = 0.3  # an arrival load at which the synthetic episodes soon hold more tasks than nodes


def tiny_il_config(bank_dir, run_dir, **changes) -> MATILConfig:
    """Two DAgger rounds of 40 env steps over WLS, a 16-dim model, one-episode validation workloads."""
    imitation = ImitationSettings(rounds=2, round_steps=40, bc_epochs=2, bc_batch=16, load_low=BUSY, load_high=BUSY)
    settings = dict(predictor="wls", num_envs=2, validation_roots=1, validation_episodes=1,
                    validation_stress_episodes=1, run_dir=str(run_dir), env=MARAConfig(bank=str(bank_dir)),
                    imitation=imitation, model=MATHyperParameters(dim=16))
    return MATILConfig(**{**settings, **changes})


def test_true_remaining_is_the_distance_to_the_first_crossing_of_the_replayed_curve(bank_dir):
    env = PrivilegedObservation(MARAEnv(config=MARAConfig(bank=str(bank_dir), arrival_prob=BUSY)))
    bank = load_bank(bank_dir)
    observation, _ = env.reset(seed=3)
    checked = 0
    for _ in range(30):
        sim = env.unwrapped.engine.sim
        for slot, task in enumerate(sim.slot_task.tolist()):
            if task < 0:
                assert observation[TRUE_REMAINING][slot] == 0
                continue
            below = np.flatnonzero(bank.cumavg(sim.episode.curve[task]) <= sim.episode.eps[task])
            assert below.size, "the synthetic curves all reach their targets within the recorded length"
            assert observation[TRUE_REMAINING][slot] == below[0] + 1 - observation["history_len"][slot]
            checked += 1
        observation, *_ = env.step(np.arange(1, 8))
    assert checked > 30


def test_the_expert_serves_warm_up_then_feasible_least_slack_then_hopeless():
    # slots: 0 warm-up (late deadline), 1 feasible slack 40, 2 hopeless, 3 feasible slack 5, 4 warm-up (early)
    observation = hand_observation([10, 10, 10, 10, 1], [90, 60, 30, 25, 50], nodes=5)
    observation[TRUE_REMAINING] = np.array([100, 20, 80, 20, 100], dtype=np.float32)
    observation["history_len"][0] = 2
    action = PrivilegedSlackExpert().act(observation)
    assert action.tolist() == [5, 1, 4, 2, 3]


def test_the_expert_refuses_an_observation_without_true_demand():
    with pytest.raises(ValueError, match="true_remaining"):
        PrivilegedSlackExpert().act(hand_observation([4, 4], [10, 20]))


def test_the_environments_spread_the_load_and_add_stress_tests():
    settings = ImitationSettings(load_low=BUSY, load_high=0.4, stress_envs=1)
    configs = environment_configs(MARAConfig(), settings, 4)
    assert [c.arrival_prob for c in configs[:3]] == pytest.approx([0.3, 0.35, 0.4])
    assert [c.task_set for c in configs] == ["id", "id", "id", "stress"]
    with pytest.raises(ValueError, match="stress_envs"):
        environment_configs(MARAConfig(), settings, 1)


def test_dagger_keeps_only_contended_states_labelled_by_the_expert(bank_dir):
    config = MARAConfig(bank=str(bank_dir))
    settings = ImitationSettings(load_low=BUSY, load_high=0.4, stress_envs=1)
    rollout = ExpertRollout(environment_configs(config, settings, 3), make_demand("wls"), seed=0,
                            device=torch.device("cpu"))
    data = LabelledStates()
    model = MATModel(MATHyperParameters(dim=16))
    rollout.collect(model, 60, beta=0.5, rng=np.random.default_rng(0), data=data)
    (slots, glob, present, _), actions = data.tensors(torch.device("cpu"))
    assert len(data) == len(actions) > 0
    assert (present.sum(-1) > config.num_nodes).all()
    # A contended state's expert label serves every node, each on a distinct occupied slot.
    assert (actions > 0).all()
    assert all(len(set(row)) == config.num_nodes for row in actions.tolist())
    assert present.gather(1, actions - 1).all()


def test_each_dagger_environment_plays_and_is_labelled_as_a_single_env_of_its_config(bank_dir):
    configs = environment_configs(MARAConfig(bank=str(bank_dir)), ImitationSettings(load_low=BUSY, load_high=0.4,
                                                                                    stress_envs=1), 3)
    rollout = ExpertRollout(configs, make_demand("wls"), seed=4, device=torch.device("cpu"))
    seeds = np.random.SeedSequence(4).generate_state(len(configs))
    singles = [PrivilegedObservation(MARAEnv(config=config)) for config in configs]
    observations = [env.reset(seed=int(seed))[0] for env, seed in zip(singles, seeds)]
    expert = PrivilegedSlackExpert()
    for _ in range(40):
        labels = rollout.labels(rollout.loop.observation)
        for row, (env, observation) in enumerate(zip(singles, observations)):
            for key in rollout.loop.observation:
                np.testing.assert_array_equal(rollout.loop.observation[key][row], observation[key], err_msg=key)
            np.testing.assert_array_equal(labels[row], expert.act(observation))
            observations[row] = env.step(labels[row])[0]
        rollout.loop.play(lambda observation, rows: labels, steps=1)
    assert len({tuple(label) for label in labels.tolist()}) > 1  # the environments differ


def first_and_last_fit(model: MATModel, data: LabelledStates, passes: int) -> tuple[dict, dict]:
    """The statistics of the first and the last of ``passes`` one-epoch imitation fits of ``model`` on ``data``."""
    settings = ImitationSettings(bc_epochs=1, bc_batch=32, bc_lr=3e-3)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.bc_lr)
    generator = torch.Generator().manual_seed(0)
    fits = [fit(model, optimizer, data, settings, generator, torch.device("cpu")) for _ in range(passes)]
    return fits[0], fits[-1]


def test_fitting_the_expert_raises_the_likelihood_of_its_actions(bank_dir):
    torch.manual_seed(0)
    rollout = ExpertRollout([MARAConfig(bank=str(bank_dir), arrival_prob=BUSY)] * 2, make_demand("wls"), seed=1,
                            device=torch.device("cpu"))
    data = LabelledStates()
    model = MATModel(MATHyperParameters(dim=16))
    rollout.collect(model, 80, beta=1.0, rng=np.random.default_rng(0), data=data)
    first, last = first_and_last_fit(model, data, passes=9)
    assert last["imitation_loss"] < 0.8 * first["imitation_loss"]
    assert last["agreement"] > first["agreement"]


@pytest.fixture(scope="module")
def student(bank_dir, tmp_path_factory):
    """One tiny MAT-IL run (:func:`tiny_il_config`), read by the tests that do not change its folder."""
    return train_il(tiny_il_config(bank_dir, tmp_path_factory.mktemp("il") / "run"))


def test_the_recipe_exports_the_best_validated_student_with_a_manifest_and_logs(bank_dir, short_file, student):
    result, run = student, student.checkpoint.parent
    manifest = json.loads(result.checkpoint.with_suffix(".json").read_text())
    assert manifest["method"] == "mat-il" and manifest["paper_recipe"] is False
    scores = manifest["validation_scores"]
    assert [entry["step"] for entry in scores] == [40, 80][:len(scores)]
    assert manifest["step"] == max(scores, key=lambda entry: entry["success_rate"])["step"]
    assert manifest["data"]["arrival_prob"] == [BUSY, BUSY] and result.global_step == 80
    assert any((run / "tb").iterdir())
    policy = load_mat_policy(result.checkpoint)
    rows = evaluate_workload(policy, short_file, bank=bank_dir, episodes=[0], arrival_window=40)
    assert 0.0 <= rows[0]["success_rate"] <= 1.0 and rows[0]["conflicts"] == 0


def test_a_finished_run_is_not_trained_again_but_an_unfinished_or_different_one_needs_force(bank_dir, tmp_path,
                                                                                             capsys):
    run = tmp_path / "run"
    first = train_il(tiny_il_config(bank_dir, run))
    written = first.checkpoint.stat().st_mtime_ns
    capsys.readouterr()
    assert train_cli.main(["mat-il", "--predictor", "wls", "--num-envs", "2", "--validation-roots", "1",
                           "--validation-episodes", "1", "--validation-stress-episodes", "1", "--rounds", "2",
                           "--round-steps", "40", "--bc-epochs", "2", "--bc-batch", "16", "--load-low", str(BUSY),
                           "--load-high", str(BUSY), "--dim", "16", "--bank", str(bank_dir), "--run-dir", str(run),
                           "--out", str(tmp_path / "elsewhere.pt")]) == 0
    out = capsys.readouterr().out
    assert "already holds this finished MAT-IL run" in out
    assert f"nothing was written to {tmp_path / 'elsewhere.pt'}" in out
    assert f"MAT-IL checkpoint {first.checkpoint.resolve()}" in out and not (tmp_path / "elsewhere.pt").exists()
    assert first.checkpoint.stat().st_mtime_ns == written
    record = json.loads((run / "finished.json").read_text())
    assert [step for step, _ in record["validation"]] == [40, 80]  # no start candidate unless asked
    del record["config"]["imitation"]["start_candidate"]  # a record written before the setting existed
    (run / "finished.json").write_text(json.dumps(record))
    assert train_il(tiny_il_config(bank_dir, run)).checkpoint == first.checkpoint
    with pytest.raises(ValueError, match="--force"):  # other settings: not the finished run
        train_il(tiny_il_config(bank_dir, run, seed=1))
    (run / "finished.json").unlink()  # as if the run had been killed before it finished
    with pytest.raises(ValueError, match="--force"):
        train_il(tiny_il_config(bank_dir, run))


def test_the_same_seed_gives_the_same_student(bank_dir, tmp_path, student):
    weights = [torch.load(result.checkpoint, weights_only=False)["state_dict"]
               for result in (student, train_il(tiny_il_config(bank_dir, tmp_path / "again")))]
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])


def test_the_command_line_is_generated_and_bad_values_are_usage_errors(capsys):
    config = parse_config(["--seed", "2", "--rounds", "3", "--load-high", "0.06", "--dim", "128", "--device", "cpu"])
    assert (config.seed, config.imitation.rounds, config.imitation.load_high, config.model.dim) == (2, 3, 0.06, 128)
    with pytest.raises(SystemExit) as exited:
        train_cli.main(["mat-il", "--load-low", "0.08", "--load-high", "0.05"])
    assert exited.value.code == 2
    assert "error: need 0 ≤ load_low ≤ load_high" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_whole_recipe_runs_on_cuda(bank_dir, tmp_path):
    result = train_il(tiny_il_config(bank_dir, tmp_path / "run", device="cuda"))
    manifest = json.loads(result.checkpoint.with_suffix(".json").read_text())
    assert manifest["config"]["device"] == "cuda" and result.global_step == 80
