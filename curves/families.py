"""The registry of task families: what each trains, on which data, with which recipe ranges and budget rule.

A family couples a data source, a model builder with per-preset sizes, the batch sizes its recipes draw from,
and its available-time (budget) rule from the paper's Table 6.  Curves run to twice the largest budget.
``cpu`` sizes are narrowed so the shipped bank regenerates in about two CPU hours; ``paper`` sizes are the
standard networks for GPU users.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from curves.bank import FamilySpec
from curves.data.sources import load_source
from curves.models.alstm import AttentionLSTM
from curves.models.audio_transformer import AudioTransformer
from curves.models.cnn import SmallCNN
from curves.models.nature_cnn import NatureCNN
from curves.models.resnet import ResNet
from curves.models.row_lstm import RowLSTM
from curves.models.vit import SimpleViT
from curves.recipe import Recipe
from curves.training import train_classifier

PRESETS = ("cpu", "paper")
IMAGE_BATCHES = (16, 32, 64)
AUDIO_BATCHES = (1, 2, 4)
TEXT_BATCHES = (4, 8)
IMAGE_BUDGET = {"kind": "interval", "low": 285, "high": 315}
AUDIO_BUDGET = {"kind": "interval", "low": 292, "high": 350}
TEXT_BUDGET = {"kind": "interval", "low": 312, "high": 345}
OOD_BUDGET = {"kind": "set", "values": [285, 295, 305, 315]}

Trainer = Callable[["Family", Recipe, int, Callable[[float], None], str, "str | Path | None", str], None]


def _classifier_trainer(family: "Family", recipe: Recipe, n_batches: int, log: Callable[[float], None], preset: str,
                        data_root: str | Path | None, device: str) -> None:
    data = load_source(family.source, data_root)
    train_classifier(lambda: family.build(preset, data.info), data.inputs, data.labels, recipe, n_batches, log, device)


def _source_loads(family: "Family", data_root: str | Path | None) -> None:
    """Load the family's data source (cached for the training that follows)."""
    load_source(family.source, data_root)


@dataclass(frozen=True)
class Family:
    """One task family.  ``sizes[preset]`` are the model builder's keyword arguments."""

    name: str
    role: str
    modality: str
    dataset: str
    model: str
    source: str
    builder: Callable[..., nn.Module]
    sizes: dict[str, dict[str, Any]]
    batch_sizes: tuple[int, ...]
    budget: dict[str, Any]
    notes: str = ""
    trainer: Trainer = field(default=_classifier_trainer)
    data_check: Callable[["Family", "str | Path | None"], None] = field(default=_source_loads)

    @property
    def max_budget(self) -> int:
        """The largest available time of the family's budget rule."""
        return int(self.budget["high"] if self.budget["kind"] == "interval" else max(self.budget["values"]))

    @property
    def length(self) -> int:
        """Curve length: twice the largest available time (paper Appendix A.2)."""
        return 2 * self.max_budget

    def build(self, preset: str, info: dict[str, Any]) -> nn.Module:
        """A freshly initialised model of this family at the given preset's size."""
        return self.builder(**info, **self.sizes[preset])

    def spec(self, preset: str) -> FamilySpec:
        """The bank description (ε rule left to :mod:`curves.calibrate`)."""
        size = ", ".join(f"{k}={v}" for k, v in self.sizes[preset].items())
        notes = (f"{self.notes} preset={preset} ({size}); batch sizes {list(self.batch_sizes)}; "
                 "lr log-uniform [3e-4, 3e-3]")
        return FamilySpec(self.name, self.role, self.modality, self.dataset, self.model, None, dict(self.budget),
                          notes.strip())

    def check_data(self, data_root: str | Path | None = None) -> None:
        """Raise :class:`~curves.data.errors.DataMissingError`, with the install hint, when this family's data
        is not installed: a command then refuses before training anything rather than skipping the family."""
        self.data_check(self, data_root)

    def train(self, recipe: Recipe, n_batches: int, log: Callable[[float], None], preset: str = "cpu",
              data_root: str | Path | None = None, device: str = "cpu") -> None:
        """Run one curve's training, passing every batch's loss to ``log``."""
        self.trainer(self, recipe, n_batches, log, preset, data_root, device)


def _resnet(depth: int) -> Callable[..., nn.Module]:
    def build(in_channels: int, image_size: int, num_classes: int, width: int, stem_stride: int) -> nn.Module:
        return ResNet(depth, in_channels, num_classes, width=width, stem_stride=stem_stride)
    return build


def _image_families(data: str, source: str, dataset: str) -> list[Family]:
    """The paper's five image families (CNN, ResNet-18, ResNet-34, LSTM: ID; SimpleViT: OOD) on one dataset."""
    common = dict(modality="image", dataset=dataset, source=source, batch_sizes=IMAGE_BATCHES)
    return [
        Family(f"cnn_{data}", "id", model="SmallCNN (2 conv blocks + MLP)", builder=SmallCNN,
               sizes={"cpu": {"width": 8, "hidden": 64}, "paper": {"width": 32, "hidden": 256}},
               budget=IMAGE_BUDGET, **common),
        Family(f"resnet18_{data}", "id", model="ResNet-18 (BasicBlock, small-image stem)", builder=_resnet(18),
               sizes={"cpu": {"width": 8, "stem_stride": 2}, "paper": {"width": 64, "stem_stride": 1}},
               budget=IMAGE_BUDGET, **common),
        Family(f"resnet34_{data}", "id", model="ResNet-34 (BasicBlock, small-image stem)", builder=_resnet(34),
               sizes={"cpu": {"width": 8, "stem_stride": 2}, "paper": {"width": 64, "stem_stride": 1}},
               budget=IMAGE_BUDGET, **common),
        Family(f"lstm_{data}", "id", model="LSTM over image rows", builder=RowLSTM,
               sizes={"cpu": {"hidden": 64, "layers": 1}, "paper": {"hidden": 128, "layers": 2}},
               budget=IMAGE_BUDGET, **common),
        Family(f"vit_{data}", "ood", model="SimpleViT (sin-cos 2-D positions, mean pool)", builder=SimpleViT,
               sizes={"cpu": {"patch": 7 if data == "fmnist" else 8, "dim": 64, "depth": 2, "heads": 4, "mlp": 128},
                      "paper": {"patch": 7 if data == "fmnist" else 4, "dim": 256, "depth": 6, "heads": 8, "mlp": 512}},
               budget=OOD_BUDGET, **common),
    ]


def _text_families(data: str, source: str, dataset: str) -> list[Family]:
    """Two attention-LSTM families of different sizes (ID)."""
    common = dict(modality="text", dataset=dataset, source=source, batch_sizes=TEXT_BATCHES, budget=TEXT_BUDGET,
                  model="Attention LSTM (embedding, LSTM, additive attention pooling)", builder=AttentionLSTM)
    return [
        Family(f"alstm_{data}_1", "id",
               sizes={"cpu": {"embed": 32, "hidden": 32}, "paper": {"embed": 128, "hidden": 128}}, **common),
        Family(f"alstm_{data}_2", "id",
               sizes={"cpu": {"embed": 64, "hidden": 64}, "paper": {"embed": 256, "hidden": 256}}, **common),
    ]


def _audio_families(data: str, source: str, dataset: str) -> list[Family]:
    """Two Transformer-encoder families of different sizes (ID) that label all 8 words of a clip."""
    common = dict(modality="audio", dataset=dataset, source=source, batch_sizes=AUDIO_BATCHES, budget=AUDIO_BUDGET,
                  model="Transformer encoder over log-mel frames, one attention read-out per word",
                  builder=AudioTransformer)
    return [
        Family(f"tsfm_{data}_1", "id", sizes={"cpu": {"dim": 32, "depth": 2, "heads": 2, "mlp": 64},
                                             "paper": {"dim": 64, "depth": 2, "heads": 4, "mlp": 128}}, **common),
        Family(f"tsfm_{data}_2", "id", sizes={"cpu": {"dim": 64, "depth": 3, "heads": 4, "mlp": 128},
                                             "paper": {"dim": 128, "depth": 4, "heads": 4, "mlp": 256}}, **common),
    ]


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> None:
    """Add a family to the registry (modules for other modalities call this on import)."""
    FAMILIES[family.name] = family


for _family in _image_families("fmnist", "fashion-mnist", "Fashion-MNIST (Debian dataset-fashion-mnist, train split)"):
    register(_family)
for _family in _image_families("cifar10", "cifar10", "CIFAR-10 (python batches under --data-root)"):
    register(_family)
ESPEAK_DATASET = "espeak-ng synthetic spoken yes/no words, varied voices and noise (1000 clips)"
for _family in (_audio_families("espeak", "espeak-yesno", ESPEAK_DATASET)
                + _audio_families("yesno", "waves-yesno", "OpenSLR YESNO waves_yesno (under --data-root)")
                + _text_families("kjv", "kjv", "KJV Bible verses, Old vs New Testament, balanced (Debian bible-kjv)")
                + _text_families("imdb", "imdb", "IMDB aclImdb train reviews (under --data-root)")):
    register(_family)


def _dagger_trainer(*args: Any) -> None:
    from curves.dagger import train_dagger  # imported lazily: only this family needs ale-py
    train_dagger(*args)


def _pong_starts(family: Family, data_root: str | Path | None) -> None:
    """Start the Pong environment once (ale-py and its ROM are this family's data)."""
    from curves.dagger import make_env
    make_env(0).close()


register(Family("dagger_pong", "ood", modality="rl", dataset="Atari Pong (ALE/Pong-v5, frameskip 2, ale-py ROM)",
                model="DAgger policy: Nature CNN on 4 stacked grayscale frames", source="ale-pong",
                builder=NatureCNN, sizes={"cpu": {"widths": (16, 32, 32, 256), "side": 40},
                                                  "paper": {"widths": (32, 64, 64, 512), "side": 80}},
                batch_sizes=IMAGE_BATCHES, budget=OOD_BUDGET, trainer=_dagger_trainer, data_check=_pong_starts,
                notes="Scripted RAM expert (paddle to ball height); beta = 0.5^round, 200 steps per 50 batches."))


def get_family(name: str) -> Family:
    """Look a family up (after :mod:`curves.catalog` registered them all), listing the known names on a miss."""
    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[name]
