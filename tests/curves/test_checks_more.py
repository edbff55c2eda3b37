"""The checks added for the agents' doors: torch device names, optional input files, on/off values, paths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mara_common import checks


def test_the_cpu_device_passes():
    assert checks.torch_device("device", "cpu") == "cpu"


@pytest.mark.parametrize("value", ["tpu", "cuda:x", "CUDA", 0, None])
def test_other_device_names_are_refused_naming_the_value(value):
    with pytest.raises((ValueError, TypeError), match="device") as raised:
        checks.torch_device("device", value)
    assert repr(value) in str(raised.value)


def test_a_gpu_this_machine_lacks_is_refused():
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"device 'cuda:{count}': torch sees"):
        checks.torch_device("device", f"cuda:{count}")


def test_an_optional_file_is_empty_or_an_existing_file(tmp_path):
    existing = tmp_path / "fm.pt"
    existing.write_bytes(b"x")
    assert checks.optional_file("fm_checkpoint", "") == ""
    assert checks.optional_file("fm_checkpoint", existing) == str(existing)
    with pytest.raises(ValueError, match="fm_checkpoint: no such file"):
        checks.optional_file("fm_checkpoint", tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="fm_checkpoint: .* is not a file"):
        checks.optional_file("fm_checkpoint", tmp_path)


def test_boolean_takes_true_and_false_only():
    assert checks.boolean("sample", True) is True and checks.boolean("sample", np.bool_(False)) is False
    for value in (0, 1, "yes", None):
        with pytest.raises(TypeError, match="sample must be True or False"):
            checks.boolean("sample", value)


def test_path_takes_any_non_empty_path_whether_or_not_it_exists(tmp_path):
    assert checks.path("checkpoint", str(tmp_path / "later.pt")) == tmp_path / "later.pt"
    with pytest.raises(ValueError, match="checkpoint must be a path, got an empty string"):
        checks.path("checkpoint", "")
    with pytest.raises(TypeError, match="checkpoint must be a path, got 5"):
        checks.path("checkpoint", 5)
    assert isinstance(checks.path("checkpoint", Path("a")), Path)
