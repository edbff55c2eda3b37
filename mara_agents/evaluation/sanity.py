"""Invariants every evaluation must satisfy, checked on the per-episode rows before anything is reported.

Oracle ≥ Clairvoyant ≥ successes of every method on every episode (see ``clairvoyant``); within every task
family too, no schedule completes more tasks than the Oracle counts feasible; and every rate lies in [0, 1].
A violation means a bug in the simulator, a policy's action handling, or the bound itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mara_agents.evaluation.methods import CLAIRVOYANT, ORACLE

RATES = ("success_rate", "utilisation", "queue_full")


def violations(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Human-readable descriptions of every broken invariant (empty when all hold)."""
    rows = list(rows)
    ident = ("task_set", "load", "root", "episode")
    bounds = {(r["method"], *(r[k] for k in ident)): r["successes"]
              for r in rows if r["method"] in (ORACLE, CLAIRVOYANT)}
    feasible = {tuple(r[k] for k in ident): r.get("families") or {} for r in rows if r["method"] == ORACLE}
    found = []
    for row in rows:
        where = (f"{row['method']} seed={row['seed']} {row['task_set']} p={row['load']} "
                 f"root {row['root']} episode {row['episode']}")
        for rate in RATES:
            value = row.get(rate)
            if value is not None and not math.isnan(value) and not 0.0 <= value <= 1.0:
                found.append(f"{where}: {rate} = {value} outside [0, 1]")
        key = tuple(row[k] for k in ident)
        oracle, clairvoyant = bounds.get((ORACLE, *key)), bounds.get((CLAIRVOYANT, *key))
        if row["method"] == CLAIRVOYANT and oracle is not None and row["successes"] > oracle:
            found.append(f"{where}: Clairvoyant {row['successes']} > Oracle {oracle}")
        if row["method"] not in (ORACLE, CLAIRVOYANT) and clairvoyant is not None and row["successes"] > clairvoyant:
            found.append(f"{where}: {row['successes']} successes > Clairvoyant {clairvoyant}")
        for family, (tasks, won) in (row.get("families") or {}).items():
            limit = feasible.get(key, {}).get(family)
            if limit is not None and (limit[0] != tasks or won > limit[1]):
                found.append(f"{where}: {family} {won}/{tasks} against Oracle {limit[1]}/{limit[0]}")
    return found
