"""User jobs through the public API, live on a local Ray with 2 CPUs: the same losses as offline, the replay,
each target metric's semantics, and faults that fail one job alone.

The jobs are defined here, as a user would write them: a least-squares fit in NumPy that updates its
weights in place.  One Ray instance serves the module (starting one costs seconds) and is always shut down.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Ray tests need the [ray] extra")

from curves.bank import load_bank  # noqa: E402
from mara_agents import POLICIES, make_policy  # noqa: E402
from mara_agents.live.jobs import Job, schedule  # noqa: E402
from mara_agents.live.jobs.outcome import abandon_reason, job_outcomes  # noqa: E402
from mara_agents.live.jobs.schedule import ship_by_value, trained_nodes  # noqa: E402
from mara_env.config import MARAConfig  # noqa: E402
from mara_env.live import LiveMARAEnv, LiveSettings, replay, replay_mismatches  # noqa: E402
from mara_env.live.jobs import run_offline  # noqa: E402
from mara_env.live.tasks import tracked  # noqa: E402

pytestmark = pytest.mark.long  # started first by make test (tests/conftest.py)

STORE_BYTES = 100 * 1024**2


def setup(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(256, 4))
    return {"x": x, "y": x @ rng.normal(size=4), "w": np.zeros(4), "rng": rng}


def step(state):
    rows = state["rng"].integers(0, 256, 16)
    x, y = state["x"][rows], state["y"][rows]
    error = x @ state["w"] - y
    state["w"] -= 0.1 * x.T @ error / len(rows)
    return state, float(np.mean(error**2))


def offline(job: Job, steps: int) -> np.ndarray:
    """The job's losses run here, without Ray or a scheduler."""
    state, losses = job.setup(job.seed), []
    for _ in range(steps):
        state, loss = job.step(state)
        losses.append(loss)
    return np.asarray(losses, dtype=np.float32)


def fails_at(kind: str, at: int):
    """A step that behaves like :func:`step` until its ``at``-th call (counted in the state), then faults."""
    def faulty(state):
        state["calls"] = state.get("calls", 0) + 1
        if state["calls"] == at:
            if kind == "raise":
                raise RuntimeError("the user's code broke")
            if kind == "nan":
                return state, float("nan")
            if kind == "hang":
                time.sleep(60)
            if kind == "huge":
                state["huge"] = np.zeros(2 * STORE_BYTES, dtype=np.uint8)  # calloc'd: no memory touched
        return step(state)
    return faulty


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, object_store_memory=STORE_BYTES, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


METRIC_JOBS = [Job("mean", setup, step, target=0.5, budget=40, seed=1, batch_size=16, lr=0.1),
               Job("ema", setup, step, target=0.5, budget=40, arrival=1, seed=2, metric="ema", ema_decay=0.8),
               Job("last", setup, step, target=0.1, budget=40, arrival=2, seed=3, metric="last")]


@pytest.fixture(scope="module")
def metric_run(local_ray, tmp_path_factory):
    return schedule(METRIC_JOBS, policy="fifo", nodes=2, out=tmp_path_factory.mktemp("metrics"))


def test_live_losses_equal_the_same_jobs_run_offline(metric_run):
    bank = load_bank(metric_run.out / "bank")
    assert sorted(bank.families) == ["ema", "last", "mean"]
    for k, job in enumerate(METRIC_JOBS):
        recorded = bank.per_batch[f"{job.name}/test/{k:03d}"]
        assert recorded.size == metric_run.jobs[k].steps > 4
        np.testing.assert_array_equal(recorded, offline(job, recorded.size))


def test_each_job_stops_at_the_first_step_its_metric_reaches_the_target(metric_run):
    for job, outcome in zip(METRIC_JOBS, metric_run.jobs):
        series = tracked(offline(job, job.budget), job.metric, job.ema_decay)
        assert outcome.outcome == "succeeded"
        assert outcome.steps == int(np.argmax(series <= job.target)) + 1
        assert outcome.value == pytest.approx(series[outcome.steps - 1])
    assert metric_run.successes == 3


def test_the_replay_in_the_simulator_is_identical(metric_run):
    assert metric_run.mismatches == [] and replay_mismatches(metric_run.out) == []


def test_faulty_jobs_fail_alone_with_their_reason(local_ray, tmp_path):
    jobs = [Job("good", setup, step, target=0.5, budget=40, seed=1),
            Job("raises", setup, fails_at("raise", 3), target=1e-9, budget=40, seed=2),
            Job("nan", setup, fails_at("nan", 2), target=1e-9, budget=40, seed=3),
            Job("hangs", setup, fails_at("hang", 2), target=1e-9, budget=40, seed=4, step_timeout_s=5.0),
            Job("huge", setup, fails_at("huge", 2), target=1e-9, budget=40, seed=5)]
    result = schedule(jobs, policy="edf", nodes=2, attempts=2, out=tmp_path)
    outcomes = {row.name: row for row in result.jobs}
    assert outcomes["good"].outcome == "succeeded"
    assert {name: row.outcome for name, row in outcomes.items() if name != "good"} == dict.fromkeys(
        ["raises", "nan", "hangs", "huge"], "failed")
    assert "the user's code broke" in outcomes["raises"].reason and outcomes["raises"].steps == 2
    assert outcomes["nan"].reason == "reported a non-finite loss (nan)" and outcomes["nan"].steps == 1
    assert outcomes["hangs"].reason == "a step took longer than its timeout of 5 s"
    assert "larger than Ray's object store" in outcomes["huge"].reason
    assert result.mismatches == []
    assert "failed @" in result.table() and "the user's code broke" in result.table()


def test_a_mat_checkpoint_keeps_its_number_of_nodes():
    with pytest.raises(ValueError, match=r"trained for M = 7 nodes and cannot drive nodes=2; run it with nodes=7"):
        schedule(METRIC_JOBS, policy="mara", nodes=2)


@pytest.mark.parametrize("field, value, error, message", [
    ("name", "a/b", ValueError, "job name must be"), ("target", 0.0, ValueError, "target must be a positive"),
    ("budget", 0, ValueError, "budget must be at least 1"), ("budget", 2.5, TypeError, "budget must be an integer"),
    ("metric", "median", ValueError, "metric must be one of"), ("ema_decay", 1.0, ValueError, "ema_decay"),
    ("step", None, TypeError, "step must be callable"), ("lr", float("nan"), ValueError, "lr must be"),
    ("step_timeout_s", -1, ValueError, "step_timeout_s"),
    ("step_timeout_s", True, ValueError, "step_timeout_s must be a positive number or None, got True"),
    ("step_timeout_s", float("inf"), ValueError, "step_timeout_s must be a positive number or None, got inf")])
def test_a_bad_job_field_is_refused_naming_it(field, value, error, message):
    fields = {"name": "ok", "setup": setup, "step": step, "target": 1.0, "budget": 10, field: value}
    with pytest.raises(error, match=message):
        Job(**fields)


@pytest.mark.parametrize("loss", ["0.56", True, [0.5], None])
def test_a_step_whose_loss_is_not_a_number_is_refused_naming_the_job(loss):
    job = Job("odd", setup, lambda state: (state, loss), target=1.0, budget=10)
    with pytest.raises(TypeError, match=r"job 'odd': step must return \(state, loss\) with loss a number, got "):
        run_offline(job, 1)


def test_a_one_element_array_is_a_loss():
    job = Job("array", setup, lambda state: (state, np.array([0.25])), target=1.0, budget=10)
    assert run_offline(job, 2).tolist() == [0.25, 0.25]


def test_jobs_with_one_name_twice_are_refused():
    with pytest.raises(ValueError, match="job names must be unique, repeated: mean"):
        schedule([METRIC_JOBS[0], METRIC_JOBS[0]], policy="fifo")


def stuck(state):
    """A step whose loss never falls: hopeless for any target below it."""
    return state, 5.0


STUCK_JOBS = [Job("stuck", setup, stuck, target=0.5, budget=30, seed=1, cpus=0.25),
              Job("fit", setup, step, target=0.5, budget=40, seed=2, cpus=0.25)]


def test_an_abandoned_job_is_stopped_its_state_dropped_and_the_replay_agrees(local_ray, tmp_path):
    ship_by_value(STUCK_JOBS)
    env = LiveMARAEnv(MARAConfig(num_nodes=1, max_active=2, arrival_window=1, abandon=True), LiveSettings(),
                      jobs=STUCK_JOBS)
    try:
        env.reset()
        env.step([1])                      # serve slot 0: "stuck" runs a step and its state is kept
        assert 0 in env.runner.states and env.action_space.nvec.tolist() == [5]
        _, _, _, _, info = env.step([3])   # K + 1 = 3: abandon slot 0; the node runs nothing this step
        assert info["abandoned"] == 1 and 0 not in env.runner.states and env.task_outcomes()[0] == "abandoned"
        assert env.log.steps[-1]["abandoned"] == [0] and env.log.steps[-1]["served"] == []
        (row, _) = job_outcomes(env)
        assert (row.outcome, row.steps, row.finished_at) == ("failed", 1, 2)
        assert row.reason.startswith("abandoned at step 1:")
        env.save(tmp_path)
    finally:
        env.close()
    assert replay_mismatches(tmp_path) == [] and replay(tmp_path).outcomes[0] == "abandoned"


def test_an_abandoning_allocator_stops_a_hopeless_job_live_and_the_replay_agrees(local_ray, tmp_path):
    # one node, EDF: "stuck" (due first) runs until its rule has 4 values, which show no progress: abandoned
    result = schedule(STUCK_JOBS, policy=make_policy("edf+abandon", make_room=False), nodes=1, out=tmp_path)
    stuck_row, fit_row = result.jobs
    assert (stuck_row.outcome, stuck_row.steps) == ("failed", 4)
    assert stuck_row.reason == abandon_reason(stuck_row.finished_at) and fit_row.steps > 0  # the node went to "fit"
    assert "stuck" in result.table() and "1 failed (1 abandoned)" in result.table()
    assert result.mismatches == []
    saved = json.loads((tmp_path / "jobs.json").read_text())["jobs"][0]
    assert saved["outcome"] == "failed" and saved["reason"].startswith("abandoned at step 4")


def test_a_replay_that_abandons_otherwise_than_the_run_is_a_mismatch(local_ray, tmp_path):
    schedule(STUCK_JOBS, policy=make_policy("edf+abandon", make_room=False), nodes=1, out=tmp_path)
    log = json.loads((tmp_path / "episode.json").read_text())
    (step,) = [step for step in log["steps"] if step["abandoned"]]
    step["abandoned"] = []
    (tmp_path / "episode.json").write_text(json.dumps(log))
    assert f"step {step['t']}: live 0 abandoned, replay 1" in replay_mismatches(tmp_path)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_registered_allocator_drives_user_jobs_and_replays_identically(local_ray, tmp_path, policy):
    if policy == "maskable-ppo":
        pytest.importorskip("sb3_contrib", reason="maskable-ppo needs sb3-contrib")
    nodes = trained_nodes(make_policy(policy)) or 2
    jobs = [Job(f"j{k}", setup, step, target=0.5, budget=20, arrival=k, seed=k + 1, cpus=0.25) for k in range(3)]
    result = schedule(jobs, policy=policy, nodes=nodes, out=tmp_path)
    assert {row.outcome for row in result.jobs} <= {"succeeded", "expired", "failed"}
    assert all(row.reason.startswith("abandoned at step") for row in result.jobs if row.outcome == "failed")
    assert result.mismatches == []
