"""The learned allocator in a setting beyond the paper (node speeds, switching cost): the privileged expert's
placement, imitation of its per-node actions, the setting a policy file records, ``--init-from`` and
ensembles refusing another setting, and ensembles of node-token members."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import train as train_cli
from mara_agents.mat.policy import MATPolicy, load_mat_policy
from mara_agents.allocators.slack import SlackPolicy
from mara_agents.mat.checkpoint import export_policy, load_policy
from mara_agents.mat.ensemble import MATEnsemble, load_mat_ensemble
from mara_agents.training.experts import TRUE_REMAINING, PrivilegedSlackExpert
from mara_agents.training.il_train import FINISHED, train_il
from mara_agents.training import validation
from mara_agents.training.imitation import ExpertRollout, ImitationSettings, LabelledStates
from mara_agents.mat.decoding import placing_greedy_choice
from mara_agents.mat.model import MATHyperParameters, MATModel
from mara_agents.mat.setting import Setting
from mara_agents.mat.tokens import NUM_NODE_TOKEN_FEATURES, NUM_SLOT_FEATURES, build_tokens, slack_plans
from mara_agents.predictors.demand import Demand, make_demand
from mara_agents.predictors.wls import WLSPredictor
from mara_agents.play.lockstep import evaluate_workload
from mara_env.config import MARAConfig

from conftest import hand_observation
from test_imitation import BUSY, first_and_last_fit, tiny_il_config
from test_node_allocators import with_nodes

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

SETTING = Setting(num_nodes=4, node_speeds=(1, 1, 1, 4), switch_cost=2)


def _expert_view(observation, true_remaining):
    return {**observation, TRUE_REMAINING: np.asarray(true_remaining, dtype=np.float32)}


def test_the_expert_gives_the_fast_node_to_the_tightest_task_that_fits_after_its_setup():
    # Nodes of speed (1, 1, 4), c = 2, four waiting tasks (setup 2 anywhere), steps left l, true batches r:
    #   slot 0: l 20, r 8   fits on a slow node (2 + 8 = 10), fresh slack 20 − 2 − 8/4 = 16
    #   slot 1: l 12, r 30  fits only on the fast node (2 + ⌈30/4⌉ = 10), fresh slack 12 − 2 − 30/4 = 2.5
    #   slot 2: l 60, r 20  fresh slack 53: not served
    #   slot 3: l 25, r 15  fits on a slow node (17), fresh slack 19.25
    # Served slots 1, 0, 3 in that order: slot 1 takes the fast node, slot 0 node 0, slot 3 node 1.
    observation = with_nodes(hand_observation([10] * 4, [20, 12, 60, 25], nodes=3), speeds=[1, 1, 4],
                             last_node=[0] * 4, setup_left=[2] * 4)
    action = PrivilegedSlackExpert(switch_cost=2).act(_expert_view(observation, [8, 30, 20, 15]))
    assert action.tolist() == [1, 4, 2]


@pytest.mark.parametrize("remaining,expected", [(2.0, [1, 2, 0]), (12.0, [2, 1, 0])], ids=["stays", "moves"])
def test_the_expert_moves_a_running_task_only_when_the_gain_beats_the_switching_cost(remaining, expected):
    # Nodes of speed (1, 4, 1), c = 2; slot 0 runs on node 0, slot 1 (r 1) waits. r = 2: 2 steps where it is
    # against 2 + 1 on the fast node, it stays. r = 12: 12 steps against 2 + 3, it moves and frees node 0.
    observation = with_nodes(hand_observation([10, 10], [30, 50], nodes=3), speeds=[1, 4, 1], last_node=[1, 0],
                             setup_left=[0, 2])
    action = PrivilegedSlackExpert(switch_cost=2).act(_expert_view(observation, [remaining, 1.0]))
    assert action.tolist() == expected


def test_the_expert_knows_the_switching_cost_it_is_given_even_when_no_slot_shows_it():
    # Every task is running, so the observation does not show c; given c = 0 the expert moves the task to the
    # fast node at once (12 steps against 3), and reset() does not forget what it was given.
    running = with_nodes(hand_observation([10], [30], nodes=3), speeds=[1, 4, 1], last_node=[1], setup_left=[0])
    expert = PrivilegedSlackExpert(switch_cost=0)
    assert expert.act(_expert_view(running, [12.0])).tolist() == [0, 1, 0]
    expert.reset()
    assert expert.act(_expert_view(running, [12.0])).tolist() == [0, 1, 0]
    assert PrivilegedSlackExpert().act(_expert_view(running, [12.0])).tolist() == [1, 0, 0]


def test_a_node_token_model_may_leave_a_task_to_a_later_node_but_serves_every_task():
    # One legal slot, idle scored highest: with a later node left the node idles; the last node must serve.
    scores = torch.tensor([[0.0, -1.0, float("-inf")]])
    legal = torch.tensor([[True, True, False]])
    assert placing_greedy_choice(scores, legal, later=1).tolist() == [0]
    assert placing_greedy_choice(scores, legal, later=0).tolist() == [1]
    both = torch.tensor([[True, True, True]])  # two tasks left but one node after: this node must serve
    assert placing_greedy_choice(torch.tensor([[0.0, -1.0, -2.0]]), both, later=1).tolist() == [1]


def _setting_config(bank_dir, **changes) -> MARAConfig:
    return MARAConfig(bank=str(bank_dir), **{**SETTING.options(), **changes})


def test_an_untrained_node_token_student_with_the_prior_places_tasks_where_fm_slack_does(bank_dir):
    torch.manual_seed(0)
    demand = Demand(WLSPredictor())
    student = MATPolicy(MATModel(MATHyperParameters(num_nodes=4, slack_prior=True, slot_features=NUM_SLOT_FEATURES + 2,
                                                    node_features=NUM_NODE_TOKEN_FEATURES)), demand)
    env = gym.make("MARA-v0", config=_setting_config(bank_dir, arrival_prob=BUSY))
    observation, _ = env.reset(seed=4)
    placed = 0
    for _ in range(120):
        rule = SlackPolicy(demand).act(observation)  # a fresh rule: c only as this observation shows it
        assert student.act(observation).tolist() == rule.tolist()
        placed += int(rule[3] > 0 and (rule[:3] == 0).any())  # the fast node serves while a slow one idles
        observation, *_ = env.step(rule)
    assert placed > 0


def test_the_prior_plan_moves_a_running_task_to_the_fast_node_when_it_is_told_c():
    # Every task is running, so the observation does not show c: told c = 0 (the policy's setting), the plan is
    # FM-slack's, which moves the task to the fast node (12 steps against 3); with c unknown it stays.
    running = with_nodes(hand_observation([10], [30], nodes=3), speeds=[1, 4, 1], last_node=[1], setup_left=[0])
    stacked = {key: value[None] for key, value in running.items()}
    remaining = np.full(stacked["history_len"].shape, 12.0)
    assert slack_plans(stacked, remaining, switch_cost=0).tolist() == [[0, 1, 0]]
    assert slack_plans(stacked, remaining).tolist() == [[1, 0, 0]]


def test_an_untrained_student_in_its_setting_plays_every_action_fm_slack_plays(bank_dir):
    speeds = Setting(num_nodes=4, node_speeds=(1, 1, 1, 4), switch_cost=0)  # c = 0: moving pays at once
    torch.manual_seed(0)
    demand = Demand(WLSPredictor())
    student = MATPolicy(MATModel(MATHyperParameters(num_nodes=4, slack_prior=True, slot_features=NUM_SLOT_FEATURES + 2,
                                                    node_features=NUM_NODE_TOKEN_FEATURES)), demand, setting=speeds)
    rule = SlackPolicy(demand)  # one rule for the episode: it remembers c once a waiting task shows it
    env = gym.make("MARA-v0", config=MARAConfig(bank=str(bank_dir), arrival_prob=BUSY, **speeds.options()))
    observation, _ = env.reset(seed=4)
    moved = 0
    for _ in range(120):
        action = rule.act(observation)
        assert student.act(observation).tolist() == action.tolist()
        stacked = {key: value[None] for key, value in observation.items()}
        moved += int(not np.array_equal(slack_plans(stacked, demand(stacked))[0], action))
        observation, *_ = env.step(action)
    assert moved > 0  # steps where c unknown would have placed otherwise


def test_dagger_in_a_setting_labels_every_state_with_a_task_with_the_experts_per_node_action(bank_dir):
    rollout = ExpertRollout([_setting_config(bank_dir, arrival_prob=BUSY)] * 2, make_demand("wls"), seed=1,
                            device=torch.device("cpu"))
    data = LabelledStates()
    model = MATModel(MATHyperParameters(num_nodes=4, dim=16, slot_features=NUM_SLOT_FEATURES + 2,
                                        node_features=NUM_NODE_TOKEN_FEATURES))
    rollout.collect(model, 60, beta=1.0, rng=np.random.default_rng(0), data=data)
    tokens, actions = data.tensors(torch.device("cpu"))
    assert tokens.nodes is not None and tokens.nodes.shape[1:] == (4, NUM_NODE_TOKEN_FEATURES + 10)
    occupied = tokens.present.sum(-1)
    assert (occupied > 0).all() and (occupied < 4).any()  # uncontended states are kept: placement matters
    single = (occupied == 1) & (tokens.nodes[:, :, NUM_NODE_TOKEN_FEATURES:].sum((1, 2)) == 0)
    assert single.any()  # a lone task that no node served before: the expert puts it on the fast node
    assert (actions[single, 3] > 0).all() and (actions[single, :3] == 0).all()
    first, last = first_and_last_fit(model, data, passes=7)
    assert last["imitation_loss"] < 0.8 * first["imitation_loss"]


@pytest.fixture(scope="module")
def student(bank_dir, tmp_path_factory):
    """A tiny MAT-IL run in the setting (the expert's environments, stress envs and validation all in it)."""
    imitation = ImitationSettings(rounds=2, round_steps=40, bc_epochs=2, bc_batch=16, load_low=BUSY,
                                  load_high=BUSY, stress_envs=1, start_candidate=True)
    return train_il(tiny_il_config(bank_dir, tmp_path_factory.mktemp("il_setting"), env=_setting_config(bank_dir),
                                   model=MATHyperParameters(dim=16, slack_prior=True), imitation=imitation))


def test_imitation_in_a_setting_writes_a_checkpoint_that_records_it(student, bank_dir, short_file):
    loaded = load_policy(student.checkpoint)
    assert loaded.setting == SETTING
    assert loaded.model.hparams.num_nodes == 4 and loaded.model.hparams.node_features == NUM_NODE_TOKEN_FEATURES
    manifest = json.loads(student.checkpoint.with_suffix(".json").read_text())
    assert Setting.from_record(manifest["config"]["env"]) == SETTING
    rows = evaluate_workload(load_mat_policy(student.checkpoint), short_file, bank=bank_dir, episodes=[0],
                             arrival_window=40, **SETTING.options())
    assert rows[0]["conflicts"] == 0 and 0.0 <= rows[0]["success_rate"] <= 1.0


def test_the_untrained_prior_student_is_scored_first_and_the_best_student_is_kept(student):
    validation = json.loads((student.checkpoint.parent / FINISHED).read_text())["validation"]
    assert [step for step, _ in validation] == [0, 40, 80]  # the slack-prior start, then each round
    best_step, _ = max(validation, key=lambda entry: entry[1])  # the first of equal scores
    assert json.loads(student.checkpoint.with_suffix(".json").read_text())["step"] == best_step


def test_init_from_a_student_of_another_setting_is_one_line_naming_both(student, bank_dir, tmp_path, capsys):
    flags = ["mat", "--init-from", str(student.checkpoint), "--slack-prior", "--predictor", "wls", "--dim", "16",
             "--bank", str(bank_dir), "--run-dir", str(tmp_path / "ft"), "--steps", "20"]
    assert train_cli.main([*flags, "--num-nodes", "4", "--node-speeds", "1,1,1,4", "--switch-cost", "1"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "trained in num_nodes=4, node_speeds=1,1,1,4, switch_cost=2" in error[0]
    assert "this run is in num_nodes=4, node_speeds=1,1,1,4, switch_cost=1" in error[0]
    assert "add --num-nodes 4 --node-speeds 1,1,1,4 --switch-cost 2" in error[0]
    assert train_cli.main(flags) == 2
    assert "this run is in num_nodes=7, node_speeds=all 1, switch_cost=0" in capsys.readouterr().err
    tiny = ["--validate-every", "0", "--num-envs", "2", "--rollout-steps", "10", "--epochs", "1", "--minibatches", "2"]
    assert train_cli.main([*flags, *SETTING.flags().split(), *tiny]) == 0  # the matching setting trains
    assert load_policy(tmp_path / "ft" / "selected.pt").setting == SETTING


def _node_member(seed: int) -> MATModel:
    torch.manual_seed(seed)
    model = MATModel(MATHyperParameters(num_nodes=4, dim=16, slot_features=NUM_SLOT_FEATURES + 2,
                                        node_features=NUM_NODE_TOKEN_FEATURES)).eval()
    with torch.no_grad():
        model.stay_weight.fill_(1.0 + seed)  # each member its own stay term
    return model


def _node_tokens(bank_dir, count: int = 24):
    """Tokens of ``count`` observations of an env in the setting, played by random actions."""
    env = gym.make("MARA-v0", config=_setting_config(bank_dir, arrival_prob=BUSY))
    observation, _ = env.reset(seed=0)
    rng, seen = np.random.default_rng(0), []
    for _ in range(count):
        observation, *_ = env.step(rng.integers(0, 11, size=4))
        seen.append(observation)
    stacked = {key: np.stack([o[key] for o in seen]) for key in seen[0]}
    return build_tokens(stacked, np.full(stacked["history_len"].shape, 20.0)).to("cpu")


def test_an_ensemble_of_node_token_members_decodes_as_one_member_when_they_are_the_same(bank_dir):
    tokens = _node_tokens(bank_dir)
    member = _node_member(0)
    alone = member.act(tokens)
    one = MATEnsemble([member]).act(tokens)
    assert torch.equal(one[0], alone[0]) and torch.allclose(one[1], alone[1], atol=1e-5)
    twin = _node_member(0)
    assert torch.equal(MATEnsemble([member, twin]).act(tokens)[0], alone[0])
    mixed = MATEnsemble([member, _node_member(1)]).act(tokens)[0]
    assert ((mixed > 0).sum(-1) == torch.clamp(tokens.present.sum(-1), max=4)).all()  # every task served


def test_an_ensemble_refuses_members_of_different_settings_naming_both(tmp_path):
    paths = []
    for cost in (2, 1):
        path = tmp_path / f"c{cost}.pt"
        export_policy(path, _node_member(0), "wls", {}, Setting(4, (1, 1, 1, 4), cost))
        paths.append(path)
    policy = load_mat_ensemble([paths[0], paths[0]])
    assert policy.model.hparams.node_features == NUM_NODE_TOKEN_FEATURES
    with pytest.raises(ValueError, match="different settings") as refused:
        load_mat_ensemble(paths)
    assert "switch_cost=2" in str(refused.value) and "switch_cost=1" in str(refused.value)
    assert str(paths[0]) in str(refused.value) and str(paths[1]) in str(refused.value)


def test_the_check_plays_a_student_in_its_setting_and_refuses_another(student, bank_dir, tmp_path, capsys):
    flags = [str(student.checkpoint), "--bank", str(bank_dir), "--dir", str(tmp_path), "--roots", "1",
             "--episodes", "1", "--stress-only"]
    assert validation.main([*flags, "--num-nodes", "4", "--node-speeds", "1,1,1,4", "--switch-cost", "2"]) == 0
    assert str(student.checkpoint) in capsys.readouterr().out
    assert validation.main(flags) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "add --num-nodes 4 --node-speeds 1,1,1,4 --switch-cost 2" in error[0]
