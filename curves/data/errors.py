"""The one error a missing dataset raises, so the CLI can print a set-up hint instead of a traceback."""

from __future__ import annotations

import os

from mara_common.cli import InputError


class DataMissingError(InputError, RuntimeError):
    """A dataset is not installed; the message says which command installs it."""


def missing_under(what: str, data_root: str | os.PathLike[str] | None, download: str) -> DataMissingError:
    """The error for a data set looked for under ``--data-root``: it names the folder searched, or says that no
    ``--data-root`` was given, and how to install the data (``download``: "download X from URL")."""
    if data_root is None:
        return DataMissingError(f"{what} not found: no --data-root given; {download}, extract it into a folder and "
                                "pass that folder as --data-root")
    return DataMissingError(f"{what} not found under {data_root}; {download} and extract it there")
