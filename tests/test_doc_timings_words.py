"""The README's timings (tools/timings.py writes docs/timings.json) and the docs' word counts
(tools/doc_words.py): what each records or counts, and the one line a bad input gets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import doc_words  # noqa: E402
import timings  # noqa: E402


def test_set_records_a_figure_beside_the_others_in_seconds_and_minutes(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"install": timings.entry("make install", 36.0, "2030-01-01", "h", "c", None)}))
    status = timings.main(["--file", str(path), "set", "ci", "--command", ".ci/run", "--wall-s", "433.4",
                           "--date", "2030-01-02", "--host", "2 cores", "--commit", "abc1234", "--tests", "17"])
    recorded = json.loads(path.read_text())
    assert status == 0 and set(recorded) == {"ci", "install"}
    assert recorded["ci"] == {"command": ".ci/run", "wall_s": 433, "wall_min": 7.2, "date": "2030-01-02",
                              "commit": "abc1234", "host": "2 cores", "tests": 17}


def test_run_times_the_command_and_counts_the_tests_pytest_reports(tmp_path):
    path = tmp_path / "timings.json"
    command = [sys.executable, "-c", "import time; time.sleep(0.3); print('== 3 failed, 12 passed in 1.0s ==')"]
    assert timings.main(["--file", str(path), "run", "suite", "--", *command]) == 0
    recorded = json.loads(path.read_text())["suite"]
    assert recorded["tests"] == 12 and recorded["command"].endswith("in 1.0s ==')")
    assert 0 <= recorded["wall_s"] <= 60 and recorded["host"]


def test_terminating_the_timer_stops_the_command_and_records_nothing(tmp_path):
    path = tmp_path / "timings.json"
    command = [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(120)"]
    timer = subprocess.Popen([sys.executable, str(ROOT / "tools" / "timings.py"), "--file", str(path), "run", "x",
                              "--", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = int(timer.stdout.readline())
    timer.send_signal(signal.SIGTERM)
    assert timer.wait(timeout=60) == 130 and "nothing recorded" in timer.stderr.read()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.1)
    assert not _running(child) and not path.exists()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_command_that_fails_records_nothing_and_passes_its_status_on(tmp_path, capsys):
    path = tmp_path / "timings.json"
    assert timings.main(["--file", str(path), "run", "x", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert not path.exists() and "nothing recorded" in capsys.readouterr().err


def test_a_bad_date_or_a_missing_command_is_one_line_and_status_2(tmp_path, capsys):
    path = tmp_path / "timings.json"
    bad_date = ["set", "x", "--command", "c", "--wall-s", "1", "--date", "yesterday", "--host", "h", "--commit", "c"]
    assert timings.main(["--file", str(path), *bad_date]) == 2
    assert timings.main(["--file", str(path), "run", "x", "--"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "'yesterday'" in lines[0] and "after --" in lines[1] and not path.exists()


def test_an_option_after_the_entry_name_is_named_as_no_such_command(tmp_path, capsys):
    path = tmp_path / "timings.json"
    assert timings.main(["--file", str(path), "run", "x", "--host-note", "busy", "--", "true"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["timings: run: no such command '--host-note' (options go before the entry's name)"]
    assert not path.exists()


def test_the_readme_cites_every_recorded_timing_the_shipped_file_holds():
    recorded = timings.load()
    readme = (ROOT / "README.md").read_text()
    assert recorded and all(f"docs/timings.json#{name}/" in readme for name in recorded)


def _docs(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "research").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# Front\n\none two <!-- number: x.json#k --> three\n")
    (tmp_path / "docs" / "guide.md").write_text("a b c d\n")
    (tmp_path / "docs" / "research" / "study.md").write_text("e f\n")
    (tmp_path / "docs" / "README.md").write_text(
        "# Index\n\n## User guide\n\n[guide](guide.md) and [again](guide.md#part)\n\n"
        "## Research log\n\n[study](research/study.md)\n")
    return tmp_path


def test_the_word_counts_follow_the_index_and_count_each_page_once_without_markers(tmp_path):
    counted = doc_words.part_words(_docs(tmp_path))
    assert counted == {"User guide": {"README.md": 5, "docs/guide.md": 4},
                       "Research log": {"docs/research/study.md": 2}}


def test_an_index_without_a_part_is_named(tmp_path):
    root = _docs(tmp_path)
    (root / "docs" / "README.md").write_text("# Index\n\n## User guide\n\n[guide](guide.md)\n")
    try:
        doc_words.part_words(root)
    except ValueError as exc:
        assert "Research log" in str(exc)
    else:
        raise AssertionError("no error for an index without a research log")
