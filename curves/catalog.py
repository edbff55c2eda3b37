"""All families, registered in one place, and the two family sets a bank is built from.

``SHIPPED`` are the offline stand-ins of the shipped bank (Fashion-MNIST, espeak-ng yes/no, KJV Bible,
Atari Pong); ``PAPER`` are the paper's families, built instead when ``--data-root`` holds CIFAR-10, aclImdb
and waves_yesno.  Both list 8 ID families then 2 OOD families, in the paper's Table 6 order.
"""

from __future__ import annotations

from curves.families import FAMILIES, PRESETS, Family, get_family

SHIPPED = ["cnn_fmnist", "resnet18_fmnist", "resnet34_fmnist", "lstm_fmnist", "tsfm_espeak_1", "tsfm_espeak_2",
           "alstm_kjv_1", "alstm_kjv_2", "dagger_pong", "vit_fmnist"]
PAPER = ["cnn_cifar10", "resnet18_cifar10", "resnet34_cifar10", "lstm_cifar10", "tsfm_yesno_1", "tsfm_yesno_2",
         "alstm_imdb_1", "alstm_imdb_2", "dagger_pong", "vit_cifar10"]

__all__ = ["FAMILIES", "PAPER", "PRESETS", "SHIPPED", "Family", "get_family"]
