"""``python -m mara_agents.live.jobs twin FOLDER ...`` replays recorded jobs in the simulator under many arrival
sequences: each served job reveals its next recorded loss through the live step, every policy plays the same
sequences, folders that recorded one job add up to its longest record, and nothing is written."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from curves.bank import FamilySpec
from mara_agents.allocators.registry import make_policy
from mara_agents.live.jobs.__main__ import main
from mara_agents.live.jobs.twin import arrival_sequence, load_recorded, play, run_twin
from mara_env.config import MARAConfig
from mara_env.live.record import EpisodeLog, save_episode
from mara_env.live.tasks import LiveEpisode, LiveTask

WIDTH = 32
# name: (ε on the last loss, budget B, recorded losses); "a" and "b" meet ε at their third step
JOBS = {"a": (1.0, 6, [3.0, 2.0, 0.5]), "b": (1.0, 4, [3.0, 2.0, 0.5]),
        "c": (0.1, 10, [4.0, 3.0, 2.5, 2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2])}


def recorded_run(folder: Path, jobs: dict[str, tuple[float, int, list[float]]]) -> Path:
    """A folder as a jobs run leaves it (``episode.json`` and ``bank/``), written without Ray."""
    episode = LiveEpisode(tuple(LiveTask(0, name, 0, 0, 32, 0.01, eps, budget, "last")
                                for name, (eps, budget, _) in jobs.items()), preset="user")
    specs = {name: FamilySpec(name, "ood", "user", "user", "user") for name in jobs}
    log = EpisodeLog(MARAConfig(num_nodes=1, arrival_window=1), episode, WIDTH, specs)
    save_episode(folder, log, [losses for _, _, losses in jobs.values()], ["succeeded"] * len(jobs), {}, {})
    return folder


def played(folder: Path, policy: str, names: list[str], nodes: int = 1) -> tuple[int, int]:
    jobs = {job.task.family: job for job in load_recorded([folder]).jobs}
    config = MARAConfig(num_nodes=nodes, arrival_window=1, max_nodes=16)
    return play([jobs[name] for name in names], make_policy(policy), config, WIDTH)


def test_each_policy_plays_the_recorded_losses_to_the_outcome_its_order_gives(tmp_path):
    folder = recorded_run(tmp_path / "run", {name: JOBS[name] for name in ("a", "b")})
    # one node; FIFO serves a for its three steps, and b, due at step 4, gets one; EDF serves b first, then a
    assert played(folder, "fifo", ["a", "b"]) == (1, 0, 0)
    assert played(folder, "edf", ["a", "b"]) == (2, 0, 0)


def test_an_abandoning_policy_plays_with_the_abandon_action_and_counts_what_it_abandoned(tmp_path):
    folder = recorded_run(tmp_path / "run", {name: JOBS[name] for name in ("a", "c")})
    jobs = {job.task.family: job for job in load_recorded([folder]).jobs}
    config = MARAConfig(num_nodes=1, arrival_window=1, max_nodes=16, abandon=True)
    # one node, EDF: a (due at 6) succeeds in 3 steps; c then runs 4 steps, from 4.0 to 2.0 of its target 0.1:
    # at that pace it needs 17 more steps and has 3 left, so its rule abandons it
    policy = make_policy("edf+abandon", make_room=False)
    assert play([jobs["a"], jobs["c"]], policy, config, WIDTH) == (1, 1, 0)
    cells = run_twin(load_recorded([folder]), [1], [0.5], 3, ("edf", "edf+abandon"))
    assert cells[0].abandoned["edf"].tolist() == [0, 0, 0]
    assert cells[0].successes["edf+abandon"].tolist() == cells[0].successes["edf"].tolist()


def test_a_record_that_stops_short_is_continued_and_counted(tmp_path):
    short = {"c": (0.1, 10, [4.0, 3.0])}
    folder = recorded_run(tmp_path / "short", short)
    (job,) = load_recorded([folder]).jobs
    assert not job.exact
    won, _, past = played(folder, "fifo", ["c"])
    assert won == 0 and past == 10 - 2
    longer = recorded_run(tmp_path / "long", {"c": JOBS["c"]})
    (job,) = load_recorded([folder, longer]).jobs
    assert job.exact and job.losses.tolist() == pytest.approx(JOBS["c"][2])


def test_records_of_one_job_that_disagree_are_refused_naming_the_folder(tmp_path):
    first = recorded_run(tmp_path / "first", {"a": JOBS["a"]})
    second = recorded_run(tmp_path / "second", {"a": (1.0, 6, [3.0, 2.5])})
    with pytest.raises(ValueError, match=f"{tmp_path / 'second'}: job 'a' differs from its record"):
        load_recorded([first, second])


def test_arrival_sequences_follow_the_seed_and_pair_the_policies(tmp_path):
    recorded = load_recorded([recorded_run(tmp_path / "run", JOBS)])
    draws = [[job.task.arrival for job in arrival_sequence(recorded.jobs, 0.5, np.random.default_rng(3))]
             for _ in range(2)]
    assert draws[0] == draws[1] and draws[0][0] == 0 and draws[0] == sorted(draws[0])
    cells = [run_twin(recorded, [1, 2], [0.5], 4, ("fifo", "edf"), seed=7) for _ in range(2)]
    assert [cell.nodes for cell in cells[0]] == [1, 2]
    for again, cell in zip(cells[1], cells[0]):
        assert {name: won.tolist() for name, won in again.successes.items()} == \
               {name: won.tolist() for name, won in cell.successes.items()}
    assert (cells[0][1].successes["edf"] >= cells[0][0].successes["edf"]).all()  # a second node never hurts EDF


def test_the_command_prints_the_table_and_writes_nothing(tmp_path, capsys):
    folder = recorded_run(tmp_path / "run", JOBS)
    before = sorted(path for path in tmp_path.rglob("*"))
    results = sorted((Path(__file__).resolve().parents[2] / "results").rglob("*"))
    assert main(["twin", str(folder), "--nodes", "1", "--loads", "0.5", "--sequences", "3",
                 "--policies", "fifo", "edf"]) == 0
    out = capsys.readouterr().out
    assert "3 recorded jobs from 1 folder(s)" in out and "1 nodes, load 0.5 (3 arrival sequences of 3 jobs)" in out
    assert [line.split()[0] for line in out.splitlines()[-2:]] == ["fifo", "edf"]
    assert sorted(tmp_path.rglob("*")) == before
    assert sorted((Path(__file__).resolve().parents[2] / "results").rglob("*")) == results


@pytest.mark.parametrize("argv, message", [(["--loads", "0"], "a load is the arrival probability per step"),
                                           (["--sequences", "1"], "sequences must be at least 2"),
                                           (["--nodes", "0"], "--nodes must be positive"),
                                           (["--policies", "nope"], "unknown policy 'nope'"),
                                           (["--fm-checkpoint", "/nope/fm.pt"], "no such file /nope/fm.pt")])
def test_a_bad_twin_setting_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    folder = recorded_run(tmp_path / "run", JOBS)
    assert main(["twin", str(folder), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_the_policies_that_read_fm_read_the_given_checkpoint(tmp_path, monkeypatch):
    schedule_module = importlib.import_module("mara_agents.live.jobs.schedule")  # the package exports schedule()
    asked = []

    def recorded(name, **kwargs):
        asked.append((name, kwargs))
        return make_policy(name)

    monkeypatch.setattr(schedule_module, "make_policy", recorded)
    recorded_folder = load_recorded([recorded_run(tmp_path / "run", JOBS)])
    run_twin(recorded_folder, [1], [0.5], 2, ("edf", "slack-fm+abandon"), fm_checkpoint="adapted.pt")
    assert asked == [("edf", {}), ("slack-fm+abandon", {"fm_checkpoint": "adapted.pt"})]


def test_a_folder_that_is_not_a_recorded_run_is_one_line(tmp_path, capsys):
    assert main(["twin", str(tmp_path)]) == 2
    assert f"{tmp_path}: not a recorded run" in capsys.readouterr().err


SHORT_JOB_FILE = '''
from mara_agents.live.jobs import Job

LOSSES = [4.0, 3.0, 2.5, 2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2]


def setup(seed):
    return 0


def step(index):
    return index + 1, LOSSES[index]


JOBS = [Job("c", setup, step, target=0.1, budget=10, metric="last", batch_size=32, lr=0.01)]
'''


def test_the_job_file_completes_a_short_record_and_a_different_one_is_refused(tmp_path, capsys):
    folder = recorded_run(tmp_path / "short", {"c": (0.1, 10, [4.0, 3.0])})
    (tmp_path / "jobs.py").write_text(SHORT_JOB_FILE)
    assert main(["twin", str(folder), "--nodes", "1", "--loads", "0.5", "--sequences", "2", "--policies", "fifo",
                 "--complete", str(tmp_path / "jobs.py")]) == 0
    out = capsys.readouterr().out
    assert f"completed by running {tmp_path / 'jobs.py'} here: c" in out
    assert "(continued with their last loss): none" in out and out.splitlines()[-1].split()[-1] == "0"
    (tmp_path / "other.py").write_text(SHORT_JOB_FILE.replace("[4.0, 3.0,", "[4.0, 3.5,"))
    assert main(["twin", str(folder), "--sequences", "2", "--complete", str(tmp_path / "other.py")]) == 2
    assert "job 'c': run here, its losses differ from its record" in capsys.readouterr().err


def test_the_job_file_records_a_job_that_never_ran(tmp_path, capsys):
    folder = recorded_run(tmp_path / "run", {"a": JOBS["a"], "c": (0.1, 10, [])})
    (tmp_path / "jobs.py").write_text(SHORT_JOB_FILE)
    common = ["twin", str(folder), "--nodes", "1", "--loads", "0.5", "--sequences", "2", "--policies", "fifo"]
    assert main(common) == 0
    assert "1 recorded jobs from 1 folder(s); never ran, left out: c" in capsys.readouterr().out
    assert main([*common, "--complete", str(tmp_path / "jobs.py")]) == 0
    out = capsys.readouterr().out
    assert "2 recorded jobs from 1 folder(s)\n" in out and f"completed by running {tmp_path / 'jobs.py'} here: c" in out
    assert out.splitlines()[-1].split()[-1] == "0"  # no step past a record
