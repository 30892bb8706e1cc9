"""The reference in README.md and docs/: every relative link names a file
that exists and, with a `#fragment`, a heading of that file (GitHub's slug
rules). Links inside code blocks are not links."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "sdk" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


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
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target}: no such heading in {dest.name}")
    return bad


def test_every_relative_link_resolves():
    bad = {str(p.relative_to(ROOT)): broken_links(p) for p in PAGES}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


def test_the_checker_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](#nowhere) [file](missing.md)\n"
                    "```\n[in code](nothing.md)\n```\n")
    assert broken_links(page) == ["#nowhere: no such heading in page.md",
                                  "missing.md: no such file"]


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
