"""The one error a missing dataset raises, so the CLI can print a set-up hint instead of a traceback."""


class DataMissingError(RuntimeError):
    """A dataset is not installed; the message says which command installs it."""
