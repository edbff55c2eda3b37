"""The command line's checks that span several ``evaluate.py`` flags: each refuses, through ``parser.error``
(one line, exit status 2), a combination the evaluation would otherwise play as something else than asked."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mara_agents.allocators.registry import POLICIES
from mara_agents.evaluation.abandon_table import is_abandoning
from mara_agents.evaluation.methods import is_import_path, spec_for


def check_abandon_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """An allocator that abandons tasks plays only in the abandon experiment (the others' env has no abandon
    action), and the abandon experiment plays registered allocators only and splices no README section."""
    abandoning = [m for m in args.methods or () if is_abandoning(m)]
    if abandoning and args.experiments != ["abandon"]:
        parser.error(f"--methods {abandoning[0]}: it abandons tasks (MARA-v0 with abandon=True), which only the "
                     "abandon experiment plays; run `evaluate.py abandon` alone")
    if "abandon" not in args.experiments:
        return
    users = [m for m in args.methods or () if is_import_path(m)] + args.policy
    if users:
        parser.error(f"{users[0]}: the abandon experiment plays registered allocators only")
    if args.readme is not None and args.experiments == ["abandon"]:
        parser.error("--readme: the abandon experiment writes results/abandon.md and splices no README section")


def check_seeds(parser: argparse.ArgumentParser, seeds: int, methods: Sequence[str] | None) -> None:
    """Refuse a ``--seeds`` above what the methods (those named, else every registered one) ship: the run
    would otherwise play fewer seeds than asked without a word."""
    shipped = {name: spec_for(name).seeds for name in (methods or POLICIES) if not is_import_path(name)}
    shipped = {name: found for name, found in shipped.items() if found}
    if shipped and seeds > max(map(len, shipped.values())):
        listed = ", ".join(f"{name} {len(found)}" for name, found in shipped.items())
        parser.error(f"--seeds {seeds}: more training seeds than the methods ship ({listed}); ask for at most "
                     f"{max(map(len, shipped.values()))}")
