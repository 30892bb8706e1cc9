"""The code sandbox for Python: runs one agent's program as the body of an
async function given `tools` and `print`, and answers what it returned.

Built with componentize-py against the `code` world of wit/code.wit
(scripts/lib.sh, `build_sandbox`); Hangar runs each program in a fresh
instance under `[code.limits]`. The only import that leaves the sandbox is
`program-tools`: each tool call is a pipeline call as the program's caller.

The program's own syntax tree becomes the body of `async def`, so its lines
and columns stay its own: no text is added before it. A tool call starts
when it is made (`tools.echo(text="hi")`) and is waited for when awaited, so
calls made before the first `await` run together.
"""

import ast
import json
import traceback

import wit_world
from componentize_py_types import Err
from wit_world.imports import program_tools

FILENAME = "<program>"


class ToolError(Exception):
    """A tool call's failure, as the program sees it: `code`, `stage`, and
    the message."""

    def __init__(self, failure):
        super().__init__(failure.message)
        self.code = failure.code
        self.stage = failure.stage


class Call:
    """A started tool call; awaiting it waits for its answer."""

    def __init__(self, name, arguments):
        try:
            self.handle = program_tools.start(name, json.dumps(arguments))
            self.failed = None
        except Err as e:
            self.failed = ToolError(e.value)

    def __await__(self):
        if self.failed:
            raise self.failed
        try:
            text = program_tools.finish(self.handle)
        except Err as e:
            raise ToolError(e.value) from None
        return json.loads(text)
        yield  # a generator: `await` takes it; it never suspends


class Tools:
    """`tools.echo(text="hi")`, `tools.billing.invoices.get(id=1)` and
    `tools.call("any.name", {...})`."""

    def __init__(self, path=""):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Tools(f"{self._path}.{name}" if self._path else name)

    def __call__(self, *args, **kwargs):
        if not self._path:
            raise TypeError("tools is not a tool: call tools.NAME(...)")
        if self._path == "call":
            name, arguments = args[0], (args[1] if len(args) > 1 else kwargs)
            return Call(name, arguments)
        if args:
            if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
                return Call(self._path, args[0])
            raise TypeError(f"tools.{self._path} takes keyword arguments (or one dict)")
        return Call(self._path, kwargs)


class Console:
    """`print`, captured up to `cap` characters."""

    def __init__(self, cap):
        self.cap = cap
        self.text = []
        self.size = 0
        self.dropped = 0

    def print(self, *values, sep=" ", end="\n", **_):
        line = sep.join(v if isinstance(v, str) else show(v) for v in values) + end
        room = self.cap - self.size
        if room >= len(line):
            self.text.append(line)
            self.size += len(line)
        else:
            if room > 0:
                self.text.append(line[:room])
                self.size += room
            self.dropped += len(line) - max(room, 0)


def show(value):
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def where(error):
    """(line, column), 1-based, of the program's innermost frame in the
    error's traceback."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == FILENAME]
    if not frames:
        return None
    f = frames[-1]
    column = getattr(f, "colno", None)
    return wit_world.Position(line=f.lineno, column=(column or 0) + 1)


def program(source):
    """The program as `async def __program__(tools, print)`: its syntax tree,
    lines and columns as sent."""
    tree = ast.parse(source, FILENAME, "exec")
    body = tree.body or [ast.Pass()]
    func = ast.AsyncFunctionDef(
        name="__program__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg("tools"), ast.arg("print")], kwonlyargs=[],
                           kw_defaults=[], defaults=[]),
        body=body, decorator_list=[], returns=None, type_params=[])
    ast.copy_location(func, body[0])
    module = ast.Module(body=[func], type_ignores=[])
    ast.fix_missing_locations(module)
    scope = {"__name__": "__program__"}
    exec(compile(module, FILENAME, "exec"), scope)
    return scope["__program__"]


def drive(coroutine):
    """Runs the program's coroutine to its end: tool calls never suspend it,
    so anything that does is something else it awaited."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a program can await only tool calls")


class WitWorld(wit_world.WitWorld):
    def run(self, language: str, source: str, console_cap: int) -> wit_world.Outcome:
        console = Console(console_cap)

        def done(value=None, error=None):
            return wit_world.Outcome(value=value, console="".join(console.text),
                                     console_dropped=console.dropped, error=error)

        try:
            body = program(source)
        except SyntaxError as e:
            position = wit_world.Position(line=e.lineno, column=e.offset or 1) if e.lineno else None
            return done(error=wit_world.ProgramError(kind="syntax", message=f"SyntaxError: {e.msg}",
                                                     position=position, code=None, stage=None))
        try:
            value = drive(body(Tools(), console.print))
        except Exception as e:  # noqa: BLE001 (the program's own error, reported as it is)
            tool = isinstance(e, ToolError)
            return done(error=wit_world.ProgramError(
                kind="thrown", message=f"{type(e).__name__}: {e}", position=where(e),
                code=e.code if tool else None, stage=e.stage if tool else None))
        if value is None:
            return done()
        try:
            return done(value=json.dumps(value))
        except (TypeError, ValueError) as e:
            return done(error=wit_world.ProgramError(kind="thrown", message=f"the program's result is not JSON: {e}",
                                                     position=None, code=None, stage=None))
