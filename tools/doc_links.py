"""Every relative link and image in the repository's Markdown files resolves: the file exists and, where the
link names a heading (``page.md#heading``), the page has that heading.

A reader who follows a link to nothing stops trusting the page; this check (run by
``tests/test_docs_links.py`` in ``make test``) names each broken link as ``file:line: target (why)``.
Run it alone with ``python tools/doc_links.py``; it exits 1 when a link is broken.
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent

# [text](target) and ![alt](target), with an optional "title"; <img src="..."> and <a href="...">.
_MARKDOWN_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_LINK = re.compile(r"<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"", re.IGNORECASE)
_HTML_ANCHOR = re.compile(r"<a\s[^>]*?(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto: ...
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


@dataclass(frozen=True)
class BrokenLink:
    """One link that does not resolve: where it is, what it names and why it fails."""

    path: str
    line: int
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.target} ({self.reason})"


def markdown_files(root: Path) -> list[Path]:
    """The Markdown files git tracks under ``root`` (every ``*.md`` file when ``root`` is not a git checkout)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=root, capture_output=True, check=True,
                                text=True).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in root.rglob("*.md") if ".venv" not in p.parts)
    return [root / name for name in sorted(listed) if name and (root / name).is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line without inline code) for each line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, _INLINE_CODE.sub("", line)))
    return lines


def heading_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces turned into hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    kept = "".join(c for c in text.strip().lower()
                   if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (a repeated one numbered -1, -2, ... as GitHub does) and
    explicit ``<a id=...>`` / ``<a name=...>`` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        found.update(_HTML_ANCHOR.findall(line))
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = heading_slug(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _problem(page: Path, target: str, root: Path) -> str | None:
    """Why ``target`` (as written in ``page``) does not resolve, or None when it does."""
    location, _, fragment = unquote(target).partition("#")
    resolved = (page.parent / location).resolve() if location else page
    if location and not resolved.exists():
        return "no such file"
    if location and not resolved.is_relative_to(root.resolve()):
        return "outside the repository"
    if fragment and resolved.suffix == ".md" and fragment.lower() not in anchors(resolved.read_text()):
        return f"no heading '#{fragment}' in {resolved.relative_to(root.resolve()).as_posix()}"
    return None


def broken_links(root: Path = ROOT, files: list[Path] | None = None) -> list[BrokenLink]:
    """Every relative link and image in ``files`` (default: every tracked Markdown file) that does not resolve."""
    broken = []
    for page in files if files is not None else markdown_files(root):
        for number, line in prose_lines(page.read_text()):
            for target in _MARKDOWN_LINK.findall(line) + _HTML_LINK.findall(line):
                if _EXTERNAL.match(target):
                    continue
                reason = _problem(page, target, root)
                if reason:
                    broken.append(BrokenLink(page.relative_to(root).as_posix(), number, target, reason))
    return broken


def report(problems: Sequence[object]) -> int:
    """Print each problem on a line of its own to stderr; the exit status: 1 when there is one, else 0."""
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


def main() -> int:
    """Print each broken link, one a line; exit 1 when there is one."""
    return report(broken_links())


if __name__ == "__main__":
    sys.exit(main())
