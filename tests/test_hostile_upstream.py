"""An upstream MCP server that misbehaves on purpose (tests/clients/hostile_upstream.py,
a raw asyncio HTTP server) behind `[upstreams.hostile]` with a configured
`x-api-key`: what it answers is bounded (`max_response_bytes`, counted as it
arrives), its redirects elsewhere are not followed and its headers go
nowhere else, its SSE is parsed in one pass, the protocol version is
negotiated, and proxies from the environment are used."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from conftest import free_port, peak_rss_mib, session, wait_for

SCRIPT = Path(__file__).parent / "clients" / "hostile_upstream.py"
KEY = "hostile-secret-key"


class Hostile:
    def __init__(self, *args):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen([sys.executable, str(SCRIPT), str(self.port), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            assert self.proc.poll() is None, "the hostile server exited"
            try:
                return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=1).status_code == 200
            except httpx.TransportError:
                return False
        wait_for(up, 20, "the hostile upstream")

    def stats(self):
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=5).json()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Listener:
    """A plain TCP listener that records whatever reaches it (the place a
    redirect points to)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                while data := conn.recv(65536):
                    self.received += data
            except OSError:
                pass
            conn.close()


def config(h, extra=""):
    return f"""
catalog = "both"

[upstreams.hostile]
url = "{h.url}"
headers = {{ x-api-key = "{KEY}" }}
timeout = "20s"
breaker_failures = 100
{extra}
"""


def call(s, tool, args=None, timeout=60):
    return httpx.post(f"{s.url}/tools/hostile.{tool}/call", json=args or {}, timeout=timeout)


@pytest.fixture(scope="module")
def stolen():
    return Listener()


@pytest.fixture(scope="module")
def hostile(stolen):
    h = Hostile("--stolen", f"http://127.0.0.1:{stolen.port}/stolen")
    yield h
    h.stop()


@pytest.fixture(scope="module")
def server(start_server, hostile):
    s = start_server(plugins=(), config=config(hostile))
    wait_for(lambda: call(s, "echo", {"text": "hi"}).status_code == 200, 30, "the upstream's tools")
    return s


def test_an_honest_answer_passes_and_the_newest_protocol_is_asked(server, hostile):
    r = call(server, "echo", {"text": "hello"})
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "hello"
    assert hostile.stats()["initialize"][0] == "2025-11-25"


def test_a_200_mb_answer_is_cut_at_the_cap_and_the_memory_holds(server, hostile):
    before = peak_rss_mib(server.proc.pid)
    started = time.monotonic()
    r = call(server, "huge", {"mb": 200})
    took = time.monotonic() - started
    assert r.status_code == 500, r.text[:300]
    text = r.json()["content"][0]["text"]
    assert text == "upstream: hostile: answered more than 8 MiB (max_response_bytes)", text
    # What was read is at most the cap, and the host's peak memory did not
    # grow by the answer (on a whole read it grew by about a gigabyte).
    grown = peak_rss_mib(server.proc.pid) - before
    assert grown < 64, f"peak RSS grew by {grown:.0f} MiB"
    sent = [v for k, v in hostile.stats()["written"].items() if k.startswith("huge#")]
    assert sent and sent[-1] < 64 << 20, sent
    assert took < 20
    # The upstream still serves honest calls afterwards.
    assert call(server, "echo", {"text": "after"}).json()["content"][0]["text"] == "after"


def test_a_declared_4_gib_answer_is_refused_unread(server, hostile):
    r = call(server, "huge_declared")
    assert r.status_code == 500
    assert "max_response_bytes" in r.json()["content"][0]["text"]
    wait_for(lambda: any(k.startswith("huge_declared#") for k in hostile.stats()["written"]), 10,
             "the hostile server to notice")
    sent = [v for k, v in hostile.stats()["written"].items() if k.startswith("huge_declared#")]
    assert sent[-1] < 64 << 20, sent


def test_an_endless_sse_stream_is_cut_at_the_cap(server):
    r = call(server, "endless")
    assert r.status_code == 500
    assert r.json()["content"][0]["text"] == \
        "upstream: hostile: answered more than 8 MiB (max_response_bytes)"


def test_ten_thousand_events_before_the_answer_are_relayed_and_the_answer_arrives(server):
    c = session(server)
    r = c.request("tools/call", {"name": "hostile.events", "arguments": {"n": 10_000},
                                 "_meta": {"progressToken": "p"}})
    # The answer is the last event, after 10,000 progress notifications,
    # which reach the caller on its stream.
    assert r["result"]["content"][0]["text"] == "after 10000 events", str(r)[:300]
    progress = [e for e in r["_events"] if e["method"] == "notifications/progress"]
    assert progress and all(e["params"]["progressToken"] == "p" for e in progress)


def test_a_smaller_cap_is_the_operators_to_set(start_server, hostile):
    s = start_server(plugins=(), config=config(hostile, "max_response_bytes = 100000"))
    wait_for(lambda: call(s, "echo", {"text": "hi"}).status_code == 200, 30, "the upstream's tools")
    r = call(s, "events", {"n": 10_000})
    assert r.json()["content"][0]["text"] == \
        "upstream: hostile: answered more than 100000 bytes (max_response_bytes)"


def test_a_redirect_elsewhere_is_not_followed_and_the_key_goes_nowhere(server, stolen):
    r = call(server, "redirect")
    assert r.status_code == 500
    text = r.json()["content"][0]["text"]
    assert "redirect elsewhere, not followed" in text and "307" in text, text
    time.sleep(0.5)
    assert stolen.received == b"", stolen.received[:200]
    assert KEY.encode() not in stolen.received


def test_a_redirect_within_the_origin_is_followed(server):
    r = call(server, "redirect_home")
    assert r.status_code == 200, r.text
    assert r.json()["content"][0]["text"] == "moved"


def test_a_server_that_refuses_the_newest_protocol_gets_the_previous(start_server):
    h = Hostile("--only-version", "2025-06-18")
    try:
        s = start_server(plugins=(), config=config(h))
        wait_for(lambda: call(s, "echo", {"text": "hi"}).status_code == 200, 30, "the upstream's tools")
        assert call(s, "echo", {"text": "old"}).json()["content"][0]["text"] == "old"
        asked = h.stats()["initialize"]
        assert asked[:2] == ["2025-11-25", "2025-06-18"], asked
    finally:
        h.stop()


def test_the_upstream_is_reached_through_the_proxy_in_the_environment(start_server, hostile, tmp_path):
    """A real forward proxy (proxy.py) with `HTTP_PROXY` set for Hangar: the
    upstream's requests go through it; with the upstream in `NO_PROXY` they
    do not."""
    port = free_port()
    log = tmp_path / "proxy.log"
    proxy = subprocess.Popen([sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", str(port),
                              "--num-workers", "1", "--num-acceptors", "1", "--log-file", str(log),
                              "--log-level", "INFO"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             # proxy.py forks its acceptor: the whole group is killed at the end.
                             start_new_session=True)
    try:
        def up():
            assert proxy.poll() is None, "proxy.py exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for(up, 30, "proxy.py")
        env = {"HTTP_PROXY": f"http://127.0.0.1:{port}", "NO_PROXY": ""}
        s = start_server(plugins=(), config=config(hostile), env=env)
        wait_for(lambda: call(s, "echo", {"text": "via"}).status_code == 200, 30, "the upstream through the proxy")
        # proxy.py logs a request when its connection closes: stop Hangar first.
        s.stop()
        proxied = lambda: f"127.0.0.1:{hostile.port}" in log.read_text()
        wait_for(proxied, 15, "the proxy's access log to name the upstream")
        # NO_PROXY names the upstream's host: the proxy sees nothing new.
        seen = log.read_text().count(f"127.0.0.1:{hostile.port}")
        s2 = start_server(plugins=(), config=config(hostile),
                          env={"HTTP_PROXY": f"http://127.0.0.1:{port}", "NO_PROXY": "127.0.0.1"})
        wait_for(lambda: call(s2, "echo", {"text": "direct"}).status_code == 200, 30, "the upstream directly")
        s2.stop()
        # A request of the test's own through the proxy, to the same server
        # by another name: once the proxy has logged it, it has logged what
        # came before it (Hangar's connections closed when it stopped).
        marker = f"localhost:{hostile.port}"
        httpx.get(f"http://{marker}/marker", proxy=f"http://127.0.0.1:{port}", timeout=30)
        wait_for(lambda: marker in log.read_text(), 30, "the proxy's log of the test's own request")
        assert log.read_text().count(f"127.0.0.1:{hostile.port}") == seen
    finally:
        os.killpg(proxy.pid, signal.SIGKILL)
        proxy.wait(10)


def test_an_upstream_killed_during_a_call_is_an_error_at_once_and_the_breaker_counts_it(start_server):
    h = Hostile()
    try:
        s = start_server(plugins=(), config=config(h))
        wait_for(lambda: call(s, "echo", {"text": "hi"}).status_code == 200, 30, "the upstream's tools")
        out = {}

        def hang():
            started = time.monotonic()
            out["r"] = call(s, "hang")
            out["took"] = time.monotonic() - started

        t = threading.Thread(target=hang)
        t.start()
        time.sleep(1)
        h.stop()
        t.join(30)
        assert not t.is_alive()
        # Heard at once (the call began 1 s before the kill), not after the
        # upstream's 20 s timeout: 10 s is 10 times the call's own second.
        assert out["took"] < 10, out
        r = out["r"]
        assert r.status_code == 500
        text = r.json()["content"][0]["text"]
        assert text.startswith("upstream: hostile: unreachable"), text
        health = httpx.get(s.url + "/healthz").json()
        assert health["upstreams"]["hostile"]["failures"] >= 1, health
    finally:
        h.stop()


# --- resources: what an upstream answers to resources/read is bounded as a call's answer ------

VIEW = "ui://hostile/view"
VIEW_META = {"ui": {"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": True}}


def read(s, uri, timeout=60):
    return httpx.get(f"{s.url}/resources/read", params={"uri": uri}, timeout=timeout)


def error_of(r):
    assert r.status_code == 500, (r.status_code, r.text[:300])
    return r.json()["error"]


def test_an_upstreams_view_is_listed_and_read_with_its_meta(server):
    listed = {r["uri"]: r for r in httpx.get(server.url + "/resources", timeout=10).json()["resources"]}
    assert {VIEW, "hostile://huge", "hostile://slow"} <= set(listed), sorted(listed)
    assert listed[VIEW]["mimeType"] == "text/html;profile=mcp-app"
    assert listed[VIEW]["_meta"] == VIEW_META
    r = read(server, VIEW)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["contents"] == [{"uri": VIEW, "mimeType": "text/html;profile=mcp-app",
                                 "text": "<!doctype html><p>hostile view</p>", "_meta": VIEW_META}]
    # The upstream's result _meta passes on, with Hangar's trace id beside it.
    assert body["_meta"]["hostile/read"] == 1 and body["_meta"]["_trace_id"]


def still_serves(s):
    """Honest reads and calls of the same upstream still work."""
    assert read(s, VIEW).json()["contents"][0]["text"] == "<!doctype html><p>hostile view</p>"
    assert call(s, "echo", {"text": "after"}).json()["content"][0]["text"] == "after"


def test_a_200_mb_resource_is_cut_at_the_cap_and_the_memory_holds(server, hostile):
    before = peak_rss_mib(server.proc.pid)
    error = error_of(read(server, "hostile://huge"))
    assert error == "upstream: hostile: answered more than 8 MiB (max_response_bytes)", error
    grown = peak_rss_mib(server.proc.pid) - before
    assert grown < 64, f"peak RSS grew by {grown:.0f} MiB"
    sent = [v for k, v in hostile.stats()["written"].items() if k.startswith("read-huge#")]
    assert sent and sent[-1] < 64 << 20, sent
    still_serves(server)


def test_a_malformed_or_garbled_read_answer_is_a_clear_error(server):
    error = error_of(read(server, "hostile://malformed"))
    assert error.startswith("upstream: hostile: answered no ReadResourceResult: "), error
    error = error_of(read(server, "hostile://garbage"))
    assert error.startswith("upstream: hostile: answered no MCP: bad JSON"), error
    # Over MCP the same failure is a JSON-RPC error naming the upstream.
    r = session(server).request("resources/read", {"uri": "hostile://malformed"})
    assert r["error"]["message"].startswith("upstream: hostile: answered no ReadResourceResult"), r
    assert r["error"]["data"]["stage"] == "upstream", r
    still_serves(server)


def test_a_read_that_never_answers_times_out(start_server, hostile):
    s = start_server(plugins=(), config=config(hostile).replace('timeout = "20s"', 'timeout = "2s"'))
    wait_for(lambda: read(s, VIEW).status_code == 200, 30, "the upstream's resources")
    assert error_of(read(s, "hostile://slow")) == "upstream: hostile: timed out"
    still_serves(s)
