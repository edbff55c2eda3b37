"""Check three of the project's code standards: two over the library code, one over the tests.

* No function longer than ``MAX_FUNCTION_LINES`` lines (``def`` line to last line, docstring included):
  a reader should see a whole function on one screen.
* No comment or string line reports a measurement, a run number, a date or the story of a change (at most
  ``MAX_MEASUREMENT_LINES``, which is 0): figures and history belong in ``docs/``, where they can be kept
  current; code says what and why.  A line where such a figure is a definition, not a measurement (a unit
  conversion, a duration a constant works out to), says so with ``DEFINITION_MARKER`` in a comment on it.
* No test asserts only that a call returned something (``assert f(...) is not None``): a call that returns
  at all passes it, so it checks nothing a test should.  (Whether an ``.all()`` runs over an array that may be
  empty cannot be told from the source; tests state the size they expect instead.)

The library is ``mara_common/``, ``curves/``, ``mara_env/``, ``mara_agents/``, ``train.py`` and ``evaluate.py``,
and the commands beside it (``studies/``, ``benchmarks/``, ``tools/ship_checkpoints.py``); examples are not
checked. ``python tools/code_standards.py`` prints every finding and exits 1 when a standard is broken;
``tests/test_code_standards.py`` asserts the same.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("mara_common", "curves", "mara_env", "mara_agents", "train.py", "evaluate.py", "studies", "benchmarks",
           "tools/ship_checkpoints.py")
MAX_FUNCTION_LINES = 60
MAX_MEASUREMENT_LINES = 0
DEFINITION_MARKER = "standards: definition"

# A figure's number: not part of a word, a version ("1.2.3") or a format spec ("{x:24s}", "{n:08x}").
_NUMBER = r"(?<![\w.:<>^=])\d+(?:\.\d+)?"
# What a measurement, a run number, a date or a story looks like in prose: "run 18", "runs 8-10", "62.46 %",
# "12 ms", "3 min", "2 CPU hours", "1.8 MB", "70 MiB", "5× more", "3x", "2 times faster", "2026-12-05",
# "Dec 2026", the word "measured", and the phrases that tell what a change did ("used to take", "before this
# change", "we found").
# A percentage followed by "quantile" names a statistic ("the 10 % quantile"), not a figure; "3×3" and "8 × 4"
# are shapes, not speed-ups.
MEASUREMENT = re.compile(
    r"\bruns? \d+"
    r"|(?<![.\w])\d+(?:\.\d+)? ?%(?![a-zA-Z(]| quantile)"
    rf"|{_NUMBER} ?(?:(?:CPU|GPU|core|wall) )?(?:ms|µs|us|s|secs?|seconds?|min|mins|minutes?|h|hrs?|hours?)\b"
    rf"|{_NUMBER} ?(?:[kMGT]i?B|KiB)\b"
    rf"|{_NUMBER} ?×(?! ?\d)|{_NUMBER}x\b|{_NUMBER} (?:x|times) (?:faster|slower|fewer|more|less|smaller|larger)\b"
    r"|\b20\d\d-\d\d-\d\d\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* 20\d\d\b"
    r"|\bmeasured\b"
    r"|\bused to (?:be|take|cost|run|need|hold|give|make|do)\b|\b(?:before|after|since) this change\b"
    r"|\bturned out\b|\bwe (?:found|saw|observed|measured|tried)\b|\bpreviously\b|\boriginally\b"
    r"|\bat the time\b|\bin the past\b",
    re.IGNORECASE,
)
# Comments and string literals (an f-string's literal parts are their own tokens from Python 3.12 on).
PROSE_TOKENS = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


@dataclass(frozen=True)
class Finding:
    """One place in the library that a standard counts: ``path:line`` and what was found there."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def library_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of the library under ``root``, sorted."""
    files: list[Path] = []
    for name in LIBRARY:
        path = root / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else [])
    return files


def long_functions(root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[Finding]:
    """Functions and methods of the library longer than ``limit`` lines."""
    found = []
    for path in library_files(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(Finding(_rel(path, root), node.lineno, f"{node.name} is {length} lines"))
    return found


def measurement_lines(root: Path = ROOT) -> list[Finding]:
    """Comment and string lines of the library that report a measurement, a run number, a date or a story,
    except lines marked as definitions (``DEFINITION_MARKER`` in a comment)."""
    found = []
    for path in library_files(root):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        seen = {token.start[0] for token in tokens
                if token.type == tokenize.COMMENT and DEFINITION_MARKER in token.string}
        for token in tokens:
            if token.type not in PROSE_TOKENS:
                continue
            for number, piece in enumerate(token.string.splitlines(), start=token.start[0]):
                if number not in seen and MEASUREMENT.search(piece):
                    seen.add(number)
                    found.append(Finding(_rel(path, root), number, lines[number - 1].strip()))
    return found


def vacuous_asserts(root: Path = ROOT) -> list[Finding]:
    """Asserts under ``tests/`` whose whole claim is ``<call> is not None``."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            claim = node.test if isinstance(node, ast.Assert) else None
            if (isinstance(claim, ast.Compare) and isinstance(claim.left, ast.Call)
                    and [type(op) for op in claim.ops] == [ast.IsNot]
                    and isinstance(claim.comparators[0], ast.Constant) and claim.comparators[0].value is None):
                found.append(Finding(_rel(path, root), node.lineno, "asserts only that a call returned something"))
    return found


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root to check")
    args = parser.parse_args(argv)
    long = long_functions(args.root)
    measured = measurement_lines(args.root)
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(long)}")
    for finding in long:
        print(f"  {finding}")
    print(f"lines reporting measurements, run numbers, dates or stories: {len(measured)} "
          f"(at most {MAX_MEASUREMENT_LINES})")
    for finding in measured:
        print(f"  {finding}")
    vacuous = vacuous_asserts(args.root)
    print(f"test asserts that cannot fail: {len(vacuous)}")
    for finding in vacuous:
        print(f"  {finding}")
    return 0 if not long and not vacuous and len(measured) <= MAX_MEASUREMENT_LINES else 1


if __name__ == "__main__":
    sys.exit(main())
