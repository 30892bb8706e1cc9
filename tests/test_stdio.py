"""`hangar serve --stdio`: MCP on stdin and stdout, one JSON-RPC message a line, driven by
clients nobody here wrote (the Python SDK's stdio client, the Inspector CLI) and by raw lines
for what those do not let a test say (a malformed line, the end of stdin)."""

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import HANGAR_BIN, PROTOCOL, free_port, plugin_path, wait_for

TESTS = Path(__file__).resolve().parent
NODE = TESTS / "node_modules/.bin/node"
INSPECTOR = TESTS / "node_modules/@modelcontextprotocol/inspector-cli/build/index.js"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A config and plugins folder for `hangar serve --stdio`; each test starts its own process."""
    d = tmp_path_factory.mktemp("stdio")
    (d / "plugins").mkdir()
    for name in ("echo", "everything", "api-key"):
        (d / "plugins" / f"{name}.wasm").write_bytes(plugin_path(name).read_bytes())
    return d


def write_config(home, extra=""):
    path = home / f"hangar-{time.monotonic_ns()}.toml"
    path.write_text(f'[server]\ncache_dir = "{home / "cache"}"\n' + extra)
    return path


def args(home, config, *more):
    return ["serve", "--stdio", "--config", str(config), "--plugins", str(home / "plugins"), *more]


def sdk_session(home, config, run, env=None, log=None, elicitation=None):
    """Runs `run(session)` in a Python SDK stdio session with `hangar serve --stdio`."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(HANGAR_BIN), args=args(home, config),
                                   env={**os.environ, "NO_COLOR": "1", **(env or {})}, cwd=str(home))

    async def main():
        errlog = open(log or os.devnull, "w")
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                    await session.initialize()
                    return await run(session)
        finally:
            errlog.close()

    return asyncio.run(main())


def test_the_python_sdk_lists_calls_and_gets_progress(home):
    config = write_config(home)

    async def run(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        echo = await session.call_tool("echo", {"text": "over stdio", "times": 2})
        progress = []

        async def on_progress(done, total, message):
            progress.append((done, total))

        await session.set_logging_level("debug")
        with_progress = await session.call_tool("test_tool_with_progress", {},
                                                progress_callback=on_progress)
        failed = await session.call_tool("test_error_handling", {})
        return tools, echo, progress, with_progress, failed

    tools, echo, progress, with_progress, failed = sdk_session(home, config, run)
    assert {"echo", "test_tool_with_progress", "slow_compute"} <= tools
    assert echo.isError is False and echo.content[0].text == "over stdio over stdio"
    assert with_progress.isError is False
    assert len(progress) >= 3, progress
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)
    assert failed.isError is True and "intentionally" in failed.content[0].text


def test_the_python_sdk_answers_an_elicitation(home):
    from mcp import types

    config = write_config(home)
    asked = []

    async def elicitation(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"username": "stdio-user",
                                                           "email": "s@example.com"})

    async def run(session):
        return await session.call_tool("test_elicitation", {"message": "Who are you?"})

    result = sdk_session(home, config, run, elicitation=elicitation)
    assert asked == ["Who are you?"]
    assert result.isError is False, result
    assert "stdio-user" in result.content[0].text and "s@example.com" in result.content[0].text


def test_a_cancelled_call_stops_and_the_session_goes_on(home, tmp_path):
    from mcp import types

    config = write_config(home)
    log = tmp_path / "stderr.log"

    async def run(session):
        # The SDK numbers requests from 0; the next one is the slow call.
        call_id = session._request_id
        outcome = {}

        async def slow():
            try:
                outcome["result"] = await session.call_tool("slow_compute", {"seconds": 60})
            except Exception as e:  # noqa: BLE001 (whatever the SDK raises, it is not a result)
                outcome["error"] = e

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            # Time for the call to start (a cancel for a call not yet running is a no-op,
            # and this test would then fail, not pass).
            await anyio.sleep(1)
            await session.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=call_id, reason="test"))))
            # A cancelled request gets no answer: the call is ended here, on the client's side.
            with anyio.move_on_after(5):
                while 'outcome="cancelled"' not in log.read_text():
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        echo = await session.call_tool("echo", {"text": "still here"})
        return outcome, echo

    outcome, echo = sdk_session(home, config, run, log=log)
    assert "result" not in outcome, outcome
    assert echo.content[0].text == "still here"
    text = log.read_text()
    access = [line for line in text.splitlines() if "slow_compute" in line and "outcome=" in line]
    assert access and 'outcome="cancelled"' in access[0], text[-2000:]


class Raw:
    """`hangar serve --stdio` driven by raw lines."""

    def __init__(self, home, config, *more, env=None):
        self.log = open(home / f"raw-{time.monotonic_ns()}.log", "w+")
        self.proc = subprocess.Popen([str(HANGAR_BIN), *args(home, config, *more)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, cwd=home,
                                     env={**os.environ, "NO_COLOR": "1", **(env or {})})

    def send(self, line: bytes):
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def request(self, id, method, params=None):
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg).encode())
        return self.read()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, f"stdout ended; stderr:\n{self.stderr()}"
        return json.loads(line)

    def initialize(self):
        r = self.request(0, "initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                           "clientInfo": {"name": "raw", "version": "0"}})
        assert r["result"]["protocolVersion"] == PROTOCOL, r
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return r

    def stderr(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def listening_sockets(pid) -> int:
    """How many TCP sockets process `pid` has in LISTEN state."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A":
                listening.add(fields[9])
    fds = Path(f"/proc/{pid}/fd")
    inodes = {os.readlink(fd)[8:-1] for fd in fds.iterdir()
              if os.readlink(fd).startswith("socket:[")}
    return len(listening & inodes)


def test_a_malformed_line_gets_a_parse_error_and_stdin_ending_ends_the_process(home):
    raw = Raw(home, write_config(home))
    try:
        raw.initialize()
        # Only stdio: no port is bound.
        assert listening_sockets(raw.proc.pid) == 0
        raw.send(b'{"jsonrpc": "2.0", "id": 5, "method": ')
        error = raw.read()
        assert error["id"] is None and error["error"]["code"] == -32700, error
        raw.send(b"[]")
        assert raw.read()["error"]["code"] == -32600
        assert raw.request(6, "no/such/method")["error"]["code"] == -32601
        # The session goes on.
        echo = raw.request(7, "tools/call", {"name": "echo", "arguments": {"text": "after"}})
        assert echo["id"] == 7 and echo["result"]["content"][0]["text"] == "after"
        # Nothing but JSON-RPC on stdout: the logs went to stderr.
        assert "loaded in" in raw.stderr()
        # A request still running when stdin ends is answered, then the process exits 0.
        raw.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                             "params": {"name": "slow_compute", "arguments": {"seconds": 0.5}}})
                 .encode())
        raw.proc.stdin.close()
        last = raw.read()
        assert last["id"] == 8 and "computed" in last["result"]["content"][0]["text"], last
        assert raw.proc.stdout.readline() == b""
        assert raw.proc.wait(30) == 0, raw.stderr()
    finally:
        raw.close()


def test_the_sessions_unprompted_messages_come_as_lines(home):
    raw = Raw(home, write_config(home))
    try:
        raw.initialize()
        seen = []
        for id in (1, 2):  # the guest's tool list flipped, and flipped back
            raw.send(json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                 "params": {"name": "test_trigger_tool_change"}}).encode())
            lines = []
            while not ({"result", "method"} <= {k for m in lines for k in m}):
                lines.append(raw.read())
            seen += lines
        changed = [m for m in seen if m.get("method") == "notifications/tools/list_changed"]
        results = [m["result"]["content"][0]["text"] for m in seen if "result" in m]
        assert len(changed) == 2, seen
        assert sorted(results) == ["test_changed_tool listed", "test_changed_tool removed"], seen
    finally:
        raw.close()


def test_stdio_and_http_serve_together(home):
    port = free_port()
    raw = Raw(home, write_config(home), "--listen", f"127.0.0.1:{port}")
    try:
        raw.initialize()
        wait_for(lambda: listening_sockets(raw.proc.pid) == 1, 30, "the HTTP listener")
        r = httpx.post(f"http://127.0.0.1:{port}/mcp", json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "http"}}},
            headers={"accept": "application/json, text/event-stream"})
        assert r.json()["result"]["content"][0]["text"] == "http"
        echo = raw.request(2, "tools/call", {"name": "echo", "arguments": {"text": "stdio"}})
        assert echo["result"]["content"][0]["text"] == "stdio"
        # The end of stdin ends the HTTP side too.
        raw.proc.stdin.close()
        assert raw.proc.wait(30) == 0
    finally:
        raw.close()


AUTH = """
[plugins.api-key]
config = { keys = "alice=Bearer s3cret" }

[[tools]]
name = "echo"
auth = { plugin = "api-key", policy = { header = "authorization" } }
"""


@pytest.mark.parametrize("token,allowed", [("s3cret", True), ("wrong", False), (None, False)])
def test_the_auth_stage_sees_hangar_token_as_a_bearer_token(home, token, allowed):
    env = {"HANGAR_TOKEN": token} if token else {}
    env.setdefault("HANGAR_TOKEN", "")
    raw = Raw(home, write_config(home, AUTH), env=env)
    try:
        raw.initialize()
        r = raw.request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        if allowed:
            assert r["result"]["content"][0]["text"] == "hi", r
        else:
            assert r["error"]["data"]["stage"] == "auth", r
    finally:
        raw.close()


def test_a_configured_principal_is_the_caller(home):
    hidden = '\n[[tools]]\nname = "greet"\nvisible_to = { sub = ["alice"] }\n'
    for principal, sees in (("alice", True), ("mallory", False)):
        config = write_config(home, f'stdio_principal = "{principal}"\n' + hidden)
        raw = Raw(home, config)
        try:
            raw.initialize()
            names = {t["name"] for t in raw.request(1, "tools/list")["result"]["tools"]}
            assert ("greet" in names) == sees, (principal, names)
            r = raw.request(2, "tools/call", {"name": "greet", "arguments": {"name": "x"}})
            assert ("result" in r) == sees, r
            wait_for(lambda: f'principal="{principal}"' in raw.stderr(), 10, "the access line")
        finally:
            raw.close()


def test_the_inspector_cli_lists_and_calls_over_stdio(home):
    config = write_config(home)
    # inspector-cli 1.0.3 reads `../package.json` from its working directory (test_oauth.py).
    cwd = TESTS / "clients"
    # The server's command, the Inspector's options, then after `--` the server's own flags.
    def inspector(*options):
        out = subprocess.run([str(NODE), str(INSPECTOR), str(HANGAR_BIN), "--transport", "stdio",
                              *options, "--", *args(home, config)],
                             capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL, cwd=cwd)
        assert out.returncode == 0, out.stderr + out.stdout
        return json.loads(out.stdout)

    listed = inspector("--method", "tools/list")
    assert {"echo", "slow_compute"} <= {t["name"] for t in listed["tools"]}
    called = inspector("--method", "tools/call", "--tool-name", "echo",
                       "--tool-arg", "text=from the inspector")
    assert called["content"][0]["text"] == "from the inspector"


def test_stdio_serves_the_default_toolset_as_mcp_does(home):
    """With `[server] default_toolset`, stdin sees what `/mcp` would: that toolset's tools only,
    and a tool outside it is an unknown tool."""
    from mcp.shared.exceptions import McpError

    config = write_config(home, 'default_toolset = "plain"\n[toolsets.plain]\ntools = ["echo"]\n')

    async def run(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        echo = await session.call_tool("echo", {"text": "in the toolset"})
        try:
            await session.call_tool("test_tool_with_progress", {})
            outside = None
        except McpError as e:
            outside = e.error
        return tools, echo, outside

    tools, echo, outside = sdk_session(home, config, run)
    assert tools == {"echo"}
    assert not echo.isError and "in the toolset" in echo.content[0].text
    assert outside is not None, "a tool outside the toolset was called"
    assert outside.code == -32601 and "not found" in outside.message.lower(), outside
