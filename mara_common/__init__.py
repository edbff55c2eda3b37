"""The bottom layer every package of the project may import, and which imports none of them.

* :mod:`~mara_common.checks` — input checks that name the argument and the value (and ``MAX_THREADS``).
* :mod:`~mara_common.atomic` — atomic file writes and versioned JSON reads.
* :mod:`~mara_common.cli` — the one command-line frame: one-line usage and input errors, SIGINT/SIGTERM.
* :mod:`~mara_common.config_cli` — command lines generated from settings dataclasses.
* :mod:`~mara_common.ray_support` — importing Ray and connecting to a cluster.
* :mod:`~mara_common.moved` — old import paths of moved modules, kept for one release with a warning.

It needs only the standard library and NumPy, so importing it costs nothing any package would not pay anyway.
"""

from mara_common.moved import install

install()
