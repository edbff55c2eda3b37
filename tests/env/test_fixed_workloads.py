"""The fixed evaluation workloads shipped in mara_env/workloads: pinned, complete, and consistent with the bank.

If the files are ever regenerated on purpose (``python -m mara_env.fixed_workloads`` after a bank change),
update the checksums below in the same commit and say why: every published number depends on these files.
"""

import numpy as np
import pytest

from curves.bank import load_bank
from mara_env.fixed_workloads import EPISODES_PER_ROOT, EVAL_LOADS, EVAL_TASK_SETS, ROOTS, WORKLOAD_DIR, workload_path
from mara_env.simulator import oracle_successes
from mara_env.workload import file_checksum, load_workload

PINNED = {
    "id_p0.04.json": "e5b1c050f54f20e67f441c1e75ce7a81e73f7e792ab7d110f691fd6366ff5be1",
    "id_p0.05.json": "9baa4d037a3c7642dba222cb2d1440aa3cca40981cd72734acb7a83c2a59b1c7",
    "id_p0.06.json": "da0ae1eb79b8bb8ee5721ae60dbab6f3bac8c4da32a96aa58bd91438f466e1ee",
    "id_p0.07.json": "e4c6086b8ca626fe686917da202e4726db339cbb4eec1b922843fd72c87f6978",
    "rl_ood_p0.04.json": "d0e1b7a3cff6f65c39d0e1267cc04f62f304610ac735da1f924aa4402e95f817",
    "rl_ood_p0.05.json": "1d34aa9198533b5acdee4b38579be578e4958503e0e1c840495feea5748b73d1",
    "rl_ood_p0.06.json": "9252d864d7026e0bd5026ce5d682342d8be5674c8592714a34e647f021ad90eb",
    "rl_ood_p0.07.json": "066cddab1f3aa3c6589192e39ba193bd23e400d4aff04af0d320cf5b84f7bed5",
    "vit_ood_p0.04.json": "5844777b608b2bdadefce900f115d36ffd7f02313718fae63cdb99380763c3a0",
    "vit_ood_p0.05.json": "569fd5c13c8fde578e98ef3a746b50a41d75bd3f77c6b4f7621c32bc54398654",
    "vit_ood_p0.06.json": "75bbbfdbbd341a5c793b2ddfd0562cff3940939454a35aeda883d05c6806986e",
    "vit_ood_p0.07.json": "00f7d6130b9e542f42a4143fda7b4d92d7ba48834516cceb47222c627bf8e81e",
    "stress.json": "d79a4e5f3576de0e4108db821a86d03d0f5ea4885ac356689640c5b59aeeb05e",
}


def test_exactly_the_pinned_files_ship():
    assert sorted(p.name for p in WORKLOAD_DIR.glob("*.json")) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_checksum_is_pinned(name):
    assert file_checksum(WORKLOAD_DIR / name) == PINNED[name]


@pytest.fixture(scope="module")
def shipped_bank():
    return load_bank()


@pytest.mark.parametrize(("task_set", "load"), [(t, p) for t in EVAL_TASK_SETS for p in EVAL_LOADS])
def test_load_workloads_are_complete_and_use_test_curves(shipped_bank, task_set, load):
    workload = load_workload(workload_path(task_set, load), shipped_bank)
    assert (workload.task_set, workload.arrival_prob) == (task_set, load)
    assert len(workload.episodes) == ROOTS * EPISODES_PER_ROOT
    assert sorted({(e.root, e.index) for e in workload.episodes}) == [
        (r, i) for r in range(ROOTS) for i in range(EPISODES_PER_ROOT)]
    assert all(cid.split("/")[1] == "test" for e in workload.episodes for cid in e.curve)
    mean_tasks = np.mean([len(e) for e in workload.episodes])
    assert abs(mean_tasks - 500 * load) < 0.15 * 500 * load


def test_stress_workload_matches_the_paper_design(shipped_bank):
    workload = load_workload(workload_path("stress"), shipped_bank)
    for episode in workload.episodes:
        feasible = oracle_successes(episode, shipped_bank)
        assert len(episode) == 20 and feasible.sum() == 13
        assert not feasible[episode.arrival == 0].any()
