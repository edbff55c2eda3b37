"""The one error a missing dataset raises, so the CLI can print a set-up hint instead of a traceback."""

from mara_common.cli import InputError


class DataMissingError(InputError, RuntimeError):
    """A dataset is not installed; the message says which command installs it."""
