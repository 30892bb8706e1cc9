#!/usr/bin/env python3
"""Import circles between the files of host/src.

Reads every `use crate::…`, `use super::…`, `use self::…` (and the same
paths written inline in code) and resolves each name to the file that
*defines* it, following `pub use` re-exports. A file names another file
when it uses an item defined there. Unit-test modules (`#[cfg(test)] mod
… {`) are left out: tests are not part of the layering.

Prints every strongly connected group of two or more files and exits 1
when there is one; `--graph` prints every arrow instead.

    python3 scripts/circles.py [--src host/src] [--graph]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ITEM_KINDS = r"(?:fn|struct|enum|trait|type|const|static|mod|union)"
DEFINES = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?"
    + ITEM_KINDS
    + r"\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO_DEF = re.compile(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")
USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.S)
INLINE = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def strip(text: str) -> str:
    """The code without comments, strings and unit-test modules."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    m = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def expand(tree: str) -> list[tuple[str, str]]:
    """`a::{b, c::{d as e}}` → [("a::b", "b"), ("a::c::d", "e")]."""
    tree = re.sub(r"\s+", "", tree)
    out: list[tuple[str, str]] = []

    def walk(prefix: str, s: str) -> None:
        depth = 0
        start = 0
        parts = []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            if "{" in part:
                head, _, rest = part.partition("{")
                walk(prefix + head, rest[: rest.rindex("}")])
            else:
                out.append((prefix + part, ""))

    walk("", tree)
    return out


class Tree:
    """The module tree of host/src: module path → file, file → text."""

    def __init__(self, src: Path):
        self.src = src
        self.files: dict[tuple[str, ...], Path] = {}
        for path in src.rglob("*.rs"):
            rel = path.relative_to(src).with_suffix("")
            parts = tuple(rel.parts)
            if parts == ("main",):
                continue
            if parts == ("lib",):
                parts = ()
            elif parts[-1] == "mod":
                parts = parts[:-1]
            self.files[parts] = path
        self.code = {m: strip(p.read_text()) for m, p in self.files.items()}
        self.raw_uses = {m: self._uses(m) for m in self.files}

    def _uses(self, module):
        """(is_pub, path, local name) for each use in `module`."""
        out = []
        for m in USE.finditer(self.code[module]):
            body = m.group(2)
            # put back the spaces around `as` that expand() removes
            body = re.sub(r"\s+as\s+", " AS ", body)
            for path, _ in expand(body.replace(" AS ", "@")):
                if "@" in path:
                    path, alias = path.split("@")
                else:
                    alias = path.rsplit("::", 1)[-1]
                out.append((bool(m.group(1)), path, alias))
        return out

    def is_module(self, parts) -> bool:
        return tuple(parts) in self.files

    def absolute(self, module, path: str):
        """A path as written in `module` → absolute segments, or None."""
        segs = path.split("::")
        if segs[0] == "crate":
            return list(segs[1:])
        base = list(module)
        if segs[0] == "self":
            return base + segs[1:]
        if segs[0] == "super":
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            return base + segs
        # a bare path: a child module of this one
        if self.is_module(tuple(base) + (segs[0],)):
            return base + segs
        return None

    def defines(self, module, name: str) -> bool:
        code = self.code[module]
        return any(m.group(1) == name for m in DEFINES.finditer(code)) or any(
            m.group(1) == name for m in MACRO_DEF.finditer(code)
        )

    def resolve(self, segs, seen=None):
        """Absolute segments → the module file that defines the item."""
        seen = seen or set()
        key = tuple(segs)
        if key in seen:
            return None
        seen.add(key)
        mod: tuple[str, ...] = ()
        i = 0
        while i < len(segs) and self.is_module(mod + (segs[i],)):
            mod = mod + (segs[i],)
            i += 1
        if i == len(segs) or segs[i] == "*":
            return mod
        name = segs[i]
        if self.defines(mod, name):
            return mod
        for is_pub, path, alias in self.raw_uses[mod]:
            if alias == name:
                target = self.absolute(mod, path)
                if target is not None:
                    found = self.resolve(target, seen)
                    if found is not None:
                        return found
        return mod

    def _relative_paths(self, module, code: str) -> list[str]:
        """Paths in code that start at a child module (`child::f()`) or at
        a module brought in by `use` (`use crate::a::b;` then `b::T`),
        rewritten as absolute `crate::` paths."""
        roots: dict[str, list[str]] = {}
        for child in re.findall(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;", code):
            roots[child] = list(module) + [child]
        for _, path, alias in self.raw_uses[module]:
            segs = self.absolute(module, path)
            if segs is not None and self.is_module(tuple(segs)):
                roots[alias] = segs
        out = []
        if not roots:
            return out
        pattern = re.compile(
            r"(?<![A-Za-z0-9_:])("
            + "|".join(re.escape(r) for r in roots)
            + r")((?:::[A-Za-z_][A-Za-z0-9_]*)+)"
        )
        for m in pattern.finditer(code):
            out.append("::".join(["crate", *roots[m.group(1)]]) + m.group(2))
        return out

    def arrows(self):
        """file → set of files it names."""
        graph: dict[tuple[str, ...], set] = {m: set() for m in self.files}
        for module in self.files:
            paths = [p for _, p, _ in self.raw_uses[module]]
            code = USE.sub("", self.code[module])
            paths += [m.group(1) for m in INLINE.finditer(code)]
            paths += self._relative_paths(module, code)
            for path in paths:
                segs = self.absolute(module, path)
                if segs is None:
                    continue
                target = self.resolve(segs)
                if target is None or target == module:
                    continue
                # a parent's `mod child;` declarations and a child naming
                # its own ancestors for a module path alone are not arrows
                if target == module[: len(target)] and (
                    len(segs) == len(target) or segs[len(target)] == "*"
                ):
                    continue
                graph[module].add(target)
        return graph


def sccs(graph):
    """Tarjan's strongly connected components."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def name(tree: Tree, module) -> str:
    return str(tree.files[module].relative_to(tree.src))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "host" / "src"))
    ap.add_argument("--graph", action="store_true")
    args = ap.parse_args()
    tree = Tree(Path(args.src))
    graph = tree.arrows()
    if args.graph:
        for m in sorted(graph):
            for t in sorted(graph[m]):
                print(f"{name(tree, m)} -> {name(tree, t)}")
        return 0
    circles = [c for c in sccs(graph) if len(c) > 1]
    for comp in circles:
        files = sorted(name(tree, m) for m in comp)
        print(f"circle of {len(files)} files:")
        inside = set(comp)
        for m in sorted(comp):
            for t in sorted(graph[m] & inside):
                print(f"  {name(tree, m)} -> {name(tree, t)}")
    if circles:
        print(f"{len(circles)} circle(s) between files of {args.src}")
        return 1
    print(f"no circles between the {len(tree.files)} files of {args.src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
