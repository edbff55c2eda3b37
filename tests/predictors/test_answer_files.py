"""Answer files (``mara_agents.predictors.answer_files``): what is written is read back; a damaged file is
reported in one line, removed and rebuilt, never read; the folder stays within its bounds; concurrent
writers leave a consistent folder."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
import torch

from mara_agents.predictors import answer_files
from mara_agents.predictors.answer_files import AnswerFiles, main, store_root
from mara_agents.predictors.base import Prediction, PredictorQuery
from mara_agents.predictors.memo import StepMemo
from mara_agents.predictors.shared import SHARED, canary_query


def rows(first: int, count: int, width: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``count`` digests numbered from ``first`` and values that are a function of the number alone."""
    number = np.arange(first, first + count, dtype=np.uint64)
    digests = np.stack([number * np.uint64(0x9E3779B97F4A7C15), number], axis=1)
    values = number.astype(np.float64)[:, None] + np.arange(width)[None, :] / 10
    return digests, values


def test_written_rows_are_read_back(tmp_path):
    files = AnswerFiles(tmp_path / "predictor", capacity=100)
    for start in (0, 10):
        files.write(*rows(start, 10))
    digests, values = files.load(limit=100)
    order = np.argsort(digests[:, 1])
    assert np.array_equal(digests[order], rows(0, 20)[0]) and np.array_equal(values[order], rows(0, 20)[1])
    assert len(files.load(limit=15)[0]) == 10  # the newest files up to the limit


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_damaged_file_is_reported_in_one_line_removed_and_never_read(tmp_path, capsys, damage):
    files = AnswerFiles(tmp_path / "predictor", capacity=100)
    files.write(*rows(0, 10))
    files.write(*rows(10, 10))
    victim = files.files()[-1]
    data = bytearray(victim.read_bytes())
    if damage == "truncate":
        data = data[:len(data) - 5]
    elif damage == "flip":
        data[-3] ^= 0x40
    else:
        data = bytearray(b"not an answer file")
    victim.write_bytes(bytes(data))
    digests, _ = files.load(limit=100)
    assert np.array_equal(np.sort(digests[:, 1]), np.arange(10))  # only the intact file's rows
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(victim) in lines[0] and lines[0].startswith("warning:")
    assert not victim.exists()


class Linear:
    """A row-wise predictor with a model (so its answers are stored) that counts the rows it computes."""

    def __init__(self):
        self.model = torch.nn.Linear(1, 1)
        for parameter in self.model.parameters():
            torch.nn.init.zeros_(parameter)
        self.rows_asked = 0

    def predict(self, query: PredictorQuery) -> Prediction:
        self.rows_asked += len(query)
        return Prediction(remaining=query.history.sum(axis=1) * 2.0 + query.cap)


def test_a_truncated_store_is_rebuilt_with_the_same_answers(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARA_FM_STORE", str(tmp_path))
    SHARED.close()
    query = canary_query(12)
    first = StepMemo(Linear()).predict(query).remaining
    SHARED.close()
    (stored,) = tmp_path.rglob("*.answers")
    stored.write_bytes(stored.read_bytes()[:-8])
    rebuilt_by = Linear()
    again = StepMemo(rebuilt_by).predict(query).remaining
    SHARED.close()
    assert np.array_equal(first, again)
    assert rebuilt_by.rows_asked == 12 + 12 + 3 + 12  # the canary, then every row computed again
    assert str(stored) in capsys.readouterr().err
    (rebuilt,) = tmp_path.rglob("*.answers")  # the damaged file is gone, a new one holds the rows
    assert len(AnswerFiles(rebuilt.parent, 100).load(100)[0]) == 12


def test_the_folder_keeps_at_most_its_capacity_and_its_file_count(tmp_path, monkeypatch):
    files = AnswerFiles(tmp_path / "predictor", capacity=25)
    for start in range(0, 50, 10):
        files.write(*rows(start, 10))
    assert [answer_files.file_rows(path) for path in files.files()] == [10, 10]  # the two newest
    assert np.array_equal(np.sort(files.load(100)[0][:, 1]), np.arange(30, 50))
    monkeypatch.setattr(answer_files, "MAX_FILES", 3)
    for start in range(50, 90, 2):
        files.write(*rows(start, 2))
    assert len(files.files()) == 3


def test_the_root_keeps_the_most_recently_written_predictor_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(answer_files, "MAX_FOLDERS", 3)
    for name in "abcde":
        AnswerFiles(tmp_path / name, 100).write(*rows(0, 2))
    AnswerFiles(tmp_path / "b", 100).write(*rows(2, 2))  # b written again: the most recent
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b", "d", "e"]


def test_a_folder_holding_other_data_beside_the_store_is_never_trimmed(tmp_path, monkeypatch):
    monkeypatch.setattr(answer_files, "MAX_FOLDERS", 1)
    (tmp_path / "bank").mkdir()
    (tmp_path / "bank" / "manifest.json").write_text("{}")
    for name in "ab":
        AnswerFiles(tmp_path / name, 100).write(*rows(0, 2))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b", "bank"]


def write_many(folder: str, start: int) -> None:
    files = AnswerFiles(answer_files.Path(folder), capacity=10_000)
    for first in range(start, start + 400, 20):
        files.write(*rows(first % 300, 20))  # the two writers overlap on most rows


def test_two_writers_at_once_leave_a_consistent_folder(tmp_path, capsys):
    context = multiprocessing.get_context("fork")
    folder = tmp_path / "predictor"
    writers = [context.Process(target=write_many, args=(str(folder), start)) for start in (0, 100)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    digests, values = AnswerFiles(folder, capacity=10_000).load(10_000)
    assert len(digests) == 800 and capsys.readouterr().err == ""  # every file whole
    number = digests[:, 1]
    expected_digests, expected_values = rows(0, 300)
    assert np.array_equal(digests, expected_digests[number]) and np.array_equal(values, expected_values[number])
    assert not list(folder.glob(".*"))  # no temporary file left behind


def test_where_the_store_lives_and_how_to_clear_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARA_FM_STORE", "off")
    assert store_root() is None
    monkeypatch.delenv("MARA_FM_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert store_root() == tmp_path / "mara" / "fm-answers"
    AnswerFiles(store_root() / "abc", 100).write(*rows(0, 5))
    assert main([]) == 0 and "abc: 5 rows in 1 files" in capsys.readouterr().out
    assert main(["--clear"]) == 0 and not store_root().exists()
