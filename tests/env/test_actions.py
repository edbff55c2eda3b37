"""The conflict rules: ``standing_picks`` (and its one-row form) is the paper's rule, ``repair_picks`` always
yields a matching."""

import gymnasium as gym
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import mara_env
from mara_env.actions import repair_picks, scores_to_picks
from mara_env.dynamics import standing_picks, standing_picks_one

K, M = 6, 5
cases = st.tuples(st.lists(st.integers(0, K), min_size=M, max_size=M),
                  st.lists(st.booleans(), min_size=K, max_size=K))


def _standing_node_by_node(picks, occupied):
    free, stands = list(occupied), []
    for pick in picks:
        stands.append(pick > 0 and free[pick - 1])
        if stands[-1]:
            free[pick - 1] = False
    return stands


@given(cases)
@settings(max_examples=300, deadline=None)
def test_repair_gives_a_matching_that_keeps_standing_picks_and_idles(case):
    picks, occupied = np.array(case[0]), np.array(case[1])
    expected = _standing_node_by_node(case[0], case[1])
    assert standing_picks(picks, occupied).tolist() == standing_picks_one(case[0], case[1]) == expected
    repaired = repair_picks(picks, occupied)
    served = repaired[repaired > 0] - 1
    assert len(set(served.tolist())) == served.size  # each task served at most once
    assert occupied[served].all()  # only occupied slots
    stands = standing_picks(picks, occupied)
    assert np.array_equal(repaired[stands], picks[stands])
    assert np.all(repaired[picks == 0] == 0)
    assert served.size == min(int(np.count_nonzero(picks)), int(occupied.sum()))


def test_moved_pick_takes_the_next_free_slot_after_it():
    occupied = np.array([True, True, False, True])
    # node 0 keeps slot 1; node 1 asked for slot 1 too -> next free after it is slot 3 (slot 2 is empty);
    # node 2 asked for empty slot 2 -> next free is slot 0 (wrapping past the taken slot 3).
    assert repair_picks(np.array([2, 2, 3]), occupied).tolist() == [2, 4, 1]
    assert repair_picks(np.array([2, 2, 3, 2]), occupied).tolist() == [2, 4, 1, 0]


def test_one_joint_action_and_a_batch_treat_a_negative_pick_as_idle():
    occupied = np.array([True, True, False, True])
    picks = np.array([-1, 2, 2])
    assert repair_picks(picks, occupied).tolist() == repair_picks(picks[None], occupied[None])[0].tolist() == [0, 2, 4]


@given(st.lists(cases, min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_batched_repair_equals_row_by_row(rows):
    """A batch goes through the array version, one joint action through the plain-Python one (the single
    env's): both give the same picks."""
    picks = np.array([r[0] for r in rows])
    occupied = np.array([r[1] for r in rows])
    expected = np.stack([repair_picks(p, o) for p, o in zip(picks, occupied)])
    assert np.array_equal(repair_picks(picks, occupied), expected)
    assert np.array_equal(standing_picks(picks, occupied),
                          np.stack([standing_picks(p, o) for p, o in zip(picks, occupied)]))


def test_gym_repair_mode_serves_every_requested_node_without_conflicts(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=1.0, conflicts="repair")
    _, info = env.reset(seed=0)
    assert info["repaired"] == 0
    for _ in range(4):  # let a few tasks in, fewer than the nodes
        obs, *_ = env.step(np.zeros(7, dtype=np.int64))
    occupied = int(obs["action_mask"][0, 1:].sum())
    assert 1 < occupied < 7
    _, _, _, _, info = env.step(np.ones(7, dtype=np.int64))  # every node asks for slot 0
    assert info["conflicts"] == 0
    assert len(env.unwrapped.engine.sim.last_served) == occupied  # every task served once
    assert info["repaired"] == 6  # all but node 0 moved to another task or, none left, idled


def test_idle_mode_is_the_papers_rule(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=1.0)
    env.reset(seed=0)
    for _ in range(4):
        env.step(np.zeros(7, dtype=np.int64))
    _, _, _, _, info = env.step(np.ones(7, dtype=np.int64))
    assert info["conflicts"] == 6 and "repaired" not in info
    assert len(env.unwrapped.engine.sim.last_served) == 1


def test_parallel_repair_mode_matches_gym_repair_mode(bank_dir):
    gym_env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.5, conflicts="repair")
    par = mara_env.parallel_env(bank=str(bank_dir), arrival_prob=0.5, conflicts="repair")
    gym_env.reset(seed=3)
    par.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(30):
        action = rng.integers(0, 11, size=7)
        _, reward, _, _, info = gym_env.step(action)
        _, rewards, _, _, infos = par.step({f"node_{i}": int(a) for i, a in enumerate(action)})
        assert rewards["node_0"] == reward and infos["node_0"]["repaired"] == info["repaired"]


scores_cases = st.tuples(st.lists(st.floats(-1, 1), min_size=K, max_size=K),
                         st.lists(st.booleans(), min_size=K, max_size=K))


@given(scores_cases)
@settings(max_examples=300, deadline=None)
def test_ranking_serves_the_best_positive_occupied_slots_once_each(case):
    scores, occupied = np.array(case[0]), np.array(case[1])
    picks = scores_to_picks(scores, occupied, M)
    served = picks[picks > 0] - 1
    assert picks.shape == (M,) and len(set(served.tolist())) == served.size
    eligible = np.flatnonzero(occupied & (scores > 0))
    assert served.size == min(M, eligible.size)
    assert set(served.tolist()) <= set(eligible.tolist())
    if served.size:  # nothing left out scores higher than what was served
        left_out = np.setdiff1d(eligible, served)
        assert left_out.size == 0 or scores[left_out].max() <= scores[served].min()
    assert np.array_equal(repair_picks(picks, occupied), picks)  # already a matching


def test_scores_mode_turns_a_ranking_into_the_served_tasks(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=1.0, actions="scores")
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (10,), np.float32)
    obs, _ = env.reset(seed=0)
    for _ in range(4):
        obs, *_ = env.step(np.zeros(10, dtype=np.float32))  # nothing positive: every node idles
    assert env.unwrapped.engine.sim.last_served == ()
    occupied = np.flatnonzero(obs["tasks"][:, 0])
    scores = np.full(10, -1.0, dtype=np.float32)
    scores[occupied[:2]] = [0.2, 0.8]
    _, _, _, _, info = env.step(scores)
    assert env.unwrapped.engine.sim.last_served == (occupied[1], occupied[0]) and info["conflicts"] == 0
