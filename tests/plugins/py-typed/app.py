"""py-typed: a plain component in Python (componentize-py) with its own WIT
(wit/calc.wit) and no hangar:plugin world: Hangar serves its exported
functions as tools with schemas from their WIT types.

Build: componentize-py -d wit -w py-typed componentize app -o py-typed.wasm
"""

import math

import wit_world
from componentize_py_types import Err
from wit_world.exports import shapes


class Parser:
    """A recursive-descent evaluator: no eval()."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, what: str):
        raise ValueError(f"{what} at position {self.pos}")

    def peek(self) -> str:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> float:
        value = self.expr()
        if self.peek():
            self.fail(f"unexpected {self.peek()!r}")
        return value

    def expr(self) -> float:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.text[self.pos]
            self.pos += 1
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> float:
        value = self.factor()
        while self.peek() in ("*", "/"):
            op = self.text[self.pos]
            self.pos += 1
            rhs = self.factor()
            if op == "*":
                value *= rhs
            elif rhs == 0:
                self.fail("division by zero")
            else:
                value /= rhs
        return value

    def factor(self) -> float:
        c = self.peek()
        if c == "-":
            self.pos += 1
            return -self.factor()
        if c == "(":
            self.pos += 1
            value = self.expr()
            if self.peek() != ")":
                self.fail("expected ')'")
            self.pos += 1
            return value
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isdigit() or self.text[self.pos] == "."):
            self.pos += 1
        if start == self.pos:
            self.fail(f"expected a number, got {c!r}" if c else "unexpected end")
        try:
            return float(self.text[start:self.pos])
        except ValueError:
            self.pos = start
            self.fail("bad number")


class WitWorld(wit_world.WitWorld):
    def eval_expr(self, expr: str) -> float:
        try:
            return Parser(expr).parse()
        except ValueError as e:
            raise Err(str(e))


def area(s: shapes.Shape) -> float | None:
    if isinstance(s, shapes.Shape_Circle):
        return math.pi * s.value * s.value
    if isinstance(s, shapes.Shape_Rect):
        return s.value[0] * s.value[1]
    return None


class Shapes(wit_world.exports.Shapes):
    def area(self, s: shapes.Shape) -> float | None:
        return area(s)

    def largest(self, shapes_: list[shapes.Shape]) -> shapes.Shape | None:
        best, best_area = None, -1.0
        for s in shapes_:
            a = area(s) or 0.0
            if best is None or a > best_area:
                best, best_area = s, a
        return best
