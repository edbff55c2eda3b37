"""Evaluate every allocator on the fixed evaluation workloads and write the paper's tables and figures.

    python evaluate.py                  # all experiments: Tables 1–5, Figure 4, Clairvoyant bound, paper vs ours
    python evaluate.py --quick          # smoke test
    python evaluate.py --help           # experiments and options

The work happens in :mod:`mara_agents.evaluation`; this file is only the entry point.
"""

from __future__ import annotations

import sys

from curves.bank import BankError
from mara_agents.evaluation.cli import main
from mara_env.workload import WorkloadError

if __name__ == "__main__":
    try:
        sys.exit(main())
    except (WorkloadError, BankError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("\ninterrupted: finished episodes are cached; run the same command again to resume", file=sys.stderr)
        sys.exit(130)
