"""The fixed evaluation workloads shipped in mara_env/workloads: pinned, complete, and consistent with the bank.

If the files are ever regenerated on purpose (``python -m mara_env.fixed_workloads`` after a bank change),
update the checksums below in the same commit and say why: every published number depends on these files.
"""

import numpy as np
import pytest

from curves.bank import load_bank
from mara_env.fixed_workloads import EPISODES_PER_ROOT, EVAL_LOADS, EVAL_TASK_SETS, ROOTS, WORKLOAD_DIR, workload_path
from curves.targets import first_crossing
from mara_env.fixed_workloads import check_complete_pools
from mara_env.simulator import oracle_successes
from mara_env.tasksets import TASK_SETS
from mara_env.workload import file_checksum, load_workload

PINNED = {
    "id_p0.04.json": "b1ac35aff6b43ae124a4e1c6203877c22826e8defa4197d8bcc0687776ae2269",
    "id_p0.05.json": "7305ff0044e3045101a30efbc49d8639190d901248bede9a538c11179b05a751",
    "id_p0.06.json": "aef836bac5352a3ad4d46cf6d89bc3f8bf5a639aa51f3c42c1d4ec9ad9ea572a",
    "id_p0.07.json": "9884581b67782496d360993e7616e5c81066576aa4d854a42066727a6706ed94",
    "rl_ood_p0.04.json": "f54e760b52d5f8741c749b0929fa30c695961a32d334ee5d8ddac3450e6db677",
    "rl_ood_p0.05.json": "efcb72fbc6a38c90c7c9a954724c2e113a4450c2f7b86da3521e49d9803f3fd0",
    "rl_ood_p0.06.json": "953a625edf1b29f9ae908549c35133dd43e37b4087fcbd9fb6f30e2c37712ee7",
    "rl_ood_p0.07.json": "19165d8281031a3428e47e91a453242e5dc34ab3d429bd5b3681ef0046fb640f",
    "vit_ood_p0.04.json": "6ecf3da8f9f5ed636431530af4f47499c052a7a39925a5f8262d1468e7df7f98",
    "vit_ood_p0.05.json": "c0e3dd2f256209fa579a02d8d4e978ba94551d6506c8bebd4f4384a04e42c243",
    "vit_ood_p0.06.json": "032a4ee461a441af1e70fc3c8527f5bef396a54e6a3b6c77f001bcc0f7a3fbbe",
    "vit_ood_p0.07.json": "b6b013c64fdf6fe15cf5d85ee85db9da04b1b5baf4f3b46ace21d4429f92744e",
    "stress.json": "214498618cefbbea927be8635e0fa34caff56cc03256b67861f9e323fd20dcae",
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
    stress = TASK_SETS["stress"]
    for episode in workload.episodes:
        feasible = oracle_successes(episode, shipped_bank)
        assert len(episode) == 20 and feasible.sum() == 13
        assert not feasible[episode.arrival == 0].any()
        short = np.flatnonzero(episode.arrival == stress.short_arrival)
        crossings = [int(first_crossing(shipped_bank.cumavg(episode.curve[k]), episode.eps[k])) for k in short]
        assert all(stress.short_crossing[0] <= c <= stress.short_crossing[1] for c in crossings)


def test_the_shipped_bank_has_complete_test_pools(shipped_bank):
    check_complete_pools(shipped_bank)


def test_a_partial_pool_is_refused(bank_dir):
    with pytest.raises(ValueError, match="toy_fast.*fewer than the 24"):
        check_complete_pools(load_bank(bank_dir))


def test_the_one_command_regenerates_the_shipped_files_byte_for_byte(tmp_path):
    from mara_env.fixed_workloads import main

    assert main(["--out", str(tmp_path)]) == 0
    for name in PINNED:
        assert file_checksum(tmp_path / name) == PINNED[name], name


def test_the_command_refuses_a_partial_bank_with_one_line(bank_dir, tmp_path, capsys):
    from mara_env.fixed_workloads import main

    assert main(["--bank", str(bank_dir), "--out", str(tmp_path)]) == 2
    assert "toy_fast" in capsys.readouterr().err and not list(tmp_path.iterdir())
