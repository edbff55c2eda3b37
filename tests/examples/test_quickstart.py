"""examples/quickstart.py: its ten-line allocator plays legal matchings, the table it prints holds the three
allocators' success rates on the slice it names (FIFO's checked against the harness), it draws the Gantt chart
it is asked for, with or without the node options, writes nothing under results/, and refuses a bad flag with one
line."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quickstart():
    spec = importlib.util.spec_from_file_location("example_quickstart", ROOT / "examples" / "quickstart.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _results_listing():
    return sorted((p.name, p.stat().st_mtime_ns) for p in (ROOT / "results").iterdir())


def test_the_ten_line_allocator_gives_each_node_a_distinct_present_slot_or_idle(quickstart):
    import mara_env  # noqa: F401

    env, policy = gym.make("MARA-v0"), quickstart.NearestToTarget()
    observation, _ = env.reset(seed=3)
    for _ in range(300):
        picks = policy.act(observation)
        served = picks[picks > 0]
        assert len(set(served.tolist())) == served.size
        assert all(observation["action_mask"][node, pick] for node, pick in enumerate(picks))
        observation, _, terminated, truncated, _ = env.step(picks)
        if terminated or truncated:
            break


@pytest.mark.parametrize("node_flags, node_options", [
    ([], {}), (["--node-speeds", "1", "1", "1", "2", "2", "2", "4", "--switch-cost", "2"],
               {"node_speeds": (1, 1, 1, 2, 2, 2, 4), "switch_cost": 2})])
def test_the_quickstart_prints_three_success_rates_draws_the_chart_and_writes_nothing_under_results(
        quickstart, tmp_path, capsys, node_flags, node_options):
    from mara_agents import make_policy
    from mara_agents.play.lockstep import evaluate_workload
    from mara_env.fixed_workloads import workload_path

    before, chart = _results_listing(), tmp_path / "episode.png"
    assert quickstart.main(["--episodes", "1", "--gantt", str(chart), *node_flags]) == 0
    rows = dict(re.findall(r"^\| ([^|]+?) \| (\d+\.\d\d) \|$", capsys.readouterr().out, re.MULTILINE))
    assert set(rows) == {"NearestToTarget (yours)", "FIFO", "FM-slack"}
    assert list(rows.values()) == sorted(rows.values(), key=float, reverse=True)
    fifo = evaluate_workload(make_policy("fifo"), workload_path("id", 0.04), episodes=[0], **node_options)
    assert float(rows["FIFO"]) == pytest.approx(100 * fifo[0]["success_rate"], abs=0.005)
    assert Image.open(chart).size == (640, 400)
    assert _results_listing() == before


@pytest.mark.parametrize("argv, message", [(["--episodes", "0"], "--episodes"), (["--load", "0.5"], "--load"),
                                           (["--gantt", "x.gif"], "name a .png file"),
                                           (["--node-speeds", "1", "2"], "node_speeds must hold one speed per node"),
                                           (["--switch-cost", "-1"], "switch_cost must be ≥ 0")])
def test_a_bad_flag_is_refused_with_one_line_and_status_2(quickstart, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        quickstart.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
