"""The config dataclass rejects bad values with a ValueError that names the field."""

import gymnasium as gym
import pytest

import mara_env  # noqa: F401
from mara_env.config import MARAConfig


@pytest.mark.parametrize(("field", "value"), [
    ("num_nodes", -1), ("num_nodes", 0), ("max_active", 0), ("arrival_prob", 1.5), ("arrival_prob", -0.1),
    ("task_set", "nonexistent"), ("reward", "dense"), ("arrival_window", 0), ("shaping_beta", -1.0),
    ("curve_splits", ("holdout",)), ("num_nodes", 2.5),
])
def test_bad_value_names_the_field(field, value):
    with pytest.raises((ValueError, TypeError), match=field):
        MARAConfig(**{field: value})


def test_unknown_override_is_rejected(bank_dir):
    with pytest.raises(ValueError, match="unknown MARA config field"):
        gym.make("MARA-v0", bank=str(bank_dir), num_gpus=3)


def test_keyword_overrides_reach_the_simulator(bank_dir):
    env = gym.make("MARA-v0", bank=str(bank_dir), arrival_prob=0.06, task_set="rl_ood", reward="sparse",
                   num_nodes=3)
    cfg = env.unwrapped.config
    assert (cfg.arrival_prob, cfg.task_set, cfg.reward, cfg.num_nodes) == (0.06, "rl_ood", "sparse", 3)
    assert env.action_space.nvec.tolist() == [11, 11, 11]


def test_missing_bank_names_the_file(tmp_path):
    from curves.bank import BankError

    with pytest.raises(ValueError, match=f"bank: no such directory {tmp_path / 'nowhere'}"):
        gym.make("MARA-v0", bank=str(tmp_path / "nowhere"))
    with pytest.raises(BankError, match=str(tmp_path / "manifest.json")):
        gym.make("MARA-v0", bank=str(tmp_path))


def test_corrupt_bank_array_names_the_file(bank_dir, tmp_path):
    import shutil

    from curves.bank import BankError

    broken = tmp_path / "bank"
    shutil.copytree(bank_dir, broken)
    (broken / "toy_fast.npz").write_bytes(b"not a zip file")
    with pytest.raises(BankError, match="toy_fast.npz"):
        gym.make("MARA-v0", bank=str(broken))
