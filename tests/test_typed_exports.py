"""Plain WIT components served as tools (issue #41): a component that exports
no `hangar:plugin` world has each exported function served as a tool, with
JSON Schemas derived from its WIT types.

The guests (tests/plugins, each with its own WIT package, none using
hangar-sdk): `typed-kitchen` (Rust, plain wit-bindgen: every WIT type
echoed back in its interface `types`, and world-level functions returning
results, nothing, a loop, an outbound GET), `js-typed` (componentize-js:
a record and an enum, `fetch()` over wasi:http) and `py-typed`
(componentize-py: an arithmetic evaluator, a variant and options).

What these tests hold the host to is /tmp/briefs/typed-contract.md
(names `P.f` / `P.iface.f`, S(T) per type, `structuredContent` =
the record itself or `{"result": v}`, `err` → `isError`, descriptions from a
`package-docs` section or the signature, titles from the name, load
problems for resource parameters, and the rest of the host unchanged:
limits, grants, auth by `[[tools]]`, REST).

As elsewhere, no test asserts a duration: limits are generous enough
that a hang fails a test instead of passing it.
"""

import asyncio
import base64
import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from conftest import Mcp, Server, client, plugin_path, run_hangar

KITCHEN = "typed-kitchen"
K = KITCHEN + "."
T = KITCHEN + ".types."
API_KEY = "typed-key-0123456789"
UPSTREAM_BODY = "hello from the typed upstream"

# --- S(T), as the contract derives it ---------------------------------------------------

BOUNDS = {
    "u8": (0, 255),
    "u16": (0, 65535),
    "u32": (0, 4294967295),
    "u64": (0, 18446744073709551615),
    "s8": (-128, 127),
    "s16": (-32768, 32767),
    "s32": (-2147483648, 2147483647),
    "s64": (-9223372036854775808, 9223372036854775807),
}


def integer(width):
    lo, hi = BOUNDS[width]
    return {"type": "integer", "minimum": lo, "maximum": hi}


BOOL = {"type": "boolean"}
NUMBER = {"type": "number"}
# f32's finite range: a larger number would reach the guest as infinity.
F32 = {"type": "number", "minimum": -3.4028234663852886e38, "maximum": 3.4028234663852886e38}
STRING = {"type": "string"}
CHAR = {"type": "string", "minLength": 1, "maxLength": 1}
BYTES_IN = {"anyOf": [{"type": "array", "items": integer("u8")},
                      {"type": "string", "contentEncoding": "base64"}]}
BYTES_OUT = {"type": "string", "contentEncoding": "base64"}


def array(items):
    return {"type": "array", "items": items}


def option(s):
    return {"anyOf": [s, {"type": "null"}]}


def tuple_of(*items):
    n = len(items)
    return {"type": "array", "prefixItems": list(items), "items": False, "minItems": n, "maxItems": n}


def record(fields, optional=()):
    return {"type": "object", "properties": fields,
            "required": [f for f in fields if f not in optional], "additionalProperties": False}


def case(tag, payload=None):
    if payload is None:
        return {"type": "object", "properties": {"tag": {"const": tag}},
                "required": ["tag"], "additionalProperties": False}
    return {"type": "object", "properties": {"tag": {"const": tag}, "val": payload},
            "required": ["tag", "val"], "additionalProperties": False}


def variant(*cases):
    return {"oneOf": list(cases)}


def enum(*cases):
    return {"type": "string", "enum": list(cases)}


def flags(*names):
    return {"type": "array", "items": {"type": "string", "enum": list(names)}, "uniqueItems": True}


NULL = {"type": "null"}


def result_of(ok, err):
    """A nested result<T, E>; a missing T or E (None here): its value is null."""
    return {"oneOf": [
        {"type": "object", "properties": {"ok": NULL if ok is None else ok},
         "required": ["ok"], "additionalProperties": False},
        {"type": "object", "properties": {"err": NULL if err is None else err},
         "required": ["err"], "additionalProperties": False},
    ]}


def params(fields, optional=()):
    """A tool's inputSchema: the function's parameters, as a record's fields."""
    return record(fields, optional)


def wrapped(s):
    """The outputSchema of a function returning a non-record T."""
    return {"type": "object", "properties": {"result": s}, "required": ["result"]}


POINT = record({"x": integer("s32"), "y": integer("s32"), "label": option(STRING)}, optional=("label",))
SHAPE = variant(case("circle", NUMBER), case("square", integer("u32")), case("named", STRING), case("empty"))
COLOR = enum("red", "green", "blue")
SETTINGS = record({"max-size": integer("u32"), "dry-run": BOOL})
PERMS = flags("read", "write", "exec")

# Every tool typed-kitchen offers, with its whole inputSchema and outputSchema
# (None: no outputSchema). types.counter-value takes a resource: not a tool.
KITCHEN_TOOLS = {
    T + "echo-bool": (params({"v": BOOL}), wrapped(BOOL)),
    **{T + f"echo-{w}": (params({"v": integer(w)}), wrapped(integer(w))) for w in BOUNDS},
    T + "echo-f32": (params({"v": F32}), wrapped(F32)),
    T + "echo-f64": (params({"v": NUMBER}), wrapped(NUMBER)),
    T + "echo-char": (params({"v": CHAR}), wrapped(CHAR)),
    T + "echo-string": (params({"v": STRING}), wrapped(STRING)),
    T + "echo-list": (params({"v": array(STRING)}), wrapped(array(STRING))),
    T + "echo-bytes": (params({"v": BYTES_IN}), wrapped(BYTES_OUT)),
    T + "echo-option": (params({"v": option(integer("u32"))}, optional=("v",)),
                        wrapped(option(integer("u32")))),
    T + "echo-tuple": (params({"v": tuple_of(STRING, integer("u32"))}),
                       wrapped(tuple_of(STRING, integer("u32")))),
    T + "echo-point": (params({"p": POINT}), POINT),
    T + "echo-points": (params({"v": array(POINT)}), wrapped(array(POINT))),
    T + "echo-shape": (params({"v": SHAPE}), wrapped(SHAPE)),
    T + "echo-color": (params({"v": COLOR}), wrapped(COLOR)),
    T + "echo-perms": (params({"v": PERMS}), wrapped(PERMS)),
    T + "echo-nested": (params({"v": array(result_of(integer("u32"), STRING))}),
                        wrapped(array(result_of(integer("u32"), STRING)))),
    T + "echo-unit-results": (params({"v": array(result_of(None, COLOR))}),
                              wrapped(array(result_of(None, COLOR)))),
    T + "echo-option-option": (params({"v": option(BYTES_IN)}, optional=("v",)), wrapped(option(BYTES_OUT))),
    T + "echo-settings": (params({"s": SETTINGS}), SETTINGS),
    T + "make-point": (params({"x": integer("s32"), "y": integer("s32")}), POINT),
    T + "lookup": (params({"key": STRING}), POINT),
    T + "divide": (params({"x": NUMBER, "y": NUMBER}), wrapped(NUMBER)),
    K + "add": (params({"a": integer("s32"), "b": integer("s32")}), wrapped(integer("s32"))),
    K + "describe": (params({"name": STRING, "age": option(integer("u32"))}, optional=("age",)),
                     wrapped(STRING)),
    K + "checked-div": (params({"a": integer("s32"), "b": integer("s32")}), wrapped(integer("s32"))),
    K + "maybe-fail": (params({"fail": BOOL}), None),
    K + "record-note": (params({"note": STRING}), None),
    K + "spin": (params({"n": integer("u64")}), wrapped(integer("u64"))),
    K + "fetch": (params({"url": STRING}), wrapped(STRING)),
    # Bulk values (tests/test_typed_values.py).
    K + "bulk.make-bytes": (params({"n": integer("u32")}), wrapped(BYTES_OUT)),
    K + "bulk.make-strings": (params({"n": integer("u32"), "size": integer("u32")}), wrapped(array(STRING))),
    K + "bulk.count-bytes": (params({"v": BYTES_IN}), wrapped(integer("u64"))),
    K + "bulk.count-strings": (params({"v": array(STRING)}), wrapped(integer("u64"))),
    K + "bulk.make-blob": (params({"n": integer("u32")}),
                           wrapped(option(record({"name": STRING, "data": BYTES_OUT})))),
    K + "bulk.make-bools": (params({"n": integer("u32")}), wrapped(array(BOOL))),
    K + "hello": (params({}), wrapped(STRING)),
    K + "bump": (params({}), wrapped(integer("u32"))),
    K + "greet": (params({"first-name": STRING, "last-name": option(STRING)}, optional=("last-name",)),
                  wrapped(STRING)),
}

# Descriptions when the component carries no package-docs (a plain
# wit-bindgen build): the signature.
SIGNATURES = {
    K + "add": "add(a: s32, b: s32) -> s32",
    K + "describe": "describe(name: string, age: option<u32>) -> string",
    K + "checked-div": "checked-div(a: s32, b: s32) -> result<s32, string>",
    K + "maybe-fail": "maybe-fail(fail: bool) -> result<_, string>",
    K + "record-note": "record-note(note: string)",
    K + "fetch": "fetch(url: string) -> result<string, string>",
    K + "hello": "hello() -> string",
    K + "greet": "greet(first-name: string, last-name: option<string>) -> string",
    T + "echo-u64": "echo-u64(v: u64) -> u64",
    T + "echo-list": "echo-list(v: list<string>) -> list<string>",
    T + "echo-option": "echo-option(v: option<u32>) -> option<u32>",
}

TITLES = {
    K + "add": "Add",
    K + "checked-div": "Checked Div",
    K + "record-note": "Record Note",
    T + "echo-u64": "Echo U64",
    T + "echo-unit-results": "Echo Unit Results",
    "js-typed.weather.get-weather": "Get Weather",
    "py-typed.eval-expr": "Eval Expr",
}

REPORT = record({"city": STRING, "temperature": NUMBER, "units": enum("metric", "imperial"),
                 "conditions": array(STRING), "wind": option(integer("u32"))}, optional=("wind",))
PY_SHAPE = variant(case("circle", NUMBER), case("rect", tuple_of(NUMBER, NUMBER)), case("dot"))
POLYGLOT_TOOLS = {
    "js-typed.weather.get-weather": (params({"city": STRING, "units": enum("metric", "imperial")}), REPORT),
    "js-typed.fetch": (params({"url": STRING}), wrapped(STRING)),
    "py-typed.eval-expr": (params({"expr": STRING}), wrapped(NUMBER)),
    "py-typed.shapes.area": (params({"s": PY_SHAPE}), wrapped(option(NUMBER))),
    "py-typed.shapes.largest": (params({"shapes": array(PY_SHAPE)}), wrapped(option(PY_SHAPE))),
}


# --- the upstream for fetch ---------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream():
    """A local HTTP server answering /hello (and 404 elsewhere), counting requests."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            body = UPSTREAM_BODY.encode() if self.path == "/hello" else b"not found"
            self.send_response(200 if self.path == "/hello" else 404)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.seen = seen
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


# --- servers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(start_server, upstream):
    """Every typed guest, with grants to the upstream, an auth check on one
    typed tool, an output mapper on another and a small fuel budget on the
    looping one."""
    port = upstream.server_address[1]
    return start_server(plugins=(KITCHEN, "typed-echo", "js-typed", "py-typed", "echo", "api-key", "redact"),
                        config=f"""
auth_failures = "1000/m"

[plugins.typed-kitchen]
grants = {{ http = ["127.0.0.1:{port}"] }}

[plugins.js-typed]
grants = {{ http = ["127.0.0.1:{port}"] }}

[plugins.api-key]
config = {{ keys = "alice={API_KEY}" }}

[[tools]]
name = "{T}echo-string"
auth = {{ plugin = "api-key", policy = {{ header = "x-api-key" }} }}

[[tools]]
name = "{K}spin"
limits = {{ fuel = 50_000_000, deadline = "30s" }}

[[tools]]
name = "{K}describe"
mappers = {{ output = "redact" }}

[[tools]]
name = "js-typed.fetch"
limits = {{ deadline = "10s" }}
""")


@pytest.fixture(scope="module")
def ungranted(start_server):
    """The same guests with no grants, and a deadline (not fuel) on the loop."""
    return start_server(plugins=(KITCHEN, "js-typed", "echo"), config=f"""
[[tools]]
name = "{K}spin"
limits = {{ fuel = 1_000_000_000_000, deadline = "1s" }}

[[tools]]
name = "js-typed.fetch"
limits = {{ deadline = "10s" }}
""")


@pytest.fixture(scope="module")
def mcp(server):
    """A session that sends the API key (types.echo-string wants it; the
    other tools ignore it)."""
    c = Mcp(server.url)
    c.http.headers["x-api-key"] = API_KEY
    c.initialize()
    return c


def listed(server):
    """tools/list over MCP with the official Python SDK (1.x): name → Tool."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(server.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools, cursor = [], None
                while True:
                    page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                    tools += page.tools
                    cursor = page.nextCursor
                    if not cursor:
                        return {t.name: t for t in tools}

    return asyncio.run(run())


def sdk_call(server, name, arguments):
    """tools/call with the Python SDK: the CallToolResult (the SDK checks
    structuredContent against the tool's outputSchema itself)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(server.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                return await session.call_tool(name, arguments)

    return asyncio.run(run())


def ok(r):
    """A successful call's result."""
    assert "result" in r, r
    assert r["result"].get("isError") is False, r
    return r["result"]


def value_of(r):
    """The value v a successful call answered: `structuredContent.result`, and
    the text block agrees (as-is for a string, else compact JSON)."""
    res = ok(r)
    assert set(res["structuredContent"]) == {"result"}, res
    v = res["structuredContent"]["result"]
    [block] = res["content"]
    assert block["type"] == "text"
    if isinstance(v, str):
        assert block["text"] == v
    else:
        assert json.loads(block["text"]) == v
        if not has_float(v):  # (float spellings differ between serde_json and Python)
            assert block["text"] == json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return v


def has_float(v) -> bool:
    if isinstance(v, float):
        return True
    if isinstance(v, dict):
        return any(has_float(x) for x in v.values())
    if isinstance(v, list):
        return any(has_float(x) for x in v)
    return False


def tool_error(r):
    """The text of a result with isError: true (a WIT `err`)."""
    assert "result" in r, r
    res = r["result"]
    assert res["isError"] is True, r
    assert "structuredContent" not in res or res["structuredContent"] is None, r
    [block] = res["content"]
    assert block["type"] == "text"
    return block["text"]


def call_error(r, stage):
    """The message of a JSON-RPC error that `stage` raised."""
    assert "error" in r, r
    assert r["error"]["data"]["stage"] == stage, r
    return r["error"]["message"]


# --- listing ----------------------------------------------------------------------------


def test_each_exported_function_is_a_tool_named_after_it(server):
    tools = listed(server)
    kitchen = {n for n in tools if n.startswith(K)}
    # World-level functions are `P.f`, an interface's `P.iface.f`; the
    # resource-taking function is not among them.
    assert kitchen == set(KITCHEN_TOOLS), sorted(kitchen ^ set(KITCHEN_TOOLS))
    # The kitchen also exports wasi:cli/run: skipped, silently.
    assert not [n for n in tools if "wasi" in n or n.endswith(".run")], sorted(tools)
    assert {n for n in tools if n.startswith("js-typed.")} == \
        {n for n in POLYGLOT_TOOLS if n.startswith("js-typed.")}
    # Every componentize-py component also exports an instance `exports`
    # with componentize-py's own build-time `init`: not a tool.
    assert {n for n in tools if n.startswith("py-typed.")} == \
        {n for n in POLYGLOT_TOOLS if n.startswith("py-typed.")}
    assert "echo" in tools  # a tool-world plugin beside them, as before


@pytest.mark.parametrize("name", sorted(KITCHEN_TOOLS))
def test_kitchen_schemas_are_derived_exactly(server, name):
    tool = listed_once(server)[name]
    input_schema, output_schema = KITCHEN_TOOLS[name]
    assert tool.inputSchema == input_schema
    assert tool.outputSchema == output_schema


def test_integer_bounds_of_every_width(server):
    tools = listed_once(server)
    for width, (lo, hi) in BOUNDS.items():
        v = tools[f"{T}echo-{width}"].inputSchema["properties"]["v"]
        assert (v["type"], v["minimum"], v["maximum"]) == ("integer", lo, hi), width
    assert tools[T + "echo-u64"].inputSchema["properties"]["v"]["maximum"] == 18446744073709551615
    assert tools[T + "echo-s64"].inputSchema["properties"]["v"]["minimum"] == -9223372036854775808


@pytest.mark.parametrize("name", sorted(POLYGLOT_TOOLS))
def test_js_and_python_schemas_are_derived_exactly(server, name):
    tool = listed_once(server)[name]
    input_schema, output_schema = POLYGLOT_TOOLS[name]
    assert tool.inputSchema == input_schema
    assert tool.outputSchema == output_schema


def test_descriptions_are_signatures_without_package_docs(server):
    tools = listed_once(server)
    for name, signature in SIGNATURES.items():
        assert tools[name].description == signature, name


def test_titles_are_the_name_words_capitalised(server):
    tools = listed_once(server)
    for name, title in TITLES.items():
        assert tools[name].title == title, name


_LISTED = {}


def listed_once(server):
    """`listed(server)`, once per server (the parametrized tests share it)."""
    if server.url not in _LISTED:
        _LISTED[server.url] = listed(server)
    return _LISTED[server.url]


# --- round trips --------------------------------------------------------------------------

ROUND_TRIPS = [
    ("echo-bool", True),
    ("echo-bool", False),
    ("echo-u8", 255),
    ("echo-u16", 65535),
    ("echo-u32", 4294967295),
    ("echo-u64", 18446744073709551615),
    ("echo-u64", 0),
    ("echo-s8", -128),
    ("echo-s16", -32768),
    ("echo-s32", -2147483648),
    ("echo-s64", -9223372036854775808),
    ("echo-s64", 9223372036854775807),
    ("echo-f32", 1.5),
    ("echo-f64", 0.1),
    ("echo-f64", -2.5e300),
    ("echo-char", "x"),
    ("echo-char", "\U0001F44D"),  # one code point outside the BMP
    ("echo-string", "héllo ✓ \"quoted\""),
    ("echo-string", ""),
    ("echo-list", ["a", "", "ç"]),
    ("echo-list", []),
    ("echo-option", 7),
    ("echo-option", None),
    ("echo-tuple", ["x", 3]),
    ("echo-points", [{"x": 1, "y": 2, "label": "a"}, {"x": -1, "y": -2, "label": None}]),
    ("echo-shape", {"tag": "circle", "val": 1.5}),
    ("echo-shape", {"tag": "square", "val": 4}),
    ("echo-shape", {"tag": "named", "val": "n"}),
    ("echo-shape", {"tag": "empty"}),
    ("echo-color", "green"),
    ("echo-perms", ["read", "exec"]),
    ("echo-perms", []),
    ("echo-perms", ["read", "write", "exec"]),
    ("echo-nested", [{"ok": 1}, {"err": "bad"}, {"ok": 4294967295}]),
    ("echo-unit-results", [{"ok": None}, {"err": "blue"}]),
    ("echo-option-option", "AAEC/w=="),
    ("echo-option-option", None),
]


@pytest.mark.parametrize("tool,value", ROUND_TRIPS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(ROUND_TRIPS)])
def test_every_type_round_trips(mcp, tool, value):
    assert value_of(mcp.call(T + tool, {"v": value})) == value


def test_integer_extremes_come_back_exact_in_the_text_too(mcp):
    # Not through a float: the text block is the exact integer.
    r = ok(mcp.call(T + "echo-u64", {"v": 18446744073709551615}))
    assert r["content"][0]["text"] == "18446744073709551615"
    r = ok(mcp.call(T + "echo-s64", {"v": -9223372036854775808}))
    assert r["content"][0]["text"] == "-9223372036854775808"


def test_bytes_in_as_base64_or_an_array_come_back_as_base64(mcp):
    raw = bytes([0, 1, 2, 255, 128])
    b64 = base64.b64encode(raw).decode()
    assert value_of(mcp.call(T + "echo-bytes", {"v": b64})) == b64
    assert value_of(mcp.call(T + "echo-bytes", {"v": list(raw)})) == b64
    assert value_of(mcp.call(T + "echo-bytes", {"v": ""})) == ""
    assert value_of(mcp.call(T + "echo-bytes", {"v": []})) == ""
    # Padding kept: one byte is four characters.
    assert value_of(mcp.call(T + "echo-bytes", {"v": [7]})) == "Bw=="


def test_flags_come_back_in_declaration_order(mcp):
    assert value_of(mcp.call(T + "echo-perms", {"v": ["exec", "read"]})) == ["read", "exec"]


def test_an_omitted_option_parameter_is_none(mcp):
    assert value_of(mcp.call(T + "echo-option", {})) is None
    assert value_of(mcp.call(T + "echo-option-option", {})) is None
    assert value_of(mcp.call(K + "describe", {"name": "Ada"})) == "Ada, age unknown"
    assert value_of(mcp.call(K + "describe", {"name": "Ada", "age": None})) == "Ada, age unknown"
    assert value_of(mcp.call(K + "describe", {"name": "Ada", "age": 36})) == "Ada is 36"


def test_a_record_result_is_the_structured_content_itself(mcp):
    r = ok(mcp.call(T + "make-point", {"x": 3, "y": -4}))
    assert r["structuredContent"] == {"x": 3, "y": -4, "label": None}
    [block] = r["content"]
    assert json.loads(block["text"]) == r["structuredContent"]
    # An optional field may be left out going in; it comes back null.
    p = ok(mcp.call(T + "echo-point", {"p": {"x": 1, "y": 2}}))["structuredContent"]
    assert p == {"x": 1, "y": 2, "label": None}
    p = ok(mcp.call(T + "echo-point", {"p": {"x": 1, "y": 2, "label": "here"}}))["structuredContent"]
    assert p == {"x": 1, "y": 2, "label": "here"}


def test_a_string_result_is_the_text_as_is(mcp):
    r = ok(mcp.call(T + "echo-string", {"v": "{\"not\": \"json\"}"}))
    assert r["content"] == [{"type": "text", "text": "{\"not\": \"json\"}"}]
    assert r["structuredContent"] == {"result": "{\"not\": \"json\"}"}


def test_world_level_functions(mcp):
    assert value_of(mcp.call(K + "add", {"a": 2, "b": 40})) == 42
    assert value_of(mcp.call(K + "add", {"a": 2147483647, "b": 1})) == -2147483648


def test_a_function_without_parameters(mcp):
    assert value_of(mcp.call(K + "hello", {})) == "hello"
    assert value_of(mcp.call(K + "hello")) == "hello"  # no `arguments` at all
    assert "'x'" in invalid(mcp.call(K + "hello", {"x": 1}))


def test_kebab_case_names_are_kept_verbatim(mcp):
    assert value_of(mcp.call(K + "greet", {"first-name": "Ada", "last-name": "Lovelace"})) == \
        "Hello, Ada Lovelace!"
    assert value_of(mcp.call(K + "greet", {"first-name": "Ada"})) == "Hello, Ada!"
    assert "first_name" in invalid(mcp.call(K + "greet", {"first_name": "Ada"}))
    s = ok(mcp.call(T + "echo-settings", {"s": {"max-size": 10, "dry-run": True}}))["structuredContent"]
    assert s == {"max-size": 10, "dry-run": True}


def test_every_call_gets_a_fresh_instance(mcp):
    # `bump` counts its calls in a static: a reused instance would answer 2.
    assert [value_of(mcp.call(K + "bump", {})) for _ in range(3)] == [1, 1, 1]


def test_the_python_sdk_calls_typed_tools(server):
    r = sdk_call(server, T + "make-point", {"x": 1, "y": 2})
    assert r.isError is False
    assert r.structuredContent == {"x": 1, "y": 2, "label": None}
    r = sdk_call(server, T + "echo-shape", {"v": {"tag": "named", "val": "sdk"}})
    assert r.structuredContent == {"result": {"tag": "named", "val": "sdk"}}
    r = sdk_call(server, K + "checked-div", {"a": 1, "b": 0})
    assert r.isError is True and r.content[0].text == "cannot divide 1 by 0"


def test_the_slim_typed_echo_answers_as_the_tool_world_echo(mcp):
    # typed-echo (built slim, like plugins/echo) is the benchmark twin of `echo`.
    typed = ok(mcp.call("typed-echo.echo", {"text": "twin ✓"}))
    assert typed["content"] == [{"type": "text", "text": "twin ✓"}]
    assert typed["structuredContent"] == {"result": "twin ✓"}
    assert ok(mcp.call("echo", {"text": "twin ✓"}))["content"] == typed["content"]


# --- results: ok, err, nothing -------------------------------------------------------------


def test_result_ok_is_the_value_and_err_is_a_tool_error(mcp):
    assert value_of(mcp.call(K + "checked-div", {"a": 7, "b": 2})) == 3
    assert tool_error(mcp.call(K + "checked-div", {"a": 7, "b": 0})) == "cannot divide 7 by 0"


def test_a_non_string_err_is_its_json(mcp):
    assert ok(mcp.call(T + "lookup", {"key": "origin"}))["structuredContent"] == \
        {"x": 0, "y": 0, "label": "origin"}
    text = tool_error(mcp.call(T + "lookup", {"key": "nowhere"}))
    assert json.loads(text) == {"code": 404, "message": "no point nowhere"}


def test_no_return_value_means_no_content(mcp):
    for r in (mcp.call(K + "record-note", {"note": "n"}), mcp.call(K + "maybe-fail", {"fail": False})):
        res = ok(r)
        assert res["content"] == []
        assert "structuredContent" not in res or res["structuredContent"] is None, res
    assert tool_error(mcp.call(K + "maybe-fail", {"fail": True})) == "failed as asked"


def test_a_non_finite_float_result_is_a_handler_error(mcp):
    for x in (1.0, 0.0):  # inf and NaN
        message = call_error(mcp.call(T + "divide", {"x": x, "y": 0}), "handler")
        assert re.search(r"finite|nan|inf", message, re.IGNORECASE), message
    assert value_of(mcp.call(T + "divide", {"x": 1, "y": 4})) == 0.25


# --- errors in ------------------------------------------------------------------------------


def invalid(r):
    """The message of a call the validate stage refused."""
    return call_error(r, "validate")


@pytest.mark.parametrize("tool,value", [
    ("echo-u8", 256),
    ("echo-u8", -1),
    ("echo-s8", -129),
    ("echo-s8", 128),
    ("echo-u32", 4294967296),
    ("echo-s64", -9223372036854775809),
    ("echo-u64", -1),
    ("echo-bytes", [1, 256]),
])
def test_out_of_range_integers_are_refused_naming_the_parameter(mcp, tool, value):
    assert "/v" in invalid(mcp.call(T + tool, {"v": value}))


def test_a_number_past_f32s_range_is_refused_not_made_infinite(mcp):
    assert "/v" in invalid(mcp.call(T + "echo-f32", {"v": 1e39}))
    assert "/v" in invalid(mcp.call(T + "echo-f32", {"v": -1e39}))
    assert value_of(mcp.call(T + "echo-f32", {"v": 3.0e38})) == pytest.approx(3.0e38, rel=1e-6)


def test_a_whole_float_is_an_integer_as_json_schema_says(mcp):
    assert value_of(mcp.call(T + "echo-u8", {"v": 2.0})) == 2
    assert value_of(mcp.call(T + "echo-s64", {"v": -4.0})) == -4


def test_u64_max_plus_one_is_refused(mcp):
    # 2^64 is one past u64's maximum, and the same double as it: refused
    # (by the schema, or the conversion), never wrapped or rounded.
    r = mcp.call(T + "echo-u64", {"v": 18446744073709551616})
    assert "error" in r, r
    assert "/v" in r["error"]["message"], r


@pytest.mark.parametrize("tool,args,path", [
    ("echo-bool", {"v": "true"}, "/v"),
    ("echo-string", {"v": 5}, "/v"),
    ("echo-u8", {"v": 1.5}, "/v"),
    ("echo-f64", {"v": "1.0"}, "/v"),
    ("echo-char", {"v": "ab"}, "/v"),
    ("echo-char", {"v": ""}, "/v"),
    ("echo-list", {"v": ["a", 1]}, "/v/1"),
    ("echo-tuple", {"v": ["x"]}, "/v"),
    ("echo-tuple", {"v": ["x", 1, 2]}, "/v"),
    ("echo-tuple", {"v": [1, 1]}, "/v/0"),
    ("echo-color", {"v": "purple"}, "/v"),
    ("echo-perms", {"v": ["read", "read"]}, "/v"),
    ("echo-perms", {"v": ["fly"]}, "/v/0"),
    ("echo-shape", {"v": {"tag": "triangle", "val": 3}}, "/v"),
    ("echo-shape", {"v": {"tag": "circle"}}, "/v"),
    ("echo-shape", {"v": {"tag": "empty", "val": 1}}, "/v"),
    ("echo-nested", {"v": [{"ok": 1, "err": "x"}]}, "/v/0"),
    ("echo-points", {"v": [{"x": 1, "y": 1}, {"x": "1", "y": 1}]}, "/v/1/x"),
])
def test_wrong_types_and_tags_are_refused_naming_the_path(mcp, tool, args, path):
    assert path in invalid(mcp.call(T + tool, args))


def test_an_extra_record_field_is_refused_naming_it(mcp):
    message = invalid(mcp.call(T + "echo-point", {"p": {"x": 1, "y": 2, "z": 3}}))
    assert "/p" in message and "z" in message, message


def test_an_extra_parameter_and_a_missing_one_are_refused(mcp):
    assert "extra" in invalid(mcp.call(K + "add", {"a": 1, "b": 2, "extra": 3}))
    assert '"b"' in invalid(mcp.call(K + "add", {"a": 1}))


def test_bad_base64_is_refused_naming_the_path(mcp):
    r = mcp.call(T + "echo-bytes", {"v": "not base64!"})
    assert "error" in r, r
    assert "/v" in r["error"]["message"], r
    r = mcp.call(T + "echo-option-option", {"v": "AAE"})  # unpadded
    assert "error" in r and "/v" in r["error"]["message"], r


def test_refused_arguments_never_reach_the_guest(mcp):
    # The guest's `add` wraps, so reaching it would answer a number.
    r = mcp.call(K + "add", {"a": 2147483648, "b": 0})
    assert "/a" in invalid(r)


# --- load problems ---------------------------------------------------------------------------


def test_a_resource_parameter_is_a_load_problem_and_the_rest_is_served(server, mcp):
    health = httpx.get(server.url + "/healthz").json()
    assert health["status"] == "degraded", health
    problems = [p for p in health["problems"] if "counter-value" in p["error"] or "counter-value" in p["path"]]
    assert len(problems) == 1, health["problems"]
    assert "resource" in problems[0]["error"], problems
    # Nothing else about the kitchen is a problem.
    assert [p for p in health["problems"] if p not in problems] == [], health["problems"]
    assert value_of(mcp.call(K + "add", {"a": 1, "b": 1})) == 2
    r = mcp.call(T + "counter-value", {"c": 1})
    assert r["error"]["code"] == -32601, r


def test_hangar_check_names_the_resource_function(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(plugin_path(KITCHEN), plugins / f"{KITCHEN}.wasm")
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{tmp_path / "cache"}"\n')
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(plugins))
    assert out.returncode != 0, out.stdout + out.stderr
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "counter-value" in line]
    assert any("resource" in line for line in lines), out.stdout + out.stderr
    # The other functions are there, each with its derived schemas.
    assert f"{K}add" in out.stdout and f"{T}echo-u64" in out.stdout, out.stdout
    assert check_schemas(out.stdout, T + "echo-perms") == KITCHEN_TOOLS[T + "echo-perms"]
    assert check_schemas(out.stdout, T + "make-point") == KITCHEN_TOOLS[T + "make-point"]
    assert check_schemas(out.stdout, K + "record-note") == KITCHEN_TOOLS[K + "record-note"]


def check_schemas(out: str, tool: str):
    """(input, output) schemas `hangar check` prints under `tool  NAME (…)`
    (output None when it prints none)."""
    lines = out.splitlines()
    [at] = [i for i, line in enumerate(lines) if line.strip().startswith(f"tool  {tool} ")]
    schemas = {}
    for line in lines[at + 1:]:
        words = line.split(None, 1)
        if len(words) != 2 or words[0] not in ("input", "output"):
            break
        schemas[words[0]] = json.loads(words[1])
    return schemas.get("input"), schemas.get("output")


# --- limits, grants, auth: the same host ---------------------------------------------------


def test_a_loop_is_stopped_by_fuel_and_the_next_call_works(mcp):
    message = call_error(mcp.call(K + "spin", {"n": 0}), "handler")
    assert message == "handler: fuel exhausted (limit 50000000)", message
    assert value_of(mcp.call(K + "spin", {"n": 1000})) == 1000
    assert value_of(mcp.call(K + "add", {"a": 1, "b": 2})) == 3


def test_a_loop_is_stopped_by_its_deadline_and_the_next_call_works(ungranted):
    c = client(ungranted, 30)
    message = call_error(c.call(K + "spin", {"n": 0}), "handler")
    assert message == "handler: deadline of 1000 ms exceeded", message
    assert value_of(c.call(K + "spin", {"n": 10})) == 10


def test_metrics_are_labelled_with_the_catalog_name(server):
    from prometheus_client.parser import text_string_to_metric_families

    def calls(outcome):
        text = httpx.get(server.url + "/metrics").text
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "hangar_calls_total" and s.labels.get("tool") == K + "checked-div"
                   and s.labels.get("outcome") == outcome)

    before_ok, before_err = calls("ok"), calls("tool_error")
    c = Mcp(server.url)
    value_of(c.call(K + "checked-div", {"a": 4, "b": 2}))
    value_of(c.call(K + "checked-div", {"a": 6, "b": 2}))
    tool_error(c.call(K + "checked-div", {"a": 1, "b": 0}))
    assert (calls("ok") - before_ok, calls("tool_error") - before_err) == (2, 1)


def test_fetch_reaches_a_granted_host(server, upstream):
    url = f"http://127.0.0.1:{upstream.server_address[1]}/hello"
    c = client(server, 30)
    assert value_of(c.call(K + "fetch", {"url": url})) == UPSTREAM_BODY
    assert value_of(c.call("js-typed.fetch", {"url": url})) == UPSTREAM_BODY
    # A guest's own err (a 404 here) is a tool error too.
    missing = url.replace("/hello", "/missing")
    assert tool_error(c.call(K + "fetch", {"url": missing})) == "status 404"


def test_fetch_without_a_grant_is_refused(ungranted, upstream):
    url = f"http://127.0.0.1:{upstream.server_address[1]}/hello"
    before = len(upstream.seen)
    c = client(ungranted, 30)
    text = tool_error(c.call(K + "fetch", {"url": url}))
    assert text.startswith("request failed:") and re.search(r"HttpRequestDenied|denied", text, re.I), text
    text = tool_error(c.call("js-typed.fetch", {"url": url}))
    assert text.startswith("request failed:"), text
    assert len(upstream.seen) == before  # nothing reached the upstream
    assert f"not granted to plugin {KITCHEN}" in ungranted.log_text()


def test_auth_by_tools_config_applies_to_a_typed_tool(server):
    anonymous = Mcp(server.url)
    anonymous.initialize()
    refused = anonymous.call(T + "echo-string", {"v": "hi"})
    assert call_error(refused, "auth") == "Unauthorized"
    refused = anonymous.call(T + "echo-string", {"v": "hi"}, headers={"x-api-key": "wrong"})
    assert call_error(refused, "auth") == "Unauthorized"
    assert value_of(anonymous.call(T + "echo-string", {"v": "hi"}, headers={"x-api-key": API_KEY})) == "hi"
    # The other typed tools have no check.
    assert value_of(anonymous.call(T + "echo-u8", {"v": 1})) == 1
    r = httpx.post(server.url + f"/tools/{T}echo-string/call", json={"v": "rest"})
    assert r.status_code == 401
    r = httpx.post(server.url + f"/tools/{T}echo-string/call", json={"v": "rest"}, headers={"x-api-key": API_KEY})
    assert r.status_code == 200 and r.json()["structuredContent"] == {"result": "rest"}


def test_an_output_mapper_by_tools_config_applies_to_a_typed_tool(mcp):
    r = ok(mcp.call(K + "describe", {"name": "ada@example.org", "age": 36}))
    assert r["content"] == [{"type": "text", "text": "[redacted] is 36"}]
    assert "ada@example.org" not in json.dumps(r)


def test_rest_calls_a_typed_tool(server):
    r = httpx.post(server.url + f"/tools/{T}make-point/call", json={"x": 5, "y": 6}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["isError"] is False and body["structuredContent"] == {"x": 5, "y": 6, "label": None}
    r = httpx.post(server.url + "/tools/js-typed.weather.get-weather/call",
                   json={"city": "Cairo", "units": "metric"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["structuredContent"] == {"city": "Cairo", "temperature": 35, "units": "metric",
                                             "conditions": ["sunny"], "wind": None}
    r = httpx.post(server.url + f"/tools/{K}checked-div/call", json={"a": 1, "b": 0}, timeout=30)
    assert r.status_code == 500 and r.json()["isError"] is True
    assert r.json()["content"] == [{"type": "text", "text": "cannot divide 1 by 0"}]
    tool = httpx.get(server.url + f"/tools/{T}echo-perms").json()
    assert tool["inputSchema"] == KITCHEN_TOOLS[T + "echo-perms"][0]
    spec = httpx.get(server.url + "/openapi.json").json()
    assert f"/tools/{T}make-point/call" in spec["paths"]


# --- JavaScript and Python components ------------------------------------------------------


def test_js_component_tools(mcp):
    paris = ok(mcp.call("js-typed.weather.get-weather", {"city": "Paris", "units": "metric"}))
    assert paris["structuredContent"] == {"city": "Paris", "temperature": 18.5, "units": "metric",
                                          "conditions": ["cloudy", "light rain"], "wind": 12}
    assert json.loads(paris["content"][0]["text"]) == paris["structuredContent"]
    hot = ok(mcp.call("js-typed.weather.get-weather", {"city": "Cairo", "units": "imperial"}))
    assert hot["structuredContent"]["temperature"] == pytest.approx(95.0)
    assert hot["structuredContent"]["wind"] is None
    assert tool_error(mcp.call("js-typed.weather.get-weather", {"city": "Atlantis", "units": "metric"})) \
        == "unknown city: Atlantis"
    assert "/units" in invalid(mcp.call("js-typed.weather.get-weather", {"city": "Paris", "units": "kelvin"}))


def test_python_component_tools(mcp):
    assert value_of(mcp.call("py-typed.eval-expr", {"expr": "1 + 2 * (3 - 1)"})) == 5.0
    assert value_of(mcp.call("py-typed.eval-expr", {"expr": "-7 / 2"})) == -3.5
    assert "division by zero" in tool_error(mcp.call("py-typed.eval-expr", {"expr": "1 / 0"}))
    assert "expected" in tool_error(mcp.call("py-typed.eval-expr", {"expr": "(1"}))
    area = mcp.call("py-typed.shapes.area", {"s": {"tag": "rect", "val": [2, 3.5]}})
    assert value_of(area) == 7.0
    assert value_of(mcp.call("py-typed.shapes.area", {"s": {"tag": "dot"}})) is None
    largest = mcp.call("py-typed.shapes.largest", {"shapes": [
        {"tag": "circle", "val": 1}, {"tag": "rect", "val": [2, 3]}, {"tag": "dot"}]})
    assert value_of(largest) == {"tag": "rect", "val": [2.0, 3.0]}
    assert value_of(mcp.call("py-typed.shapes.largest", {"shapes": []})) is None
    assert value_of(mcp.call("py-typed.shapes.largest", {"shapes": [{"tag": "dot"}]})) == {"tag": "dot"}


# --- selection and renaming ---------------------------------------------------------------


def test_tools_selects_and_renames(start_server):
    s = start_server(plugins=(KITCHEN,), config="""
[plugins.typed-kitchen]
tools = ["add", "types.echo-u8", { export = "types.echo-color", name = "kitchen.color" }]
""")
    tools = listed(s)
    assert set(tools) == {K + "add", T + "echo-u8", "kitchen.color"}
    assert tools["kitchen.color"].inputSchema == KITCHEN_TOOLS[T + "echo-color"][0]
    c = Mcp(s.url)
    assert value_of(c.call("kitchen.color", {"v": "blue"})) == "blue"
    assert value_of(c.call(K + "add", {"a": 1, "b": 2})) == 3
    assert c.call(T + "echo-color", {"v": "blue"})["error"]["code"] == -32601
    assert c.call(K + "describe", {"name": "x"})["error"]["code"] == -32601


def test_selecting_a_function_it_does_not_export_is_a_load_problem(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(plugin_path(KITCHEN), plugins / f"{KITCHEN}.wasm")
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{tmp_path / "cache"}"\n'
                   '[plugins.typed-kitchen]\ntools = ["add", "types.no-such-function"]\n')
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(plugins))
    assert out.returncode != 0
    assert "no-such-function" in out.stdout + out.stderr, out.stdout + out.stderr


# --- descriptions from a package-docs section ---------------------------------------------


def leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def with_package_docs(component: bytes, docs: dict, version: int) -> bytes:
    """The component with a top-level custom section `package-docs` appended
    (as cargo-component and wit-docs-inject write it)."""
    name = b"package-docs"
    payload = bytes([version]) + json.dumps(docs).encode()
    body = leb128(len(name)) + name + payload
    return component + b"\x00" + leb128(len(body)) + body


def custom_section_names(component: bytes) -> list[str]:
    """The names of a component's top-level custom sections."""
    names, pos = [], 8
    while pos < len(component):
        section_id = component[pos]
        pos += 1
        size, shift = 0, 0
        while True:
            byte = component[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if section_id == 0:
            name_len, shift, p = 0, 0, pos
            while True:
                byte = component[p]
                p += 1
                name_len |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            names.append(component[p:p + name_len].decode())
        pos += size
    return names


def test_a_plain_wit_bindgen_build_carries_no_package_docs():
    # What the signature descriptions above rely on.
    assert "package-docs" not in custom_section_names(plugin_path(KITCHEN).read_bytes())


@pytest.mark.parametrize("version", [1, 0])
def test_package_docs_give_the_descriptions(tmp_path, shared_cache, version):
    docs = {
        "worlds": {"kitchen": {"docs": "The kitchen world.", "funcs": {
            "add": "Adds two numbers.\n\nWraps on overflow.",
            "fetch": {"docs": "GETs a URL."},
        }}},
        "interfaces": {"types": {"docs": "Every type.", "funcs": {
            "echo-u8": {"docs": "Echoes a byte."},
            "lookup": "Finds a point by key.",
        }}},
    }
    original = plugin_path(KITCHEN).read_bytes()
    s = Server(tmp_path, ())
    (s.plugins_dir / f"{KITCHEN}.wasm").write_bytes(with_package_docs(original, docs, version))
    assert "package-docs" in custom_section_names((s.plugins_dir / f"{KITCHEN}.wasm").read_bytes())
    s.start()
    try:
        tools = listed(s)
        assert tools[K + "add"].description == "Adds two numbers.\n\nWraps on overflow."
        assert tools[K + "fetch"].description == "GETs a URL."
        assert tools[T + "echo-u8"].description == "Echoes a byte."
        assert tools[T + "lookup"].description == "Finds a point by key."
        # A function the section does not document keeps its signature.
        assert tools[K + "describe"].description == SIGNATURES[K + "describe"]
        # Titles and schemas do not change.
        assert tools[K + "add"].title == "Add"
        assert tools[K + "add"].inputSchema == KITCHEN_TOOLS[K + "add"][0]
        assert value_of(Mcp(s.url).call(K + "add", {"a": 1, "b": 1})) == 2
    finally:
        s.stop()


def test_package_docs_of_exports_sharing_an_imports_name_come_from_the_export_half(tmp_path):
    """wit-parser keeps an export whose name an import also has in the export
    half of each table (`func_exports`, `interface_exports`); the import half
    (`funcs`, `interfaces`) holds the import's docs. Hangar calls exports."""
    docs = {
        "worlds": {"kitchen": {
            "funcs": {"add": "The import's docs, never shown.", "fetch": "GETs a URL."},
            "func_exports": {"add": {"docs": "Adds two numbers (the export half)."}},
            "interfaces": {"types": {"funcs": {"lookup": "The import's lookup."}}},
            "interface_exports": {"types": {"funcs": {"lookup": "Finds a point (the export half)."}}},
        }},
        "interfaces": {"types": {"funcs": {"echo-u8": "Echoes a byte."}}},
    }
    s = Server(tmp_path, ())
    (s.plugins_dir / f"{KITCHEN}.wasm").write_bytes(
        with_package_docs(plugin_path(KITCHEN).read_bytes(), docs, 1))
    s.start()
    try:
        tools = listed(s)
        assert tools[K + "add"].description == "Adds two numbers (the export half)."
        assert tools[K + "fetch"].description == "GETs a URL."
        assert tools[T + "lookup"].description == "Finds a point (the export half)."
        assert tools[T + "echo-u8"].description == "Echoes a byte."
    finally:
        s.stop()
