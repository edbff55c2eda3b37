"""How long the documentation takes to read: the words of the user guide and of the research log.

The two parts are the pages ``docs/README.md`` links under its "User guide" and "Research log" headings (a
page linked twice, or under a ``page.md#section`` link, counts once); the repository's front ``README.md``
counts with the guide.  A word is a whitespace-separated token of the page's text once HTML comments (the
doc-number markers) are dropped, code and tables included, since a reader reads them too.

``python tools/doc_words.py`` prints one line per page and each part's total; ``--totals`` prints only the
totals.  A missing index or a missing heading is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from doc_links import ROOT

INDEX = Path("docs/README.md")
PARTS = ("User guide", "Research log")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")
_SECTION = re.compile(r"^## ", re.MULTILINE)


def words(text: str) -> int:
    """The words a reader reads in ``text``: tokens outside HTML comments."""
    return len(_COMMENT.sub(" ", text).split())


def part_pages(root: Path, heading: str) -> list[Path]:
    """The pages the index links in its section whose heading starts with ``heading``, in order, each once."""
    index = root / INDEX
    sections = [s for s in _SECTION.split(index.read_text()) if s.startswith(heading)]
    if not sections:
        raise ValueError(f"{INDEX}: no section headed '## {heading}'")
    pages: list[Path] = []
    for target in _LINK.findall(sections[0]):
        page = (index.parent / target).resolve()
        if page not in pages:
            pages.append(page)
    return pages


def part_words(root: Path) -> dict[str, dict[str, int]]:
    """Per part, each page's words by its path from ``root`` (the guide's first: the front README)."""
    counted: dict[str, dict[str, int]] = {}
    for heading in PARTS:
        pages = part_pages(root, heading)
        if heading == PARTS[0]:
            pages.insert(0, (root / "README.md").resolve())
        counted[heading] = {page.relative_to(root.resolve()).as_posix(): words(page.read_text()) for page in pages}
    return counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/doc_words.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--totals", action="store_true", help="print each part's total only")
    args = parser.parse_args(argv)
    try:
        counted = part_words(ROOT)
    except (OSError, ValueError) as exc:
        print(f"doc_words: {exc}", file=sys.stderr)
        return 2
    for part, pages in counted.items():
        if not args.totals:
            for path, count in pages.items():
                print(f"{count:7,d}  {path}")
        print(f"{sum(pages.values()):7,d}  {part.lower()} ({len(pages)} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
