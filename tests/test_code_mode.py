"""Code mode (`[server] catalog = "code"`, `[code]`): `run` executes an agent's
TypeScript or JavaScript in the code sandbox (host/sandbox/js, built by
scripts/test into target/sandbox/code-js.wasm, where the binary looks by
default), and every tool call the program makes is a whole pipeline call as
the caller: a wasm tool, a SQL tool and an upstream tool, auth with the
caller's key, visibility, limits, cancellation, the access log."""

import json
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import HANGAR_BIN, ROOT, Mcp, parse_reply, wait_for

SERVER_SCRIPT = Path(__file__).parent / "clients" / "upstream_server.py"
SANDBOX = ROOT / "target" / "sandbox" / "code-js.wasm"
KEY = "code-mode-key"

CONFIG = f"""
catalog = "code"
auth_failures = "1000/m"

[code]
max_tool_calls = 20
max_console_bytes = 200

[code.limits]
deadline = "4s"

[plugins.api-key]
config = {{ keys = "alice={KEY}" }}

[connectors.lite]
kind = "sqlite"
path = "code.db"

[[tools]]
name = "db.price"
description = "The price of one product, by id"
use = "lite"
statement = "SELECT id, price FROM products WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}

[[tools]]
name = "db.secret"
description = "Only for alice"
use = "lite"
statement = "SELECT 'for alice' AS note"
auth = {{ plugin = "api-key", policy = {{ header = "x-api-key" }} }}

[[tools]]
name = "db.hidden"
description = "Shown to bob only"
use = "lite"
statement = "SELECT 'hidden' AS note"
auth = {{ plugin = "api-key", policy = {{ header = "x-api-key" }} }}
visible_to = {{ sub = ["bob"] }}

[[tools]]
name = "db.limited"
description = "Twice a minute"
use = "lite"
statement = "SELECT 1 AS one"
rate_limit = "2/m"

[toolsets.small]
tools = ["echo", "db.price"]

[upstreams.up]
command = [{json.dumps(sys.executable)}, {json.dumps(str(SERVER_SCRIPT))}]
args = ["stdio"]
"""


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    s = start_server(plugins=("echo", "misbehave", "api-key"), config=CONFIG)
    return s


@pytest.fixture(scope="module", autouse=True)
def database(server):
    """The SQLite file the connector opened (with `init.sql` missing it is empty):
    the products the SQL tool reads are written here, once."""
    import sqlite3
    db = server.workdir / "code.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE IF NOT EXISTS products (id INTEGER PRIMARY KEY, price INTEGER)")
    con.executemany("INSERT OR REPLACE INTO products VALUES (?, ?)", [(i, i * 10) for i in range(1, 51)])
    con.commit()
    con.close()


def mcp(server, path="/mcp", headers=None):
    c = Mcp(server.url, path=path)
    if headers:
        c.http.headers.update(headers)
    c.initialize()
    return c


def run(c, code, language=None, **kw):
    args = {"code": code}
    if language:
        args["language"] = language
    return c.call("run", args, **kw)


def result(reply):
    assert "result" in reply, reply
    return reply["result"]


def text(reply):
    return "\n".join(b["text"] for b in result(reply)["content"] if b["type"] == "text")


def test_code_catalog_lists_search_read_and_run_only(server):
    c = mcp(server)
    names = [t["name"] for t in result(c.request("tools/list"))["tools"]]
    assert names == ["search_tools", "read_tool", "run"], names
    run_tool = result(c.request("tools/list"))["tools"][2]
    assert "tools.NAME" in run_tool["description"]
    assert run_tool["inputSchema"]["required"] == ["code"]


def test_a_program_combines_a_wasm_a_sql_and_an_upstream_tool(server):
    c = mcp(server)
    code = """
    interface Price { id: number; price: number }
    const echoed: string = await tools.echo({ text: "hi" });
    const row = (await tools.db.price({ id: 7 })) as { rows: Price[] };
    // FastMCP gives an int's structured content as {"result": n}.
    const { result: sum } = (await tools.call("up.add", { a: 2, b: 3 })) as { result: number };
    console.log("sum is", sum);
    return { echoed, price: row.rows[0].price, sum };
    """
    r = result(run(c, code))
    assert not r.get("isError"), r
    got = r["structuredContent"]
    assert got["echoed"] == "hi", got
    assert got["price"] == 70, got
    assert got["sum"] == 5, got
    # The answer as JSON text, then the console as a second block.
    assert json.loads(r["content"][0]["text"]) == got
    assert r["content"][1]["text"] == "sum is 5\n"
    assert r["_meta"]["hangar/code"]["calls"] == 3


def test_anything_but_an_object_is_wrapped_as_result(server):
    c = mcp(server)
    r = result(run(c, "return [1, 2, 3].map((x: number) => x * 2);"))
    assert r["structuredContent"] == {"result": [2, 4, 6]}
    r = result(run(c, "console.log('only this');"))
    assert "structuredContent" not in r or r["structuredContent"] is None
    assert [b["text"] for b in r["content"]] == ["only this\n"]


def test_plain_javascript_runs_when_asked(server):
    c = mcp(server)
    r = result(run(c, "const x = await tools.echo({ text: 'js' }); return { x };", language="javascript"))
    assert r["structuredContent"] == {"x": "js"}
    # Type annotations are TypeScript, not JavaScript.
    r = result(run(c, "const x: number = 1; return x;", language="javascript"))
    assert r["isError"] is True and "SyntaxError" in text({"result": r}), r


def test_eight_calls_under_promise_all_run_together(server):
    """`gather` answers only once all eight have arrived: had the calls run one
    after another, the first would have failed after its timeout."""
    c = mcp(server)
    code = f'const key = "eight-{time.monotonic_ns()}";' + """
    const got = await Promise.all([...Array(8).keys()].map(() =>
        tools.up.gather({ key, n: 8, timeout: 20 })));
    return { got };
    """
    r = result(run(c, code, headers=None))
    assert r["structuredContent"] == {"got": [{"result": 8}] * 8}, r


def test_max_parallel_calls_caps_calls_running_at_once(start_server):
    s = start_server(plugins=("echo", "api-key"), config=CONFIG.replace(
        "max_tool_calls = 20", "max_tool_calls = 20\nmax_parallel_calls = 2"))
    c = mcp(s)
    code = f'const key = "capped-{time.monotonic_ns()}";' + """
    const out = await Promise.allSettled([1, 2, 3].map(() => tools.up.gather({ key, n: 3, timeout: 1.5 })));
    return { statuses: out.map(o => o.status) };
    """
    r = result(run(c, code))
    # Two ran together and waited for a third that could not start: both
    # failed, and the third, alone, too.
    assert r["structuredContent"] == {"statuses": ["rejected"] * 3}, r


def test_runs_leave_tool_slots_to_the_calls_their_programs_make(start_server):
    """A run holds a tool slot while its program runs, and each wasm tool its
    program calls needs one more. With two tool slots (four instances, two
    kept for auth and mappers), two runs that both got in would hold both,
    and their `echo` calls would each fail `busy` after echo's 1 s
    queue_timeout. Runs take at most half the tool slots: the second run
    waits (its own queue_timeout, 10 s here) until the first has ended, and
    both echo. Each program first waits up to 2 s for the other at the
    upstream's `gather`, so two runs admitted together would meet there and
    then call echo at the same time."""
    config = CONFIG.replace('catalog = "code"', 'catalog = "code"\nmax_instances = 4\nstage_instances = 2')
    config = config.replace('deadline = "4s"', 'deadline = "8s"\nqueue_timeout = "10s"')
    s = start_server(plugins=("echo", "api-key"), config=config)
    code = f'const key = "runs-{time.monotonic_ns()}";' + """
    let met = true;
    try { await tools.up.gather({ key, n: 2, timeout: 2 }); } catch (e) { met = false; }
    const said: string = await tools.echo({ text: "slot" });
    return { met, said };
    """
    replies = [None, None]

    def one(i):
        replies[i] = run(mcp(s), code)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    got = [result(r) for r in replies]
    assert not any(r.get("isError") for r in got), got
    assert [r["structuredContent"] for r in got] == [{"met": False, "said": "slot"}] * 2, got


def test_a_tool_outside_the_toolset_or_hidden_is_not_found_to_the_program(server):
    c = mcp(server, path="/mcp/small")
    code = """
    const out: Record<string, string> = {};
    const args: Record<string, object> = { "echo": { text: "x" }, "up.add": { a: 1, b: 2 }, "db.hidden": {}, "no.such": {} };
    for (const [name, a] of Object.entries(args)) {
      try { await tools.call(name, a); out[name] = "ok"; }
      catch (e: any) { out[name] = `${e.code}/${e.stage}: ${e.message}`; }
    }
    return out;
    """
    got = result(run(c, code))["structuredContent"]
    assert got["echo"] == "ok", got
    assert got["up.add"].startswith("not_found/resolve"), got
    assert got["no.such"].startswith("not_found/resolve"), got
    # Through the whole catalog, alice (not bob) does not see db.hidden either.
    c = mcp(server, headers={"x-api-key": KEY})
    got = result(run(c, code))["structuredContent"]
    assert got["up.add"] == "ok", got
    assert got["echo"] == "ok", got
    assert got["db.hidden"].startswith("not_found/"), got


def test_a_tool_behind_auth_runs_with_the_callers_key_only(server):
    code = "try { return await tools.db.secret({}); } catch (e: any) { return { code: e.code, stage: e.stage }; }"
    anonymous = result(run(mcp(server), code))["structuredContent"]
    assert anonymous == {"code": "unauthorized", "stage": "auth"}, anonymous
    alice = result(run(mcp(server, headers={"x-api-key": KEY}), code))["structuredContent"]
    assert alice["rows"] == [{"note": "for alice"}], alice


def test_a_thrown_error_and_a_syntax_error_say_where_in_the_typescript(server):
    c = mcp(server)
    r = result(run(c, "const a: number = 1;\nconst b: string = 'x'; throw new Error('boom');"))
    assert r["isError"] is True
    assert r["content"][0]["text"] == "Error: Error: boom (at 2:30)", r
    assert r["_meta"]["hangar/code"]["position"] == {"line": 2, "column": 30}
    r = result(run(c, "let ok = 1;\nconst a: number = ;\n"))
    assert r["isError"] is True and r["_meta"]["hangar/code"]["kind"] == "syntax", r
    assert r["_meta"]["hangar/code"]["position"] == {"line": 2, "column": 19}, r
    r = result(run(c, "let a = 1;\n  a +;", language="javascript"))
    assert r["_meta"]["hangar/code"]["position"] == {"line": 2, "column": 6}, r
    # A failed tool call left uncaught: its code, stage and the line of the call.
    r = result(run(c, "\n\nawait tools.nothing.here({});"))
    assert r["isError"] is True
    meta = r["_meta"]["hangar/code"]
    assert (meta["code"], meta["stage"]) == ("not_found", "resolve"), meta
    assert meta["position"]["line"] == 3, meta


def test_console_is_captured_and_capped(server):
    c = mcp(server)
    r = result(run(c, "for (let i = 0; i < 100; i++) console.log('line', i); console.warn({ w: 1 }); return 1;"))
    console = r["content"][1]["text"]
    assert console.startswith("line 0\nline 1\n"), console
    # max_console_bytes = 200: the rest is counted, not kept.
    assert len(console.split("…")[0]) == 200, console
    assert "more bytes of console output not kept" in console


def test_a_runaway_loop_stops_at_the_runs_deadline(server):
    c = mcp(server)
    r = run(c, "while (true) {}")
    assert "error" in r, r
    assert "deadline of 4000 ms exceeded" in r["error"]["message"], r
    # The server goes on.
    assert result(run(c, "return 1;"))["structuredContent"] == {"result": 1}


def test_a_memory_bomb_stops_at_its_cap(server):
    c = mcp(server)
    # 16 MiB a step, allocated at once (no loop filling it): the cap comes
    # within a few steps, long before the deadline however loaded the machine.
    r = run(c, "const keep: Float64Array[] = []; while (true) keep.push(new Float64Array(1 << 21));")
    assert "error" in r, r
    assert "memory limit of 64 MiB exceeded" in r["error"]["message"], r


def test_max_tool_calls_is_a_limit_the_program_meets(server):
    c = mcp(server)
    r = result(run(c, "for (let i = 0; i < 25; i++) await tools.echo({ text: String(i) }); return 'all';"))
    assert r["isError"] is True, r
    assert "max_tool_calls of 20 exceeded" in r["content"][0]["text"], r
    assert r["_meta"]["hangar/code"]["code"] == "limit"
    assert r["_meta"]["hangar/code"]["calls"] == 20


def test_a_program_cannot_call_run(server):
    c = mcp(server)
    r = result(run(c, "return await tools.run({ code: 'return 1' });"))
    assert r["isError"] is True and "a program cannot call run" in r["content"][0]["text"], r


def test_nested_calls_are_logged_and_counted_as_calls_of_their_own(server):
    c = mcp(server)
    before = server.log_text().count('tool="db.price"')
    result(run(c, "await tools.db.price({ id: 1 }); await tools.db.price({ id: 2 }); return 0;"))
    lines = [l for l in server.log_text().splitlines() if 'tool="db.price"' in l]
    assert len(lines) - before == 2, lines[-3:]
    assert all('transport="code"' in l for l in lines[-2:]), lines[-2:]
    metrics = httpx.get(server.url + "/metrics").text
    assert 'hangar_calls_total{tool="db.price"' in metrics
    counted = [l for l in metrics.splitlines()
               if l.startswith('hangar_program_calls_total{tool="db.price",transport="code",outcome="ok"}')]
    assert counted and int(float(counted[0].split()[-1])) >= 2, counted


def test_cancelling_run_cancels_its_running_nested_call(server):
    c = mcp(server)
    done = {}

    def call():
        done["reply"] = run(c, "await tools.up.slow({ seconds: 30 }); return 'woke';", id=4242)

    t = threading.Thread(target=call)
    t.start()
    wait_for(lambda: "slow call started" in server.log_text(), 20, "the nested slow call to start")
    c.notify("notifications/cancelled", {"requestId": 4242, "reason": "test"})
    t.join(30)
    assert not t.is_alive()
    line = lambda: [l for l in server.log_text().splitlines() if 'tool="up.slow"' in l]
    wait_for(lambda: line(), 10, "the nested call's access line")
    assert 'outcome="cancelled"' in line()[-1], line()
    # The upstream saw its call cancelled too.
    c2 = mcp(server)
    wait_for(lambda: 30 in json.loads(text(c2.call("up.cancelled", {}))), 10, "the upstream to see the cancel")


def test_run_over_stdio_with_the_python_sdk(server, tmp_path):
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    config = tmp_path / "hangar.toml"
    config.write_text(f'[server]\ncatalog = "code"\ncache_dir = "{server.workdir / "cache"}"\n')
    params = StdioServerParameters(
        command=str(HANGAR_BIN),
        args=["serve", "--stdio", "--config", str(config), "--plugins", str(server.plugins_dir)])

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = [t.name for t in (await session.list_tools()).tools]
                r = await session.call_tool("run", {"code": "const t: string = await tools.echo({ text: 'stdio' }); return { t };"})
                return names, r

    names, r = asyncio.run(main())
    assert names == ["search_tools", "read_tool", "run"], names
    assert r.isError is False, r
    assert r.structuredContent == {"t": "stdio"}, r


def test_a_missing_sandbox_is_a_problem_and_run_says_why(start_server, tmp_path):
    s = start_server(plugins=("echo",), config='catalog = "code"\n[code]\njavascript = "/nonexistent/code-js.wasm"\n')
    health = httpx.get(s.url + "/healthz").json()
    assert "code sandbox" in json.dumps(health), health
    r = run(mcp(s), "return 1;")
    assert "error" in r, r
    assert "code mode is not available" in r["error"]["message"], r


def test_read_tool_and_tools_d_ts_declare_the_callers_tools_in_typescript(server):
    c = mcp(server)
    read = result(c.call("read_tool", {"path": "db.price"}))["structuredContent"]
    assert "/** The price of one product, by id */\nprice(args: {\n" in read["typescript"], read
    assert "  id: number;\n" in read["typescript"], read
    assert read["python"].startswith("async def price(*, id: int) -> "), read
    listed = [r["uri"] for r in result(c.request("resources/list"))["resources"]]
    assert "hangar://code/tools.d.ts" in listed, listed
    dts = result(c.request("resources/read", {"uri": "hangar://code/tools.d.ts"}))["contents"][0]
    assert dts["mimeType"] == "application/typescript"
    ts = dts["text"]
    assert ts.startswith("/** The tools you may call, as `await tools.NAME(args)`. */\ndeclare const tools: {\n"), ts
    assert "\n  echo(args" in ts and "\n  db: {\n" in ts and "\n  up: {\n" in ts, ts
    assert "    price(args: {\n" in ts, ts
    # Hidden from this caller: not declared either.
    assert "hidden(" not in ts, ts
    # Through a toolset: only what it holds.
    small = result(mcp(server, path="/mcp/small").request("resources/read", {"uri": "hangar://code/tools.d.ts"}))
    ts = small["contents"][0]["text"]
    assert "echo(args" in ts and "price(args" in ts and "up: {" not in ts, ts


def test_the_explorers_run_view_runs_a_program_with_the_callers_tools(server):
    import shutil as sh

    from playwright.sync_api import sync_playwright

    chromium = sh.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(server.url + "/ui")
        page.wait_for_selector("#view-run:not([hidden])")
        page.click("#view-run")
        # The caller's tools.d.ts, as the resource has it. (A locator waits in
        # Playwright's own script: the page's CSP forbids the eval a string
        # passed to wait_for_function needs.)
        page.locator("#tools-dts", has_text="declare const tools").wait_for(state="attached")
        assert "price(args: {" in page.locator("#tools-dts").text_content()
        page.fill("#program", "const r: { rows: { price: number }[] } = await tools.db.price({ id: 3 });\n"
                              "console.log('read', r.rows.length);\nreturn { price: r.rows[0].price };")
        page.click("#run")
        page.wait_for_selector("#outcome:not(.error)")
        texts = page.locator("#outcome .text").all_inner_texts()
        assert json.loads(texts[0]) == {"price": 30}, texts
        assert texts[1].strip() == "read 1", texts
        # A thrown error is marked, with its line and column.
        page.fill("#program", "let x: number = 1;\nthrow new Error('nope');")
        page.click("#run")
        page.wait_for_selector("#outcome.error")
        assert "Error: nope (at 2:7)" in page.locator("#outcome").inner_text()
        page.close()
        browser.close()


def test_python_programs_call_the_same_tools_the_same_way(server):
    c = mcp(server)
    code = """
import json
first = tools.echo(text="py")          # started now...
price = tools.db.price(id=4)           # ...and this one with it
echoed, row = await first, await price
total = await tools.call("up.add", {"a": 1, "b": 2})
print("rows", len(row["rows"]), {"k": 1})
return {"echoed": echoed, "price": row["rows"][0]["price"], "total": total["result"]}
"""
    r = result(run(c, code, language="python"))
    assert not r.get("isError"), r
    assert r["structuredContent"] == {"echoed": "py", "price": 40, "total": 3}, r
    assert r["content"][1]["text"] == 'rows 1 {"k": 1}\n', r
    assert r["_meta"]["hangar/code"]["calls"] == 3


def test_python_calls_made_together_run_together(server):
    c = mcp(server)
    key = f"py-{time.monotonic_ns()}"
    code = f"""
calls = [tools.up.gather(key="{key}", n=4, timeout=20) for _ in range(4)]
return [(await call)["result"] for call in calls]
"""
    r = result(run(c, code, language="python"))
    assert r["structuredContent"] == {"result": [4, 4, 4, 4]}, r


def test_python_errors_say_where(server):
    c = mcp(server)
    r = result(run(c, "x = 1\nif x:\n    y = (\n", language="python"))
    assert r["isError"] is True and r["_meta"]["hangar/code"]["kind"] == "syntax", r
    assert r["_meta"]["hangar/code"]["position"]["line"] in (3, 4), r
    r = result(run(c, "x = 1\nraise ValueError('nope')", language="python"))
    assert r["content"][0]["text"] == "Error: ValueError: nope (at 2:1)", r
    r = result(run(c, "\n\nawait tools.no.such()", language="python"))
    meta = r["_meta"]["hangar/code"]
    assert (meta["code"], meta["stage"], meta["position"]["line"]) == ("not_found", "resolve", 3), meta


def test_a_python_runaway_stops_at_the_deadline(server):
    r = run(mcp(server), "while True:\n    pass", language="python")
    assert "deadline of 4000 ms exceeded" in r["error"]["message"], r


def test_a_toolset_can_serve_code_mode_while_mcp_serves_every_tool(start_server):
    s = start_server(plugins=("echo",), config='[toolsets.agents]\ntools = ["echo"]\ncatalog = "code"\n')
    whole = [t["name"] for t in result(mcp(s).request("tools/list"))["tools"]]
    assert "run" not in whole and "echo" in whole, whole
    agents = mcp(s, path="/mcp/agents")
    names = [t["name"] for t in result(agents.request("tools/list"))["tools"]]
    assert names == ["search_tools", "read_tool", "run"], names
    r = result(run(agents, "return await tools.echo({ text: 'via the toolset' });"))
    assert r["structuredContent"] == {"result": "via the toolset"}, r
    # Not offered on /mcp, so not there to call.
    assert "error" in run(mcp(s), "return 1;")
    assert httpx.post(s.url + "/tools/run/call", json={"code": "return 1;"}).status_code == 404


def sse_call(server, c, arguments, answer=None, meta=None):
    """`run` on an SSE stream: every message the server sent, answering a
    request it sends with `answer(request)`."""
    http = httpx.Client(base_url=server.url, timeout=60)
    params = {"name": "run", "arguments": arguments}
    if meta:
        params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": params}
    messages = []
    headers = {"accept": "application/json, text/event-stream", "mcp-session-id": c.session}
    with http.stream("POST", "/mcp", json=body, headers=headers) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            msg = json.loads(line[6:])
            messages.append(msg)
            if "method" in msg and "id" in msg and answer:
                assert http.post("/mcp", json=answer(msg), headers=headers).status_code == 202
    http.close()
    return messages


@pytest.fixture(scope="module")
def everything(start_server):
    return start_server(plugins=("everything",), config='catalog = "code"\n')


def test_nested_progress_and_logs_reach_the_client_as_the_runs(everything):
    c = Mcp(everything.url)
    c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "code-test", "version": "0"}})
    c.notify("notifications/initialized")
    c.request("logging/setLevel", {"level": "debug"})
    messages = sse_call(everything, c, {"code": "await tools.test_tool_with_progress({});\n"
                                                "await tools.test_tool_with_logging({});\nreturn 'done';"},
                        meta={"progressToken": "run-7"})
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [0, 50, 100], messages
    assert all(p["progressToken"] == "run-7" for p in progress)
    assert any(m.get("method") == "notifications/message" for m in messages), messages
    assert messages[-1]["result"]["structuredContent"] == {"result": "done"}, messages[-1]


def test_a_nested_call_asks_the_client_through_the_runs_request(everything):
    c = Mcp(everything.url)
    c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                             "clientInfo": {"name": "code-test", "version": "0"}})
    c.notify("notifications/initialized")
    asked = []

    def answer(request):
        asked.append(request)
        return {"jsonrpc": "2.0", "id": request["id"],
                "result": {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}}

    code = "const said: string = await tools.test_elicitation({ message: 'Who are you?' }); return { said };"
    messages = sse_call(everything, c, {"code": code}, answer)
    assert asked and asked[0]["method"] == "elicitation/create", messages
    assert asked[0]["params"]["message"] == "Who are you?"
    said = messages[-1]["result"]["structuredContent"]["said"]
    assert "ada" in said, messages[-1]
    # A client that declared no elicitation gets a clear error in the program.
    c2 = mcp(everything)
    code = "try { await tools.test_elicitation({ message: 'x' }); } catch (e: any) { return e.message; }"
    r = result(run(c2, code))
    assert "elicitation" in r["structuredContent"]["result"], r


def test_nested_calls_are_child_spans_of_the_runs_span(start_server):
    from test_traces import Receiver, attrs

    receiver = Receiver()
    try:
        s = start_server(plugins=("everything",), config='catalog = "code"\n', env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200"})
        import secrets
        trace_id = secrets.token_hex(16)
        c = mcp(s)
        r = run(c, "await tools.test_simple_text({}); await tools.test_simple_text({}); return 1;",
                headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
        assert "result" in r, r

        def spans():
            got = [sp for _, sp in receiver.trace(trace_id)]
            runs = [sp for sp in got if sp.name == "tools/call run"]
            nested = [sp for sp in got if sp.name == "tools/call test_simple_text"]
            return (got, runs, nested) if runs and len(nested) == 2 else None

        got, runs, nested = wait_for(spans, 30, "the run's span and its two nested calls'")
        # run → its handler stage (the program running) → each nested call.
        handler = [sp for sp in got if sp.name == "handler" and sp.parent_span_id == runs[0].span_id]
        assert len(handler) == 1, got
        assert all(sp.parent_span_id == handler[0].span_id for sp in nested), (handler, nested)
        assert attrs(nested[0])["gen_ai.tool.name"] == "test_simple_text"
    finally:
        receiver.close()


def test_a_programs_calls_meet_rate_limits_and_the_runs_deadline(server):
    c = mcp(server)
    code = """
    const out: string[] = [];
    for (let i = 0; i < 3; i++) {
      try { await tools.db.limited({}); out.push("ok"); } catch (e: any) { out.push(`${e.code}/${e.stage}`); }
    }
    return out;
    """
    r = result(run(c, code))
    assert r["structuredContent"] == {"result": ["ok", "ok", "rate_limited/rate_limit"]}, r
    # A nested call still running when the run's deadline passes ends with the run.
    r = run(c, "await tools.up.slow({ seconds: 29 }); return 'woke';")
    assert "deadline of 4000 ms exceeded" in r["error"]["message"], r
    # ...and the upstream sees that call cancelled.
    wait_for(lambda: 29 in json.loads(text(c.call("up.cancelled", {}))), 10, "the upstream to see the cancel")
