"""Evaluate every allocator on the fixed evaluation workloads and write the paper's tables and figures.

    python evaluate.py                  # all experiments: Tables 1–5, Figure 4, Clairvoyant bound, paper vs ours
    python evaluate.py --quick          # smoke test (written to a scratch directory)
    python evaluate.py --help           # experiments and options

The work happens in :mod:`mara_agents.evaluation`; this file is only the entry point.  A bad flag or an
unusable input file is one line on stderr and exit status 2; SIGINT or SIGTERM stops every worker process and
exits with status 130 (finished episodes stay cached; see :mod:`mara_agents.interrupt`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evaluate.py`` with ``argv``; returns the exit status (usage errors exit 2 through argparse)."""
    from curves.bank import BankError
    from mara_agents.checkpoint_io import CheckpointError
    from mara_agents.evaluation.cache import CacheError
    from mara_agents.evaluation.cli import main as evaluate_main
    from mara_agents.evaluation.methods import MethodError
    from mara_agents.interrupt import run_command
    from mara_env.workload import WorkloadError

    return run_command(lambda: evaluate_main(argv),
                       (WorkloadError, BankError, MethodError, CheckpointError, CacheError, OSError),
                       "finished episodes are cached; run the same command again to resume")


if __name__ == "__main__":
    sys.exit(main())
