"""The reference in README.md and docs/: every relative link names a file
that exists and, with a `#fragment`, a heading of that file (GitHub's slug
rules), and the book's SUMMARY.md lists every page. Links inside code
blocks are not links. The checks are scripts/doclinks.py's, which
scripts/test also runs on the built book."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from doclinks import broken_links, pages, summary_problems  # noqa: E402


def test_every_relative_link_resolves():
    bad = {str(p.relative_to(ROOT)): broken_links(p) for p in pages()}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


def test_the_checker_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](#nowhere) [file](missing.md)\n"
                    "```\n[in code](nothing.md)\n```\n")
    assert broken_links(page) == ["#nowhere: no such heading in page.md",
                                  "missing.md: no such file"]


def test_the_book_lists_every_page():
    assert summary_problems() == []


def test_a_page_left_out_of_the_book_is_named(tmp_path):
    (tmp_path / "SUMMARY.md").write_text("# Summary\n\n- [A](a.md)\n- [Gone](gone.md)\n")
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / "b.md").write_text("# B\n")
    assert summary_problems(tmp_path) == ["SUMMARY.md lists gone.md: no such file",
                                          "b.md: not listed in SUMMARY.md"]


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
