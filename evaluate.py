"""Evaluate every allocator on the fixed evaluation workloads and write the paper's tables and figures.

    python evaluate.py                  # all experiments: Tables 1–5, Figure 4, Clairvoyant bound, paper vs ours
    python evaluate.py --quick          # smoke test (written to a scratch directory)
    python evaluate.py --help           # experiments and options

The work happens in :mod:`mara_agents.evaluation`; this file is only the entry point.  A bad flag or an
unusable input file is one line on stderr and exit status 2; SIGINT or SIGTERM stops every worker process and
exits with status 130 (finished episodes stay cached; see :mod:`mara_common.cli`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evaluate.py`` with ``argv``; returns the exit status (usage errors exit 2 through argparse)."""
    from mara_agents.evaluation.cli import ERRORS, INTERRUPTED
    from mara_agents.evaluation.cli import main as evaluate_main
    from mara_common.cli import run_command

    return run_command(lambda: evaluate_main(argv), ERRORS, INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
