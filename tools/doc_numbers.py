"""Doc numbers: every figure a page quotes names the generated file it comes from, and a check holds them equal.

A number in Markdown carries its source in an HTML comment right after it, which renders as nothing::

    MARA reaches 52.35 ± 3.62<!-- number: results/summary.json#grids/table2/cells/Average/MARA --> % ...

The source is a JSON or TOML file of the repository written by the command that measures (``evaluate.py``
writes ``results/summary.json``), and the key is the path of names inside it, separated by ``/``.  A
``{"mean", "std"}`` cell is compared with ``mean ± std`` or with the mean alone, a list with its length, a
string with the text just before the comment.  The written number's decimals set the rounding: ``5.5 ± 1.0``
agrees with a cell of 5.4963 ± 0.9829.

A table is a generated block between ``<!-- begin numbers: NAME -->`` and ``<!-- end numbers -->``, where NAME
is one of :data:`BLOCKS`; ``python tools/doc_numbers.py --write`` rewrites every block from its source, and
``python tools/doc_numbers.py`` (also ``tests/test_doc_numbers.py`` in ``make test``) exits 1 naming each
number or block that disagrees with its source as ``file:line``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from code_standards import Finding
from doc_links import ROOT, markdown_files, prose_lines, report

SUMMARY = "results/summary.json"
_MARKER = re.compile(r"<!-- number: (?P<source>[^#\s]+)#(?P<key>.+?) -->")
_WRITTEN = re.compile(r"(?P<mean>[−-]?\d[\d,]*(?:\.\d+)?)(?:\s*±\s*(?P<std>\d+(?:\.\d+)?))?\s*%?\**\s*$")
_BLOCK = re.compile(r"(<!-- begin numbers: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end numbers -->)", re.DOTALL)


@lru_cache(maxsize=None)
def _load(root: Path, source: str) -> Any:
    path = root / source
    if not path.is_file():
        raise ValueError(f"{source}: no such source file")
    return tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())


def source_value(root: Path, source: str, key: str) -> Any:
    """The value at ``key`` (names separated by ``/``; a name holding ``/`` writes it ``~1`` and ``~`` as ``~0``,
    as JSON Pointer does) in the generated file ``source``; ValueError naming the first missing name."""
    value = _load(root, source)
    for name in (part.replace("~1", "/").replace("~0", "~") for part in key.split("/")):
        if not isinstance(value, dict) or name not in value:
            raise ValueError(f"{source}#{key}: no '{name}' there")
        value = value[name]
    return value


def _decimals(text: str) -> int:
    return len(text.partition(".")[2])


def _same(written: str, value: float) -> bool:
    """Whether ``written`` is ``value`` rounded to as many decimals as it shows (so -0.0 is 0.0)."""
    return float(written.replace(",", "").replace("−", "-")) == float(f"{value:.{_decimals(written)}f}")


def marker_problem(before: str, value: Any) -> str | None:
    """Why the text ``before`` a marker does not end with ``value`` as written, or None when it does."""
    if isinstance(value, str):
        return None if before.endswith(value) else f"the source says {value!r}"
    written = _WRITTEN.search(before)
    if written is None:
        return "no number right before the marker"
    if isinstance(value, list):
        value = len(value)
    mean, std = (value.get("mean"), value.get("std")) if isinstance(value, dict) else (value, None)
    if not _same(written["mean"], mean) or (written["std"] and (std is None or not _same(written["std"], std))):
        expected = f"{mean:.{_decimals(written['mean'])}f}" + (
            f" ± {std:.{_decimals(written['std'])}f}" if written["std"] and std is not None else "")
        return f"written {written.group(0).strip()}, the source says {expected}"
    return None


def _marker_disagreements(root: Path, page: Path) -> list[Finding]:
    found = []
    for number, line in prose_lines(page.read_text()):
        for match in _MARKER.finditer(line):
            where = f"{match['source']}#{match['key']}"
            try:
                problem = marker_problem(_MARKER.sub("", line[:match.start()]), source_value(root, match["source"],
                                                                                            match["key"]))
            except ValueError as exc:
                problem = str(exc)
            if problem:
                found.append(Finding(page.relative_to(root).as_posix(), number, f"{problem} ({where})"))
    return found


# ---------------------------------------------------------------- generated blocks
README_COLUMNS = {"MARA": "MARA", "MARA-WLS": "MARA-WLS", "LARA": "LARA", "FIFO": "FIFO", "EDF": "EDF",
                  "FM-slack (ours)": "FM-slack", "MAT-IL ensemble (ours)": "MAT-IL ensemble (ours)",
                  "MaskablePPO (SB3)": "MaskablePPO (SB3, third-party)", "Oracle": "Oracle",
                  "Clairvoyant": "Clairvoyant"}


def _cell(cell: dict[str, Any], with_std: bool) -> str:
    return f"{cell['mean']:.2f}" + (f" ± {cell['std']:.2f}" if with_std and cell.get("std") is not None else "")


def readme_table2(root: Path) -> str:
    """The README's Table 2: the main columns, each task set's mean, the average ± std and the paper's average."""
    grids = source_value(root, SUMMARY, "grids")
    cells, paper = grids["table2"]["cells"], grids["compare"]["cells"]
    lines = ["| task set | " + " | ".join(README_COLUMNS) + " |", "|---|" + "---:|" * len(README_COLUMNS)]
    for row in grids["table2"]["rows"]:
        label = "average" if row == "Average" else row
        lines.append(f"| {label} | " + " | ".join(_cell(cells[row][col], row == "Average")
                                                  for col in README_COLUMNS.values()) + " |")
    published = [paper.get(f"Table 2 · Average · {col}", {}).get("Paper") for col in README_COLUMNS.values()]
    lines.append("| paper (average) | " + " | ".join("—" if p is None else _cell(p, False) for p in published) + " |")
    return "\n".join(lines) + "\n"


def make_run_sample(root: Path) -> str:
    """What ``make run`` prints at its end, trimmed: Table 2 (``results/table2.md``) with its first two and last
    two columns, and the closing line."""
    lines = (root / "results" / "table2.md").read_text().split("\n\n")[:2]
    rows = []
    for index, row in enumerate(lines[1].splitlines()):
        cells = row.strip("|").split("|")
        rows.append("|" + "|".join(cells[:3] + ["---:" if index == 1 else " … "] + cells[-2:]) + "|")
    return ("```text\n" + lines[0] + "\n\n" + "\n".join(rows) + "\n\n"
            + "… episodes computed, … reused from the cache; results in results/ (… s)\n```\n")


def registered_allocators(root: Path) -> str:
    """Every allocator ``make_policy`` knows, from the registry itself: name, column label, training seeds."""
    from mara_agents.allocators.registry import POLICIES

    lines = ["| name | column in the tables | training seeds |", "|---|---|---|"]
    lines += [f"| `{name}` | {method.label} | " + (", ".join(map(str, method.seeds)) if method.seeds else "—") + " |"
              for name, method in POLICIES.items()]
    return "\n".join(lines) + "\n"


_FEATURE_TUPLE = re.compile(r"^(?P<name>[A-Z_]+_FEATURES): tuple\[str, \.\.\.\] = \((?P<body>.*?)^\)", re.MULTILINE | re.DOTALL)
_FEATURE = re.compile(r"^\s*\"(?P<feature>\w+)\",\s*#\s*(?P<meaning>.*)$", re.MULTILINE)


def observation_features(root: Path) -> str:
    """Every observation feature by name, in order, with its meaning, read from ``mara_env/features.py`` (the
    tuples the env builds its arrays from, and their comments)."""
    lines = ["| array | index | feature | meaning |", "|---|---:|---|---|"]
    for group in _FEATURE_TUPLE.finditer((root / "mara_env" / "features.py").read_text()):
        array = group["name"].removesuffix("_FEATURES").lower()
        for index, feature in enumerate(_FEATURE.finditer(group["body"])):
            meaning = feature["meaning"].replace("|", "\\|")
            lines.append(f"| `{array}` | {index} | `{feature['feature']}` | {meaning} |")
    return "\n".join(lines) + "\n"


def config_options(root: Path) -> str:
    """Every ``MARAConfig`` field with its default and the first sentence of its docstring, read from
    ``mara_env/config.py`` (the field and the string literal after it), so the options table is the code's."""
    tree = ast.parse((root / "mara_env" / "config.py").read_text())
    config = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "MARAConfig")
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for field, after in zip(config.body, config.body[1:]):
        if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
            continue
        doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
        meaning = _first_sentence(" ".join(str(doc).split())).replace("``", "`").replace("|", "\\|")
        default = "—" if field.value is None else f"`{ast.unparse(field.value)}`"
        lines.append(f"| `{field.target.id}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


def _first_sentence(text: str) -> str:
    """``text`` up to its first full stop that ends a sentence (one followed by a space and a capital, or the end)."""
    match = re.match(r"(.*?\.)(?=\s+[A-Z(`]|$)", text)
    return match.group(1) if match else text


def quickstart_allocator(root: Path) -> str:
    """The quickstart's allocator class, as ``examples/quickstart.py`` defines it."""
    source = (root / "examples" / "quickstart.py").read_text()
    match = re.search(r"^class NearestToTarget:\n(?:(?:    .*)?\n)*?(?=\n\S)", source, re.MULTILINE)
    if match is None:
        raise ValueError("examples/quickstart.py: no class NearestToTarget")
    return "```python\n" + match.group(0).rstrip("\n") + "\n```\n"


BLOCKS: dict[str, Callable[[Path], str]] = {"readme-table2": readme_table2, "make-run-sample": make_run_sample,
                                            "registered-allocators": registered_allocators,
                                            "observation-features": observation_features,
                                            "config-options": config_options,
                                            "quickstart-allocator": quickstart_allocator}


def _rewritten(root: Path, text: str) -> str:
    """``text`` with every generated block outside code examples rewritten from its source."""
    prose = {number for number, _ in prose_lines(text)}

    def block(match: re.Match[str]) -> str:
        if text.count("\n", 0, match.start()) + 1 not in prose:
            return match.group(0)
        if match["name"] not in BLOCKS:
            raise ValueError(f"unknown numbers block '{match['name']}' (known: {', '.join(BLOCKS)})")
        return match.group(1) + BLOCKS[match["name"]](root) + match.group(4)
    return _BLOCK.sub(block, text)


def _block_disagreements(root: Path, page: Path) -> list[Finding]:
    text = page.read_text()
    try:
        regenerated = _rewritten(root, text)
    except ValueError as exc:
        return [Finding(page.relative_to(root).as_posix(), 1, str(exc))]
    if regenerated == text:
        return []
    line = next(i for i, (a, b) in enumerate(zip(text.splitlines() + [""], regenerated.splitlines() + [""]), 1)
                if a != b)
    return [Finding(page.relative_to(root).as_posix(), line,
                         "a numbers block differs from its source (python tools/doc_numbers.py --write)")]


def disagreements(root: Path = ROOT, files: list[Path] | None = None) -> list[Finding]:
    """Every marked number and generated block in ``files`` (default: every tracked Markdown file) that
    disagrees with its source."""
    _load.cache_clear()
    found = []
    for page in files if files is not None else markdown_files(root):
        found += _marker_disagreements(root, page) + _block_disagreements(root, page)
    return found


def write_blocks(root: Path = ROOT) -> list[Path]:
    """Rewrite every generated block from its source; the pages that changed."""
    from mara_common.atomic import atomic_write_text

    changed = []
    for page in markdown_files(root):
        text = page.read_text()
        new = _rewritten(root, text)
        if new != text:
            atomic_write_text(page, new)
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    """Check (default) or ``--write`` the doc numbers; exit 1 when one disagrees with its source."""
    parser = argparse.ArgumentParser(description="Check every documented number against its generated source.")
    parser.add_argument("--write", action="store_true", help="first rewrite every generated block")
    args = parser.parse_args(argv)
    if args.write:
        for page in write_blocks():
            print(f"rewrote {page.relative_to(ROOT)}")
    return report(disagreements())


if __name__ == "__main__":
    sys.exit(main())
