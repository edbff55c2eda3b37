"""Facts for the datasheet: model parameter counts, CPU time per family, and stress-task support.

``python -m curves.datasheet [--timings FILE] [--write]`` prints the cost table (and with ``--write`` puts
it and the stress table into curves/tables.md).  Parameter counts need each family's
input shape, so the family's data source is loaded (the shipped sources load in seconds).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from curves.bank import DEFAULT_BANK, load_bank
from curves.calibrate import DATASHEET, replace_block
from curves.catalog import FAMILIES, SHIPPED, get_family
from mara_common.checks import argparse_type, choice, existing_file, writable_file
from mara_common.cli import InputError, FILE_ERRORS, Parser, parse, run_command
from curves.data.errors import DataMissingError
from curves.data.sources import load_source
from curves.feasibility import new_minimum_batches
from curves.training import count_parameters


def input_info(name: str) -> dict:
    """The shape facts the family's model builder needs."""
    family = get_family(name)
    if family.source == "ale-pong":
        return {"frames": 4, "num_actions": 3}
    return load_source(family.source).info


def parameter_counts(name: str) -> dict[str, int]:
    """Trainable parameters of the family's model at each preset."""
    family = get_family(name)
    info = input_info(name)
    return {preset: count_parameters(family.build(preset, info)) for preset in family.sizes}


def cpu_seconds(timings: Path) -> dict[str, list[float]]:
    """Per-family wall times of finished curves from the generator's ``--timings`` file (last entry per curve);
    a line that is not such an entry raises :class:`InputError` naming the file and the line."""
    latest: dict[tuple[str, str, int], float] = {}
    for number, line in enumerate(timings.read_text().splitlines(), start=1):
        try:
            entry = json.loads(line)
            latest[(entry["family"], entry["split"], entry["index"])] = float(entry["seconds"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{timings}:{number}: not a timings entry of curves.generate --timings "
                             f"({type(exc).__name__}: {exc})") from None
    out: dict[str, list[float]] = defaultdict(list)
    for (family, _, _), seconds in latest.items():
        out[family].append(seconds)
    return out


def cost_table(families: list[str], timings: Path | None) -> str:
    """Markdown table of parameter counts per family and the CPU time its curves took (from ``timings``)."""
    seconds = cpu_seconds(timings) if timings else {}
    lines = ["| family | role | cpu-preset params | paper-preset params | curve length | curves timed | s / curve "
             "| CPU hours |", "|---|---|---|---|---|---|---|---|"]
    for name in families:
        family = get_family(name)
        try:
            params = parameter_counts(name)
        except DataMissingError:
            params = {"cpu": 0, "paper": 0}
        times = seconds.get(name, [])
        mean = sum(times) / len(times) if times else float("nan")
        lines.append(f"| {name} | {family.role.upper()} | {params['cpu']:,} | {params['paper']:,} | {family.length} | "
                     f"{len(times)} | {mean:.1f} | {sum(times) / 3600:.2f} |")
    total = sum(sum(seconds.get(n, [])) for n in families)
    lines.append(f"| **total** | | | | | {sum(len(seconds.get(n, [])) for n in families)} | | {total / 3600:.2f} |")
    return "\n".join(lines)


def stress_table(bank_root: Path = DEFAULT_BANK) -> str:
    """Per family, how many curves admit a stress "short" task (a new running minimum at s* in 22..35)."""
    bank = load_bank(bank_root)
    lines = ["| family | curves admitting a short task |", "|---|---|"]
    for name in sorted(bank.families):
        ids = bank.ids(name)
        ok = sum(new_minimum_batches(bank.cumavg(cid)).size > 0 for cid in ids)
        lines.append(f"| {name} | {ok} / {len(ids)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the datasheet's cost table; ``--write`` also puts it into curves/tables.md.  Flags and the files
    they name are checked before any work (one line, exit status 2)."""
    parser = Parser(prog="python -m curves.datasheet", description=__doc__.split("\n")[0])
    parser.add_argument("--timings", type=argparse_type(existing_file, "--timings"), default=None,
                        help="JSON lines written by the generator")
    parser.add_argument("--families", nargs="+", default=SHIPPED, metavar="FAMILY",
                        type=argparse_type(choice, "--families", choices=sorted(FAMILIES)))
    parser.add_argument("--write", action="store_true", help="replace the cost and stress tables in curves/tables.md")
    args = parse(parser, argv, lambda parsed: writable_file("--write", DATASHEET) if parsed.write else None)
    if isinstance(args, int):
        return args

    def work() -> int:
        table = cost_table(args.families, args.timings)
        print(table)
        if args.write:
            replace_block(DATASHEET, "<!-- cost:start -->", "<!-- cost:end -->", table)
            replace_block(DATASHEET, "<!-- stress:start -->", "<!-- stress:end -->", stress_table())
        return 0

    return run_command(work, FILE_ERRORS, lambda: "the datasheet is rewritten whole or not at all")


if __name__ == "__main__":
    raise SystemExit(main())
