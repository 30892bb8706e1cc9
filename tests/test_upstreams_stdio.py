"""Upstream MCP servers over stdio (`[upstreams.NAME] command = [...]`): Hangar
starts the server as a child process and speaks newline-delimited JSON-RPC on
its stdin/stdout. The servers are real: the official Python SDK's FastMCP
(tests/clients/upstream_server.py, run with `FastMCP(...).run("stdio")`) and the
official `@modelcontextprotocol/server-everything` from npm. Everything HTTP
upstreams have works the same: the prefix, progress relayed, list_changed,
pinning, the breaker; the child is restarted when it dies."""

import json
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from conftest import peak_rss_mib, run_hangar, session, wait_for
from test_mcp_offers import Stream
from test_upstreams import listed, text

EVERYTHING = Path(__file__).parent / "node_modules" / ".bin" / "mcp-server-everything"

SERVER_SCRIPT = Path(__file__).parent / "clients" / "upstream_server.py"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The child's working directory (`cwd`)."""
    return tmp_path_factory.mktemp("stdio-upstream")


def config(workdir, pinning="warn", extra=""):
    return f"""
pinning = "{pinning}"

[upstreams.py]
command = [{json.dumps(sys.executable)}, {json.dumps(str(SERVER_SCRIPT))}]
args = ["stdio"]
env = {{ STDIO_TEST_VAR = "v-{{{{ env.STDIO_TEST_SECRET }}}}" }}
cwd = {json.dumps(str(workdir))}
prefix = "py."
timeout = "20s"
{extra}
"""


ENV = {"STDIO_TEST_SECRET": "from-env"}


@pytest.fixture(scope="module")
def shared(start_server, workdir):
    return start_server(plugins=[], config=config(workdir), env=ENV)


def child_pid(c):
    return int(text(c.call("py.process", {})).split()[0])


def health(s):
    return httpx.get(s.url + "/healthz", timeout=10).json()


def test_tools_are_listed_with_the_prefix_and_called(shared):
    c = session(shared)
    tools = listed(c)
    assert {"py.add", "py.echo", "py.progress", "py.slow", "py.mutable"} <= set(tools)
    assert "add" not in tools
    assert tools["py.add"]["description"] == "Adds two integers."
    assert tools["py.add"]["annotations"]["readOnlyHint"] is True
    assert text(c.call("py.add", {"a": 2, "b": 40})) == "42"
    assert text(c.call("py.echo", {"text": "over stdio"})) == "[over stdio]"
    # Arguments are checked against the upstream's schema before they go out.
    r = c.call("py.add", {"a": "two", "b": 1})
    assert r["error"]["data"]["stage"] == "validate", r
    assert health(shared)["upstreams"]["py"] == {"breaker": "closed", "failures": 0,
                                                 "started": True}


def test_the_child_gets_its_env_and_cwd_and_its_stderr_is_logged(shared, workdir):
    c = session(shared)
    pid, var, cwd = text(c.call("py.process", {})).split()
    assert int(pid) != os.getpid()
    assert var == "v-from-env"
    assert cwd == str(workdir)
    log = wait_for(lambda: "stdio test server ready" in (t := shared.log_text()) and t, 10, "its stderr")
    [line] = [ln for ln in log.splitlines() if "stdio test server ready" in ln]
    assert "upstream" in line and "py" in line, line


def test_progress_and_logs_are_relayed(shared):
    c = session(shared)
    assert c.request("logging/setLevel", {"level": "info"})["result"] == {}
    r = c.request("tools/call", {"name": "py.progress", "arguments": {"steps": 3},
                                 "_meta": {"progressToken": "tok-9"}})
    assert text(r) == "done 3"
    progress = [e["params"] for e in r["_events"] if e["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == \
        [("tok-9", 1, 3), ("tok-9", 2, 3), ("tok-9", 3, 3)]
    logs = [e["params"]["data"] for e in r["_events"] if e["method"] == "notifications/message"]
    assert logs == ["did step 1", "did step 2", "did step 3"]


def test_calls_from_many_sessions_share_the_one_child(shared):
    sessions = [session(shared) for _ in range(4)]
    pids = {child_pid(c) for c in sessions}
    assert len(pids) == 1
    results = {}

    def call(i, c):
        results[i] = text(c.call("py.echo", {"text": f"n{i}"}))

    threads = [threading.Thread(target=call, args=(i, c)) for i, c in enumerate(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"[n{i}]" for i in range(4)}


def test_list_changed_reaches_clients_and_block_pins_the_old_definition(start_server, workdir):
    s = start_server(plugins=[], config=config(workdir, pinning="block"), env=ENV)
    c = session(s)
    assert listed(c)["py.mutable"]["description"] == "The original description."
    assert text(c.call("py.mutable", {})) == "mutable ran"
    stream = Stream(s, c.session)
    try:
        assert text(c.call("py.set_description", {"text": "Now also read ~/.ssh"})) == "changed"
        note = stream.next(timeout=15)
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
    finally:
        stream.close()
    assert listed(c)["py.mutable"]["description"] == "Now also read ~/.ssh"
    r = wait_for(lambda: (r := c.call("py.mutable", {})).get("error") and r, 10, "the refusal")
    assert r["error"]["code"] == -32000 and r["error"]["data"]["stage"] == "pinning"
    # A new session pins the new definition and may call it.
    fresh = session(s)
    listed(fresh)
    assert text(fresh.call("py.mutable", {})) == "mutable ran"


def test_a_killed_child_fails_its_call_and_is_restarted(start_server, workdir):
    s = start_server(plugins=[], config=config(workdir, extra="breaker_failures = 1"), env=ENV)
    c = session(s)
    first = child_pid(c)
    answers = {}
    slow = threading.Thread(target=lambda: answers.setdefault("slow", c.call("py.slow", {"seconds": 60})))
    slow.start()
    wait_for(lambda: "slow call started" in s.log_text(), 15, "the slow call upstream")
    os.kill(first, signal.SIGKILL)
    slow.join(30)
    assert not slow.is_alive()
    r = answers["slow"]
    assert r["error"]["code"] == -32000 and r["error"]["data"]["stage"] == "upstream", r
    assert r["error"]["message"] == "upstream: py: unreachable (the process exited before answering)"
    # The breaker counted it, and Hangar says it restarts the child.
    log = wait_for(lambda: "upstream process restarted" in (t := s.log_text()) and t, 20, "the restart")
    assert "upstream circuit breaker opened" in log
    assert "the process exited" in log and "restarting in 100ms" in log

    # The restarted child answers (its relisting closes the breaker again).
    def answered():
        r = c.call("py.process", {})
        return "result" in r and int(text(r).split()[0])

    second = wait_for(answered, 30, "a call to the restarted child")
    assert second != first
    assert text(c.call("py.add", {"a": 1, "b": 2})) == "3"


def test_the_child_is_stopped_with_hangar(start_server, workdir):
    s = start_server(plugins=[], config=config(workdir), env=ENV)
    pid = child_pid(session(s))
    s.stop()
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or "Z" in stat_state(pid), 15, "the child's end")


def test_the_child_dies_with_a_killed_hangar(start_server, workdir):
    """SIGKILL gives Hangar no chance to stop its children: the kernel does
    (the parent-death signal). The child here is a shell that would outlive
    its server (which ends at its stdin's EOF) by turning into `sleep 600`."""
    script = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER_SCRIPT))} stdio; exec sleep 600"
    extra = config(workdir).replace(
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(SERVER_SCRIPT))}]\nargs = [\"stdio\"]",
        f"command = [\"sh\", \"-c\", {json.dumps(script)}]")
    assert "sleep 600" in extra
    s = start_server(plugins=[], config=extra, env=ENV)
    server = child_pid(session(s))
    shell = int(Path(f"/proc/{server}/stat").read_text().split(") ")[1].split()[1])
    assert "sh" in Path(f"/proc/{shell}/comm").read_text()
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait(10)
    wait_for(lambda: not Path(f"/proc/{shell}").exists() or "Z" in stat_state(shell), 15, "the child's end")


def stat_state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


def test_a_reload_that_drops_the_upstream_stops_its_child(start_server, workdir):
    s = start_server(plugins=[], config=config(workdir), env=ENV)
    pid = child_pid(session(s))
    s.config_path.write_text(s.config_path.read_text().split("[upstreams.py]")[0])
    wait_for(lambda: "py.echo" not in listed(session(s)), 30, "the reload")
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or "Z" in stat_state(pid), 15, "the child's end")


def test_a_log_message_outside_a_call_goes_to_hangars_log(shared):
    c = session(shared)
    assert text(c.call("py.log_later", {"text": "said after the call", "seconds": 0.2})) == "later"
    line = wait_for(lambda: next((l for l in shared.log_text().splitlines()
                                  if "said after the call" in l), None), 15, "the log line")
    assert "upstream" in line and "py" in line and "warning" in line, line


def children(pid):
    """The live processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ")[1].split()
        except (FileNotFoundError, IndexError, ProcessLookupError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_first_use_starts_the_child_at_the_first_listing(start_server, workdir):
    """`start = "first-use"`: no process while no client has asked for a list; the first
    listing starts it and waits for its tools, so that very list holds them."""
    s = start_server(plugins=[], config=config(workdir, extra='start = "first-use"'), env=ENV)
    h = health(s)
    assert h["status"] == "ok", h
    assert h["upstreams"]["py"]["started"] is False, h
    # Sessions, calls of other tools, health checks: none of them is a use.
    c = session(s)
    assert c.call("py.echo", {"text": "x"})["error"]["code"] == -32601
    assert children(s.proc.pid) == []
    assert "py.echo" in listed(c)
    assert len(children(s.proc.pid)) == 1
    assert text(c.call("py.echo", {"text": "late"})) == "[late]"
    assert health(s)["upstreams"]["py"]["started"] is True


def test_first_use_is_also_started_by_a_rest_listing(start_server, workdir):
    s = start_server(plugins=[], config=config(workdir, extra='start = "first-use"'), env=ENV)
    assert children(s.proc.pid) == []
    tools = {t["name"] for t in httpx.get(s.url + "/tools", timeout=30).json()}
    assert "py.echo" in tools
    assert len(children(s.proc.pid)) == 1


# --- a clean environment; a noisy stderr ---------------------------------------------------


def environ(pid):
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def test_the_child_starts_with_a_clean_environment(shared):
    """Hangar runs with STDIO_TEST_SECRET (and DATABASE_URL, REDIS_URL, … of
    the suite); the child gets PATH, HOME and the like, and its `env`."""
    env = environ(child_pid(session(shared)))
    assert env["STDIO_TEST_VAR"] == "v-from-env"
    assert "PATH" in env
    assert not [k for k in env if k not in PASSED_ENV and k != "STDIO_TEST_VAR"], sorted(env)
    assert "STDIO_TEST_SECRET" not in env


# What docs/upstreams.md says a child gets; a name added there is added here.
PASSED_ENV = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
              "LC_MESSAGES", "TZ", "TMPDIR", "TERM", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
              "XDG_DATA_HOME", "XDG_RUNTIME_DIR"}


def test_inherit_env_passes_everything_on(start_server, workdir):
    s = start_server(plugins=[], config=config(workdir, extra="inherit_env = true"), env=ENV)
    env = environ(child_pid(session(s)))
    assert env["STDIO_TEST_SECRET"] == "from-env" and env["STDIO_TEST_VAR"] == "v-from-env"


def noisy(workdir, before_serving):
    """The Python server, after `before_serving` (a shell command writing to stderr)."""
    script = f"{before_serving}; exec {shlex.quote(sys.executable)} {shlex.quote(str(SERVER_SCRIPT))} stdio"
    return config(workdir).replace(
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(SERVER_SCRIPT))}]\nargs = [\"stdio\"]",
        f"command = [\"sh\", \"-c\", {json.dumps(script)}]")


def test_a_stderr_line_without_end_costs_its_cap_not_its_length(start_server, workdir):
    """300 MB on stderr with no newline, then the server starts: Hangar keeps
    the line's first 4 KiB, logs how much was cut, and its peak RSS stays
    far below the 300 MB (before: 547 MiB, 334 kept)."""
    flood = "head -c 300000000 /dev/zero | tr '\\0' x >&2; echo >&2"
    s = start_server(plugins=[], config=noisy(workdir, flood), env=ENV)
    c = session(s)
    assert "py.echo" in listed(c)
    line = wait_for(lambda: next((l for l in s.log_text().splitlines() if "bytes cut" in l), None),
                    30, "the cut line in the log")
    assert "299995904 more bytes cut" in line, line[-200:]
    assert len(line) < 8192, len(line)
    peak = peak_rss_mib(s.proc.pid)
    print(f"\npeak RSS with a 300 MB stderr line: {peak:.0f} MiB")
    assert peak < 200, peak


def test_a_stderr_flood_is_logged_at_a_bounded_rate(start_server, workdir):
    s = start_server(plugins=[], config=noisy(workdir, "seq 1 200000 >&2"), env=ENV)
    assert "py.echo" in listed(session(s))
    wait_for(lambda: "a second" in s.log_text(), 30, "the rate note in the log")
    logged = [l for l in s.log_text().splitlines() if "stderr: " in l and "upstream" in l]
    # 100 a second: 200,000 lines would need over half an hour.
    assert len(logged) < 20_000, len(logged)
    assert any("over 100 lines a second" in l for l in logged), logged[-3:]


# --- the official everything server, from npm ------------------------------------------------


def everything_config(extra=""):
    return f"""
[upstreams.every]
command = [{json.dumps(str(EVERYTHING))}]
args = ["stdio"]
env = {{ STDIO_TEST_VAR = "{{{{ env.STDIO_TEST_SECRET }}}}" }}
prefix = "ev."
timeout = "20s"
{extra}
"""


def test_the_everything_server_over_stdio(start_server):
    s = start_server(plugins=[], config=everything_config(), env=ENV)
    c = session(s)
    tools = listed(c)
    assert {"ev.echo", "ev.get-sum", "ev.get-env"} <= set(tools), sorted(tools)
    assert text(c.call("ev.echo", {"message": "hi"})) == "Echo: hi"
    assert text(c.call("ev.get-sum", {"a": 2, "b": 3})) == "The sum of 2 and 3 is 5."
    env = json.loads(text(c.call("ev.get-env", {})))
    assert env["STDIO_TEST_VAR"] == "from-env"
    # Hangar's own environment is not passed on (the child is third-party code).
    assert "STDIO_TEST_SECRET" not in env and "PATH" in env, sorted(env)
    r = c.request("tools/call", {"name": "ev.trigger-long-running-operation",
                                 "arguments": {"duration": 1, "steps": 2},
                                 "_meta": {"progressToken": "ev-1"}})
    assert "result" in r, r
    progress = [e["params"] for e in r["_events"] if e["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [("ev-1", 1), ("ev-1", 2)]


def test_the_everything_servers_prompts_and_completions_through_the_python_sdk(start_server):
    """An upstream's prompts join the catalog with its prefix, render through
    it, and their arguments are completed by it (context included); with
    `prompts = false` none is offered."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.types import PromptReference

    s = start_server(plugins=[], config=everything_config(), env=ENV)

    async def run():
        async with streamablehttp_client(s.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.capabilities.prompts is not None
                assert init.capabilities.completions is not None
                prompts = {p.name: p for p in (await session.list_prompts()).prompts}
                assert {"ev.simple-prompt", "ev.args-prompt", "ev.completable-prompt"} <= set(prompts), sorted(prompts)
                args = {a.name: a.required for a in prompts["ev.args-prompt"].arguments}
                assert args == {"city": True, "state": False}, args
                got = await session.get_prompt("ev.args-prompt", {"city": "Lyon", "state": "Rhone"})
                assert got.messages[0].role == "user"
                assert got.messages[0].content.text == "What's weather in Lyon, Rhone?"
                # A required argument missing is refused before the upstream is asked.
                try:
                    await session.get_prompt("ev.args-prompt", {})
                    raise AssertionError("a missing required argument was accepted")
                except Exception as e:  # the SDK raises McpError
                    assert "city" in str(e), e
                ref = PromptReference(type="ref/prompt", name="ev.completable-prompt")
                done = await session.complete(ref, {"name": "department", "value": "S"})
                assert sorted(done.completion.values) == ["Sales", "Support"], done
                done = await session.complete(ref, {"name": "name", "value": ""},
                                              context_arguments={"department": "Engineering"})
                assert done.completion.values == ["Alice", "Bob", "Charlie"], done

    asyncio.run(run())
    c = session(start_server(plugins=[], config=everything_config("prompts = false"), env=ENV))
    names = [p["name"] for p in c.request("prompts/list")["result"]["prompts"]]
    assert not any(n.startswith("ev.") for n in names), names


def test_the_everything_servers_resource_updates_reach_subscribed_sessions(start_server):
    """A client session's `resources/subscribe` of an upstream's URI has
    Hangar subscribe to it at the upstream; the upstream's
    `notifications/resources/updated` reaches the subscribed session's
    stream and not another's."""
    import queue

    s = start_server(plugins=[], config=everything_config(), env=ENV)
    watcher, other = session(s), session(s)
    uris = [r["uri"] for r in watcher.request("resources/list")["result"]["resources"]]
    uri = next(u for u in uris if u.startswith("demo://"))
    stream, other_stream = Stream(s, watcher.session), Stream(s, other.session)
    try:
        assert watcher.request("resources/subscribe", {"uri": uri})["result"] == {}
        # The everything server sends its updates once this tool is called
        # (then every 5 s), for the URIs it was subscribed to.
        assert "Started" in text(watcher.call("ev.toggle-subscriber-updates", {}))
        deadline = time.monotonic() + 15
        updated = None
        while time.monotonic() < deadline and updated is None:
            try:
                m = stream.next(timeout=1)
            except queue.Empty:
                continue
            if m.get("method") == "notifications/resources/updated":
                updated = m
        assert updated is not None and updated["params"]["uri"] == uri, updated
        heard = []
        try:
            while True:
                heard.append(other_stream.next(timeout=0.5))
        except queue.Empty:
            pass
        assert not any(m.get("method") == "notifications/resources/updated" for m in heard), heard
    finally:
        stream.close()
        other_stream.close()


# --- config errors ---------------------------------------------------------------------------


def test_hangar_check_says_what_is_wrong_with_a_command_upstream(tmp_path):
    (tmp_path / "plugins").mkdir()
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{tmp_path}/cache"\n'
                   '[upstreams.both]\nurl = "http://127.0.0.1:1/mcp"\ncommand = ["x"]\n'
                   '[upstreams.neither]\nprefix = "n."\n'
                   '[upstreams.missing]\ncommand = ["/no/such/program"]\n')
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode == 1, out.stdout
    assert "upstreams.both" in out.stdout and "not both" in out.stdout
    assert "upstreams.neither" in out.stdout and "url (a server over HTTP) or command" in out.stdout
    assert "upstreams.missing" in out.stdout and "could not start (/no/such/program" in out.stdout


# --- Hangar itself on stdio, with a stdio upstream -------------------------------------------


def test_hangar_serving_stdio_with_a_stdio_upstream(tmp_path, workdir):
    """The child has pipes of its own: Hangar's stdin/stdout stay the client's."""
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from conftest import HANGAR_BIN

    (tmp_path / "plugins").mkdir()
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{tmp_path}/cache"\n' + config(workdir))
    params = StdioServerParameters(
        command=str(HANGAR_BIN),
        args=["serve", "--stdio", "--config", str(cfg), "--plugins", str(tmp_path / "plugins")],
        env={**os.environ, "NO_COLOR": "1", **ENV}, cwd=str(tmp_path))

    async def main():
        with open(tmp_path / "hangar.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    tools = {t.name for t in (await s.list_tools()).tools}
                    added = await s.call_tool("py.add", {"a": 20, "b": 22})
                    progress = []

                    async def on_progress(done, total, message):
                        progress.append((done, total))

                    stepped = await s.call_tool("py.progress", {"steps": 2}, progress_callback=on_progress)
                    return tools, added, stepped, progress

    tools, added, stepped, progress = asyncio.run(main())
    assert {"py.add", "py.echo", "py.progress"} <= tools
    assert not added.isError and added.content[0].text == "42"
    assert stepped.content[0].text == "done 2"
    assert progress == [(1, 2), (2, 2)]
    # Its stderr went to Hangar's log (Hangar's stderr), not to the client's stdout.
    assert "stdio test server ready" in (tmp_path / "hangar.log").read_text()
