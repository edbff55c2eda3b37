"""Bad input to ``evaluate.py``, faults of its result cache, an unreachable Ray cluster and a policy whose
actions are wrong: each ends in one line naming the culprit and a non-zero exit, with nothing lost; and a run
that covers part of the default grid never touches the shipped ``results/``.

``evaluate.py`` is called in-process (its ``main``) where it can be; the scratch-directory check runs it as a
real process from the repository root, as a user would.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from eval_fixtures import workloads_fixture  # noqa: F401  (provides the workloads_dir fixture)

import evaluate as evaluate_cli
from cli_status import exit_status
from mara_agents.evaluation.cache import BUSY_S, CacheError, ResultCache
from mara_agents.evaluation.ray_executor import RayEvaluationError, check_reachable

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["table3", "--methods", "fifo", "--no-progress", "--jobs", "1", "--roots", "1", "--episodes", "1"]


def run_main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``evaluate.py argv`` run in this process."""
    return exit_status(evaluate_cli.main, argv, capsys)


# (argv, words the message must contain); every flag of evaluate.py has at least one case
FLAG_CASES = [
    (["tableX"], ["tableX"]),
    (["--methods"], ["--methods"]),
    (["--methods", "no-such-method"], ["no-such-method"]),
    (["--methods", "nomodule_xyz:Factory"], ["nomodule_xyz"]),
    (["--policy", "eval_toy_policy:Missing"], ["Missing"]),
    (["--policy", "x=eval_toy_policy:EDF:oops"], ["oops", "key=value"]),
    (["--task-sets", "moon"], ["--task-sets", "moon"]),
    (["--task-sets"], ["--task-sets"]),
    (["--loads", "0.5"], ["--loads", "0.5"]),
    (["--loads", "nan"], ["--loads", "nan"]),
    (["--loads", "heavy"], ["--loads", "heavy"]),
    (["--roots", "0"], ["--roots", "0"]),
    (["--roots", "99"], ["--roots", "99"]),
    (["--roots", "1.5"], ["--roots", "1.5"]),
    (["--episodes", "-2"], ["--episodes", "-2"]),
    (["--episodes", "1000"], ["--episodes", "1000"]),
    (["--seeds", "0"], ["--seeds", "0"]),
    (["--seeds", "two"], ["--seeds", "two"]),
    (["--methods", "mara", "--seeds", "99"], ["--seeds 99: more training seeds than the methods ship (mara 3)",
                                              "at most 3"]),
    (["--methods", "fifo", "random", "--seeds", "2"], ["--seeds 2", "(random 1)"]),
    (["--quick=yes"], ["--quick"]),
    (["--out", ""], ["--out", "empty"]),
    (["--out", "/proc/x"], ["--out", "/proc/x"]),
    (["--out", "{file}"], ["--out", "is a file"]),
    (["--bank", "{tmp}/no-bank"], ["--bank", "no-bank"]),
    (["--bank", "{file}"], ["--bank", "not a directory"]),
    (["--bank", ""], ["--bank", "empty"]),
    (["--workloads", "{tmp}/no-workloads"], ["--workloads", "no-workloads"]),
    (["--workloads", "{file}"], ["--workloads", "not a directory"]),
    (["--cache", "{tmp}"], ["--cache", "is a directory"]),
    (["--cache", "/proc/x.sqlite"], ["--cache", "/proc/x.sqlite"]),
    (["--cache", ""], ["--cache", "empty"]),
    (["--jobs", "0"], ["--jobs", "0"]),
    (["--jobs", "100000"], ["--jobs", "100000"]),
    (["--jobs", "all"], ["--jobs", "all"]),
    (["--no-progress=1"], ["--no-progress"]),
    (["--readme", "{tmp}/no/README.md"], ["--readme", "README.md"]),
    (["--readme", "{tmp}"], ["--readme", "is a directory"]),
    (["--readme", "/proc/version"], ["--readme", "/proc/version"]),
    (["--unknown-flag"], ["--unknown-flag"]),
    (["--cache", "{tmp}/out/episodes.csv"], ["--cache", "episodes.csv", "writes this file itself"]),
    (["--readme", "{readme}"], ["--readme", "table2.md", "writes this file itself"]),
]


@pytest.mark.parametrize(("argv", "words"), FLAG_CASES, ids=[" ".join(a) for a, _ in FLAG_CASES])
def test_every_flag_is_checked_at_the_door(argv, words, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    a_file, readme = tmp_path / "a-file", tmp_path / "out" / "table2.md"
    a_file.write_text("x")
    readme.parent.mkdir()
    readme.write_text("## Results\n")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{file}", str(a_file)).replace("{readme}", str(readme))
            for a in argv]
    status, out, err = run_main([*SMALL, "--out", str(tmp_path / "out"), *argv], capsys)
    assert status == 2, err
    assert all(word in err for word in words), err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "out" / "episodes.csv").exists()


# ------------------------------------------------------------------------------------------ the result cache
def filled_cache(path: Path, entries: int = 400) -> list[str]:
    """A real cache with ``entries`` rows (several database pages); returns its keys."""
    cache = ResultCache(path)
    keys = [f"key{i:04d}" for i in range(entries)]
    cache.put_many({key: {"successes": float(i), "families": {"a": [1, 2]}} for i, key in enumerate(keys)})
    cache.close()
    return keys


def test_a_cache_path_that_is_a_directory_is_named(tmp_path):
    with pytest.raises(CacheError, match="is a directory") as raised:
        ResultCache(tmp_path)
    assert str(tmp_path) in str(raised.value) and "--cache" in str(raised.value)


def test_a_garbage_cache_file_is_named_with_what_to_do(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(CacheError) as raised:
        ResultCache(path)
    message = str(raised.value)
    assert str(path) in message and "delete" in message and "--cache" in message and "\n" not in message


def test_a_truncated_cache_is_named_with_what_to_do(tmp_path):
    path = tmp_path / "cache.sqlite"
    keys = filled_cache(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(CacheError) as raised:
        ResultCache(path).get_many(keys)
    assert str(path) in str(raised.value) and "delete" in str(raised.value)


def test_a_database_with_a_foreign_results_table_is_refused(tmp_path):
    path = tmp_path / "cache.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE results (id INTEGER, payload BLOB, extra TEXT)")
    with pytest.raises(CacheError, match="not an evaluation result cache") as raised:
        ResultCache(path)
    assert str(path) in str(raised.value)


def test_an_undecodable_cached_value_is_named(tmp_path):
    path = tmp_path / "cache.sqlite"
    ResultCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO results VALUES ('broken-key', '{not json')")
    with pytest.raises(CacheError, match="no readable result") as raised:
        ResultCache(path).get_many(["broken-key"])
    assert str(path) in str(raised.value) and "delete" in str(raised.value)


def hold_lock(path: Path) -> sqlite3.Connection:
    """Another connection holding the database locked, as a second process would while it writes."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_a_locked_cache_waits_with_one_message_then_gives_up_losing_nothing(tmp_path):
    path = tmp_path / "cache.sqlite"
    keys = filled_cache(path, 10)
    holder = hold_lock(path)
    told: list[str] = []
    with pytest.raises(CacheError, match="still locked") as raised:
        ResultCache(path, lock_wait_s=0.3, warn=told.append)
    holder.execute("ROLLBACK")
    holder.close()
    assert len(told) == 1 and "waiting" in told[0] and str(path) in told[0]
    assert str(path) in str(raised.value) and "--cache" in str(raised.value)
    assert len(ResultCache(path).get_many(keys)) == 10  # nothing lost


def test_a_lock_released_while_waiting_lets_the_run_go_on(tmp_path):
    path = tmp_path / "cache.sqlite"
    keys = filled_cache(path, 3)
    holder = hold_lock(path)
    told: list[str] = []

    def release() -> None:  # after the silent wait for a short lock, so the run says that it waits
        time.sleep(BUSY_S + 0.5)
        holder.execute("ROLLBACK")

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        cache = ResultCache(path, lock_wait_s=30, warn=told.append)
        cache.put_many({"new": {"x": 1.0}})
        assert set(cache.get_many([*keys, "new"])) == {*keys, "new"}
    finally:
        releaser.join()
        holder.close()
    assert len(told) == 1


def test_evaluate_names_an_unusable_cache_before_any_work(tmp_path, capsys):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is no database" * 100)
    status, out, err = run_main([*SMALL, "--out", str(tmp_path / "out"), "--cache", str(cache)], capsys)
    assert status == 2 and str(cache) in err and "delete" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and out == ""
    assert not (tmp_path / "out" / "episodes.csv").exists()


# ------------------------------------------------------------------------------------------ Ray
def test_an_unreachable_ray_address_fails_fast_with_one_line(tmp_path, capsys):
    started = time.monotonic()
    status, out, err = run_main([*SMALL, "--out", str(tmp_path / "out"), "--ray", "127.0.0.1:1"], capsys)
    elapsed = time.monotonic() - started
    assert status == 1 and "127.0.0.1:1" in err and len(err.strip().splitlines()) == 1, err
    assert elapsed < 30, f"took {elapsed:.0f} s"  # the promise of docs/ray.md, not a speed measurement


@pytest.mark.parametrize("address", ["nonsense", "host:port", "ray://:80", "127.0.0.1:70000"])
def test_a_malformed_ray_address_is_named(address):
    with pytest.raises(RayEvaluationError, match="must look like HOST:PORT") as raised:
        check_reachable(address)
    assert address in str(raised.value)


# ------------------------------------------------------------------------------------------ broken policies
@pytest.mark.parametrize(("kind", "words"), [
    ("shape", ["shape (6,)", "expected (7,)"]),
    ("nan", ["non-finite"]),
    ("range", ["outside 0 … 10"]),
    ("negative", ["outside 0 … 10"]),
    ("fraction", ["fractional"]),
    ("text", ["shape ()"]),
    ("words", ["<U4", "integer"]),
    ("raise", ["act raised ZeroDivisionError: the policy's own bug"]),
])
def test_a_policy_with_wrong_actions_ends_in_one_line_naming_it(kind, words, bank_dir, workloads_dir, tmp_path,
                                                                 capsys):
    policy = f"broken-{kind}=eval_toy_policy:BrokenActions:kind='{kind}'"
    status, _, err = run_main([*SMALL, "--policy", policy, "--bank", str(bank_dir), "--workloads",
                               str(workloads_dir), "--out", str(tmp_path / "out")], capsys)
    assert status == 2 and f"policy broken-{kind}:" in err and "Traceback" not in err, err
    assert all(word in err for word in words), err


def test_a_batched_policy_answering_for_too_few_episodes_is_named(bank_dir, workloads_dir, tmp_path, capsys):
    status, _, err = run_main([*SMALL, "--policy", "short=eval_toy_policy:BrokenBatch", "--bank", str(bank_dir),
                               "--workloads", str(workloads_dir), "--out", str(tmp_path / "out")], capsys)
    assert status == 2 and "policy short: act_batch returned actions of shape (0,); expected (1, 7)" in err, err


# ------------------------------------------------------------------------------------------ shipped results
def git_status_of_results() -> str:
    done = subprocess.run(["git", "status", "--porcelain", "results/"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_sliced_run_from_the_repository_root_leaves_results_untouched():
    """The slice of issue 39 (on the shipped bank and workloads, one episode): it names its scratch directory
    on its last line, writes its tables there, and ``git status results/`` stays as it was."""
    before = git_status_of_results()
    done = subprocess.run([sys.executable, "evaluate.py", "table2", "--methods", "fifo", "--task-sets", "id",
                           "--loads", "0.04", "--roots", "1", "--episodes", "1", "--jobs", "1", "--no-progress"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert git_status_of_results() == before
    last = done.stdout.strip().splitlines()[-1]
    assert "scratch directory" in last and "mara-eval-" in last
    scratch = Path(last.split("results in ", 1)[1].split("/ (", 1)[0])
    assert (scratch / "table2.md").is_file() and (scratch / "episodes.csv").is_file()
    assert scratch.resolve() != (ROOT / "results").resolve()


@pytest.mark.parametrize(("argv", "full"), [
    ([], True),
    (["table1", "table2", "table3", "fig4", "table4", "table5", "families", "clairvoyant", "compare"], True),
    (["--loads", "0.04", "0.05", "0.06", "0.07", "--roots", "5", "--episodes", "12"], True),
    (["table2"], False),
    (["--methods", "fifo"], False),
    (["--policy", "eval_toy_policy:ToyPolicy"], False),
    (["--task-sets", "id", "rl_ood", "vit_ood"], False),
    (["--loads", "0.04"], False),
    (["--roots", "4"], False),
    (["--episodes", "3"], False),
    (["--seeds", "1"], False),
    (["--quick"], False),
    (["--bank", "{bank}"], False),
])
def test_only_the_full_default_run_writes_results(argv, full, bank_dir, monkeypatch):
    from mara_agents.evaluation.cli import RESULTS, parse_args

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    args = parse_args([a.replace("{bank}", str(bank_dir)) for a in argv])
    assert (args.out == RESULTS) is full and args.scratch is not full
    assert parse_args([*argv[:0], "table2", "--out", "mine"]).out == Path("mine")


# ------------------------------------------------------------------------------------------ the API door
@pytest.mark.parametrize(("changes", "error", "words"), [
    ({"bank": "{tmp}/no-bank"}, ValueError, ["bank", "no-bank"]),
    ({"workloads": "{tmp}/a-file"}, ValueError, ["workloads", "not a directory"]),
    ({"roots": 0}, ValueError, ["roots", "0"]),
    ({"episodes": 2.5}, TypeError, ["episodes", "2.5"]),
    ({"max_seeds": 0}, ValueError, ["max_seeds", "0"]),
    ({"jobs": 10 ** 6}, ValueError, ["jobs", "1000000"]),
    ({"cache": "{tmp}"}, ValueError, ["cache", "is a directory"]),
    ({"ray": 6379}, TypeError, ["ray", "6379"]),
])
def test_the_evaluation_settings_check_every_field(changes, error, words, bank_dir, workloads_dir, tmp_path):
    from mara_agents.evaluation.harness import Settings

    (tmp_path / "a-file").write_text("x")
    fields = {"bank": bank_dir, "workloads": workloads_dir, "roots": 1, "episodes": 1, **changes}
    fields = {key: value.replace("{tmp}", str(tmp_path)) if isinstance(value, str) else value
              for key, value in fields.items()}
    with pytest.raises(error) as raised:
        Settings(**fields)
    assert all(word in str(raised.value) for word in words), raised.value


def test_a_policy_module_that_raises_on_import_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "raising_policy.py").write_text("raise RuntimeError('needs a GPU driver')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    status, out, err = run_main([*SMALL, "--out", str(tmp_path / "out"), "--policy", "raising_policy:Factory"], capsys)
    assert status == 2 and out == "" and "Traceback" not in err
    last = err.strip().splitlines()[-1]  # argparse's usage, then one error line
    assert last.startswith("evaluate.py: error: ") and last.endswith(
        "--policy raising_policy:Factory: importing module 'raising_policy' raised RuntimeError: needs a GPU driver")


def test_a_read_only_cache_in_out_is_one_line_naming_it_before_any_work(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache.sqlite"
    filled_cache(cache, entries=3)
    cache.chmod(0o444)
    can = os.access  # a root user may write a read-only file: the cache is refused by what os.access says
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: can(path, mode, **kw) and not (
        Path(path) == cache and mode & os.W_OK))
    status, out, err = run_main([*SMALL, "--out", str(tmp_path)], capsys)
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [f"error: {cache}: the result cache (or its folder) is read-only; make it "
                                        "writable, or pass --cache with another file (its finished episodes are "
                                        "then recomputed)"]
    assert not (tmp_path / "episodes.csv").exists()
