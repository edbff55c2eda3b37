"""Maintainer tools, not part of what users install: the code-standards check (``python tools/code_standards.py``),
the system-package installer behind ``make test``, and shipping a trained MAT policy into the repository
(``python -m tools.ship_checkpoints``)."""
