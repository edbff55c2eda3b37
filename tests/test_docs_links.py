"""Every relative link and image in every tracked Markdown file resolves, headings included
(tools/doc_links.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from doc_links import anchors, broken_links, heading_slug  # noqa: E402


def test_every_link_and_image_in_the_tracked_markdown_resolves():
    problems = [str(b) for b in broken_links(ROOT)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_a_missing_file_a_missing_heading_and_a_bad_image_are_named_by_file_and_line(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "fig.png").write_bytes(b"")
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## A section: with punctuation\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Page\n\n![ok](fig.png) [ok](other.md#a-section-with-punctuation) [ok](#page)\n"
                    "![bad](results/fig.png)\n[bad](other.md#no-such-heading)\n[bad](#nowhere)\n"
                    "```\n[in code](missing.md)\n```\n`[inline](missing.md)` [web](https://example.org/x)\n")
    found = [(b.path, b.line, b.target) for b in broken_links(tmp_path, [page])]
    assert found == [("docs/page.md", 4, "results/fig.png"), ("docs/page.md", 5, "other.md#no-such-heading"),
                     ("docs/page.md", 6, "#nowhere")]


def test_headings_get_github_anchors_and_repeats_are_numbered():
    assert heading_slug("Rendering an episode: GIF and MP4") == "rendering-an-episode-gif-and-mp4"
    assert heading_slug("MARA's lead (our addition)") == "maras-lead-our-addition"
    assert anchors("# Notes\n## Notes\n<a id=\"here\"></a>\n") == {"notes", "notes-1", "here"}
