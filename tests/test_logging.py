"""Logs a machine can read: JSON lines on request, no colour codes off a
terminal, one access line per call (never the arguments), and a line per
component as it loads."""

import json
import os
import subprocess

import httpx
import pytest

from conftest import HANGAR_BIN, Mcp, Server, plugin_path, wait_for

SECRET_ARG = "do-not-log-this-7f3a"


def log_lines(server):
    return server.log_path.read_text().splitlines()


def test_json_log_lines_parse_and_each_call_leaves_one_access_line(tmp_path, shared_cache):
    s = Server(tmp_path, ["echo"], "", shared_cache, env={"HANGAR_LOG_FORMAT": "json"}).start()
    try:
        c = Mcp(s.url)
        c.initialize()
        assert c.call("echo", {"text": SECRET_ARG})["result"]["isError"] is False
        assert c.call("nope", {"text": SECRET_ARG})["error"]["code"] == -32601
        r = httpx.post(s.url + "/tools/echo/call", json={"text": SECRET_ARG, "times": "x"})
        assert r.status_code >= 400  # a validation failure, reported as the REST surface does
    finally:
        s.stop()
    records = [json.loads(line) for line in log_lines(s) if line.strip()]
    assert records, "no log lines"
    access = [r for r in records if r.get("target") == "hangar::access"]
    assert [(a["tool"], a["transport"], a["outcome"]) for a in access] == [
        ("echo", "mcp", "ok"), ("nope", "mcp", "not_found"), ("echo", "rest", "invalid")]
    assert access[2]["stage"] == "validate"
    assert all(isinstance(a["ms"], float) and a["principal"] == "-" and len(a["trace_id"]) == 32
               for a in access)
    loaded = [r for r in records if r.get("message") == "component loaded"]
    assert [r["path"].endswith("echo.wasm") for r in loaded] == [True]
    assert loaded[0]["origin"] in ("cache", "compiled")
    # The arguments are never logged, whatever the outcome.
    assert SECRET_ARG not in s.log_path.read_text()


def test_text_logs_have_no_colour_codes_off_a_terminal(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "echo.wasm").write_bytes(plugin_path("echo").read_bytes())
    config = tmp_path / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{tmp_path / "cache"}"\n')
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    out = subprocess.run([str(HANGAR_BIN), "check", "--config", str(config), "--plugins", str(plugins)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    # stderr is a pipe here: plain text, and the compile announced before it ran.
    assert "\x1b[" not in out.stderr
    compiling = out.stderr.index("compiling component")
    assert out.stderr.index("component loaded") > compiling
    assert "echo.wasm" in out.stderr
    # The flag works as well as the environment variable.
    again = subprocess.run([str(HANGAR_BIN), "--log-format", "json", "check", "--config", str(config),
                            "--plugins", str(plugins)], capture_output=True, text=True, timeout=120, env=env)
    lines = [json.loads(line) for line in again.stderr.splitlines() if line.strip()]
    assert any(r.get("message") == "component loaded" and r.get("origin") == "cache" for r in lines)


def test_no_access_line_is_lost_under_load_or_at_shutdown(tmp_path, shared_cache):
    # Lines are written by a thread of their own: 16 callers at once must
    # still leave one line per call, all of them out by the time the server
    # has stopped (SIGTERM), none written twice.
    from concurrent.futures import ThreadPoolExecutor
    s = Server(tmp_path, ["echo"], "", shared_cache).start()
    calls = 800
    try:
        def call(i):
            r = httpx.post(s.url + "/tools/echo/call", json={"text": f"load-{i}"}, timeout=30)
            return r.status_code
        with ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(call, range(calls)))
        assert codes == [200] * calls
    finally:
        s.stop()
    access = [line for line in log_lines(s) if "hangar::access" in line and 'tool="echo"' in line]
    assert len(access) == calls, f"{len(access)} access lines for {calls} calls"
    trace_ids = {line.split("trace_id=")[1] for line in access}
    assert len(trace_ids) == calls


def test_a_rest_call_whose_client_hangs_up_leaves_a_cancelled_access_line(tmp_path, shared_cache):
    # The guest sleeps 30 s in one host call; the client gives up after 1 s
    # and closes its connection. The call is cancelled and ends through the
    # pipeline: one access line, outcome "cancelled", long before its deadline.
    config = '[[tools]]\nname = "sleep_once"\nlimits = { deadline = "20s" }\n'
    s = Server(tmp_path, ["echo", "abuse"], config, shared_cache).start()
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(s.url + "/tools/sleep_once/call", json={"seconds": 30}, timeout=1)

        def cancelled():
            return [line for line in log_lines(s)
                    if "hangar::access" in line and 'tool="sleep_once"' in line]
        lines = wait_for(cancelled, 10, "the abandoned call's access line")
        assert len(lines) == 1, lines
        assert 'transport="rest"' in lines[0] and 'outcome="cancelled"' in lines[0], lines[0]
        ok = httpx.post(s.url + "/tools/echo/call", json={"text": "still here"}, timeout=10)
        assert ok.status_code == 200, ok.text
    finally:
        s.stop()
