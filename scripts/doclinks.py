#!/usr/bin/env python3
"""Broken links in the reference: README.md, sdk/README.md and docs/*.md,
and the book mdBook builds from docs/.

- every relative link in those pages names a file that exists and, with a
  `#fragment`, a heading of that page (GitHub's slug rules, which mdBook's
  ids follow); links inside code are not links;
- every page in docs/ is listed in docs/SUMMARY.md, and every page
  SUMMARY.md lists exists;
- with `--mdbook-log FILE` (what `mdbook build` wrote to stderr), each of
  its warnings and errors;
- with `--book DIR` (the built book), every relative `href` and `src` of its
  pages names a file of the book and, with a `#fragment`, an id on that page.

Prints each broken link and exits 1 when there is one.

    python3 scripts/doclinks.py [--book target/book] [--mdbook-log FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "sdk" / "README.md", *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    seen: dict[str, int] = {}
    out = set()
    for h in re.findall(r"^#{1,6} (.*)$", text, flags=re.M):
        s = slug(h.replace("`", ""))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in LINK.findall(prose(page.read_text())):
        if EXTERNAL.match(target):
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target}: no such heading in {dest.name}")
    return bad


def summary_problems(docs: Path = DOCS) -> list[str]:
    summary = docs / "SUMMARY.md"
    if not summary.exists():
        return ["SUMMARY.md: missing"]
    listed = {t.partition("#")[0] for t in LINK.findall(prose(summary.read_text()))}
    bad = [f"SUMMARY.md lists {t}: no such file" for t in sorted(listed) if not (docs / t).is_file()]
    for page in sorted(docs.glob("*.md")):
        if page.name != "SUMMARY.md" and page.name not in listed:
            bad.append(f"{page.name}: not listed in SUMMARY.md")
    return bad


def log_problems(log: Path) -> list[str]:
    """mdBook's warnings and errors (its log lines say WARN or ERROR)."""
    return [f"mdbook: {line.strip()}" for line in log.read_text().splitlines()
            if re.search(r"\b(WARN|ERROR)\b", line)]


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("href", "src"):
                self.refs.append(value)
            elif name in ("id", "name"):
                self.ids.add(value)


def _parse(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(errors="replace"))
    return parser


def book_problems(book: Path) -> list[str]:
    """Relative links of the built book's pages that lead nowhere."""
    if not (book / "index.html").exists():
        return [f"{book}: no built book (index.html)"]
    parsed: dict[Path, _Refs] = {}

    def page(p: Path) -> _Refs:
        if p not in parsed:
            parsed[p] = _parse(p)
        return parsed[p]

    bad = []
    for html in sorted(book.rglob("*.html")):
        # print.html repeats every page: its links are checked where they are written.
        if html.name in ("print.html", "404.html", "toc.html"):
            continue
        for ref in page(html).refs:
            if EXTERNAL.match(ref) or ref.startswith("//"):
                continue
            parts = urlsplit(ref)
            path, fragment = unquote(parts.path), unquote(parts.fragment)
            dest = (html.parent / path).resolve() if path else html
            if dest.is_dir():
                dest = dest / "index.html"
            where = html.relative_to(book)
            if not dest.exists():
                bad.append(f"book {where}: {ref}: no such file")
            elif fragment and dest.suffix == ".html" and fragment not in page(dest).ids:
                bad.append(f"book {where}: {ref}: no such id in {dest.name}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book", type=Path, help="the book mdbook built")
    ap.add_argument("--mdbook-log", type=Path, help="what mdbook build wrote to stderr")
    args = ap.parse_args()
    bad = []
    for p in pages():
        bad += [f"{p.relative_to(ROOT)}: {b}" for b in broken_links(p)]
    bad += [f"docs/{b}" for b in summary_problems()]
    if args.mdbook_log:
        bad += log_problems(args.mdbook_log)
    if args.book:
        bad += book_problems(args.book)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} broken links", file=sys.stderr)
        return 1
    print(f"links: {len(pages())} pages" + (", the book" if args.book else "") + ": none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
