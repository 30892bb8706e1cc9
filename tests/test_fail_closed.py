"""Fail closed: one door for every route, and nothing costly before it.

With `[oauth]` the REST surface needs a token unless opened in words;
`/healthz` gives anonymous callers liveness only; the probes answer on any
Host and never run an auth check; bodies are judged from their head before
a byte is read (type, size, who sends them); failed authentications are
limited per client address (an IPv6 client by its /64, behind a trusted
proxy by `X-Forwarded-For`) and answered 429 before any auth component runs."""

import re
import socket
import threading
import time

import httpx
import pytest

from conftest import Mcp, free_port, run_hangar
from test_oauth import AuthServer, oauth_server

KEY = "alice-key-0123456789abcdef0123"
ADMIN_KEY = "root-key-0123456789abcdef012345"
KEYS = f"alice={KEY}, root={ADMIN_KEY}"


def rss_mib(server) -> float:
    status = open(f"/proc/{server.proc.pid}/status").read()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def metric(server, name, url=None) -> float:
    text = httpx.get((url or server.url) + "/metrics").text
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def raw_post(server, path, headers, send_bytes, timeout=10.0):
    """POSTs a head declaring a body, then sends up to `send_bytes` of it in
    1 MiB chunks while the server lets it; returns (status, head, seconds)."""
    started = time.monotonic()
    s = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s.sendall(head.encode())
    chunk = b"x" * (1 << 20)
    sent = 0
    s.setblocking(False)
    answer = b""
    while sent < send_bytes and time.monotonic() - started < timeout:
        try:
            answer += s.recv(65536)
            if b"\r\n\r\n" in answer:
                break
        except BlockingIOError:
            pass
        except OSError:
            break
        try:
            sent += s.send(chunk[: min(len(chunk), send_bytes - sent)])
        except BlockingIOError:
            time.sleep(0.005)
        except OSError:
            break
    s.setblocking(True)
    s.settimeout(max(0.1, timeout - (time.monotonic() - started)))
    try:
        while b"\r\n\r\n" not in answer:
            more = s.recv(65536)
            if not more:
                break
            answer += more
    except OSError:
        pass
    s.close()
    took = time.monotonic() - started
    line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    status = int(line.split()[1]) if line.startswith("HTTP/") else 0
    return status, answer.split(b"\r\n\r\n", 1)[0].decode(errors="replace").lower(), took


# --- the door under [oauth] -------------------------------------------------


@pytest.fixture(scope="module")
def auth_server():
    a = AuthServer(prefix="fc")
    yield a
    a.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, shared_cache, auth_server):
    """[oauth] with REST left at its default; trusted_proxies lets a test be
    several clients."""
    s = oauth_server(tmp_path_factory, shared_cache, auth_server)
    s.stop()
    text = s.config_path.read_text().replace("rest = true\n", "")
    text = text.replace('auth_failures = "1000/m"\n', "")
    text = text.replace("[server]\n", '[server]\ntrusted_proxies = ["127.0.0.1"]\n', 1)
    s.config_path.write_text(text)
    s.start()
    yield s
    s.stop()


def test_rest_needs_a_token_under_oauth_by_default(guarded, auth_server):
    xff = {"x-forwarded-for": "198.51.100.1"}
    anonymous = [
        httpx.post(f"{guarded.url}/tools/echo/call", json={"text": "x"}, headers=xff),
        httpx.get(f"{guarded.url}/tools", headers=xff),
        httpx.get(f"{guarded.url}/openapi.json", headers=xff),
        httpx.get(f"{guarded.url}/resources", headers=xff),
        httpx.get(f"{guarded.url}/prompts", headers=xff),
        httpx.post(f"{guarded.url}/mcp", json={}, headers=xff),
    ]
    assert [r.status_code for r in anonymous] == [401] * 6, [r.text for r in anonymous]
    token = {"authorization": f"Bearer {auth_server.token('reader', guarded.resource)}", **xff}
    r = httpx.post(f"{guarded.url}/tools/echo/call", json={"text": "x"}, headers=token)
    assert r.status_code == 200, r.text
    assert httpx.get(f"{guarded.url}/openapi.json", headers=token).status_code == 200


def test_healthz_gives_anonymous_callers_liveness_only(guarded, auth_server):
    xff = {"x-forwarded-for": "198.51.100.2"}
    anonymous = httpx.get(f"{guarded.url}/healthz", headers=xff)
    assert anonymous.status_code == 200
    assert anonymous.json() == {"status": "ok"}
    token = {"authorization": f"Bearer {auth_server.token('reader', guarded.resource)}", **xff}
    detailed = httpx.get(f"{guarded.url}/healthz", headers=token).json()
    assert "tools" in detailed and "http" in detailed and "sessions" in detailed


def test_bad_tokens_are_throttled_per_client_before_any_check(guarded, auth_server):
    guesser = {"x-forwarded-for": "203.0.113.66"}
    before = metric(guarded, "hangar_auth_throttled_total")
    codes = []
    for i in range(15):
        h = {**guesser, "authorization": f"Bearer not.a.token{i}"}
        codes.append(httpx.post(f"{guarded.url}/mcp", json={}, headers=h).status_code)
    assert codes[:10] == [401] * 10 and codes[10:] == [429] * 5, codes
    r = httpx.post(f"{guarded.url}/tools/echo/call", json={}, headers={**guesser,
                   "authorization": "Bearer guess"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert metric(guarded, "hangar_auth_throttled_total") - before == 6
    # The guesser's good token waits too; another client is not touched.
    good = f"Bearer {auth_server.token('reader', guarded.resource)}"
    blocked = httpx.post(f"{guarded.url}/tools/echo/call", json={"text": "x"},
                         headers={**guesser, "authorization": good})
    assert blocked.status_code == 429
    other = httpx.post(f"{guarded.url}/tools/echo/call", json={"text": "x"},
                       headers={"x-forwarded-for": "203.0.113.67", "authorization": good})
    assert other.status_code == 200, other.text


def test_anonymous_upload_floods_are_refused_unread(guarded):
    """10 anonymous 50 MB uploads at once: each is answered 401 from its
    head, and the server's memory does not take the bodies in."""
    before = rss_mib(guarded)
    results = []

    def flood(i):
        results.append(raw_post(guarded, "/uploads", {
            "content-type": "multipart/form-data; boundary=x",
            "content-length": str(50 << 20),
            "x-forwarded-for": f"192.0.2.{i}",
        }, 50 << 20))

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_mib(guarded))
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert [r[0] for r in results] == [401] * 10, results
    assert all("connection: close" in r[1] for r in results)
    assert peak - before < 40, f"RSS {before:.0f} -> {peak:.0f} MiB"


def test_check_warns_when_rest_is_opened(tmp_path):
    config = tmp_path / "hangar.toml"
    config.write_text('[oauth]\nissuer = "https://login.example.com"\n'
                      'resource = "https://t.example.com/mcp"\nrest = "public"\n')
    (tmp_path / "plugins").mkdir()
    out = run_hangar("check", "--config", str(config), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'warning [oauth] rest = "public"' in out.stdout
    config.write_text('[oauth]\nissuer = "https://login.example.com"\n'
                      'resource = "https://t.example.com/mcp"\n')
    out = run_hangar("check", "--config", str(config), "--plugins", str(tmp_path / "plugins"))
    assert "warning" not in out.stdout


# --- a server-wide [auth] check, probes, bodies ------------------------------

SERVER_AUTH = f"""
trusted_proxies = ["127.0.0.1"]
admin_listen = "127.0.0.1:{{admin}}"

[auth]
plugin = "api-key"

[plugins.api-key]
config = {{{{ keys = "{KEYS}" }}}}

[[tools]]
name = "echo"
rate_limit = "5/m"

[[tools]]
name = "admin.secret"
description = "Only root sees this"
use = "lite"
statement = "SELECT 'secret' AS s"
visible_to = {{{{ sub = ["root"] }}}}

[connectors.lite]
kind = "sqlite"
path = "lite.db"
"""


@pytest.fixture(scope="module")
def keyed(start_server):
    admin = free_port()
    s = start_server(plugins=("echo", "api-key"), config=SERVER_AUTH.format(admin=admin))
    s.admin_url = f"http://127.0.0.1:{admin}"
    return s


def as_client(n, **headers):
    return {"x-forwarded-for": f"198.51.100.{n}", **headers}


def test_thirty_wrong_keys_get_429_after_ten_and_no_auth_instance_runs(keyed):
    # "10/m" refills a refused check every 6 s: a loaded machine that takes
    # that long over the calls below lets one more check through per 6 s
    # (and blocks the client again at once when it fails), so the 401s past
    # the tenth are bounded by the time the calls took, not assumed away.
    refill = 6.0
    c = Mcp(keyed.url)
    c.http.headers.update(as_client(10))
    c.initialize()
    checks = metric(keyed, "hangar_auth_checks_total")
    started = time.monotonic()
    codes = [httpx.post(f"{keyed.url}/tools/echo/call", json={"text": "x"},
                        headers=as_client(10, **{"x-api-key": f"wrong-{i}"})).status_code
             for i in range(30)]
    took = time.monotonic() - started
    assert codes[:11] == [401] * 10 + [429], codes
    assert set(codes) == {401, 429}, codes
    assert codes[10:].count(401) <= took // refill, (codes, took)
    # Each 401 ran one check; no 429 ran any.
    assert metric(keyed, "hangar_auth_checks_total") - checks == codes.count(401)
    # MCP says the same in JSON-RPC, with when to retry (a check let through
    # by a refill blocks the client again, so the next call is refused).
    for _ in range(2):
        r = c.call("echo", {"text": "x"}, headers={"x-api-key": "wrong"})
        assert r["error"]["data"]["stage"] == "auth", r
        if "retry_after_ms" in r["error"]["data"]:
            break
        assert r["error"]["message"] == "Unauthorized", r
    assert r["error"]["data"]["retry_after_ms"] > 0, r
    # The right key from another address is served.
    ok = httpx.post(f"{keyed.url}/tools/echo/call", json={"text": "x"},
                    headers=as_client(11, **{"x-api-key": KEY}))
    assert ok.status_code == 200, ok.text


def test_an_ipv6_client_is_one_client_across_its_64(keyed):
    codes = [httpx.post(f"{keyed.url}/tools/echo/call", json={"text": "x"},
                        headers={"x-forwarded-for": f"2001:db8:7:7::{i:x}",
                                 "x-api-key": "wrong"}).status_code
             for i in range(1, 13)]
    assert codes == [401] * 10 + [429] * 2, codes
    other = httpx.post(f"{keyed.url}/tools/echo/call", json={"text": "x"},
                       headers={"x-forwarded-for": "2001:db8:7:8::1", "x-api-key": KEY})
    assert other.status_code == 200


def test_a_listing_runs_the_server_wide_check_once_per_few_seconds(keyed):
    checks = metric(keyed, "hangar_auth_checks_total")
    for _ in range(20):
        names = {t["name"] for t in httpx.get(f"{keyed.url}/tools",
                                              headers=as_client(20, **{"x-api-key": ADMIN_KEY})).json()}
        assert "admin.secret" in names
    assert metric(keyed, "hangar_auth_checks_total") - checks <= 2


def test_healthz_details_need_what_the_server_wide_check_accepts(keyed):
    assert httpx.get(f"{keyed.url}/healthz", headers=as_client(30)).json() == {"status": "ok"}
    detailed = httpx.get(f"{keyed.url}/healthz", headers=as_client(30, **{"x-api-key": KEY})).json()
    assert detailed["status"] == "ok" and detailed["tools"] >= 1 and "http" in detailed


def test_probes_answer_any_host_run_no_check_and_name_nothing_hidden(keyed):
    r = httpx.post(f"{keyed.url}/tools/admin.secret/call", json={},
                   headers=as_client(40, **{"x-api-key": ADMIN_KEY}))
    assert r.status_code == 200, r.text
    evil = {"host": "evil.example.com", "x-api-key": "wrong", **as_client(41)}
    assert httpx.get(f"{keyed.url}/healthz", headers=evil).status_code == 403
    assert httpx.get(f"{keyed.url}/livez", headers=evil).json() == {"status": "ok"}
    ready = httpx.get(f"{keyed.url}/readyz", headers=evil)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    checks = metric(keyed, "hangar_auth_checks_total")
    for _ in range(20):
        public = httpx.get(f"{keyed.url}/metrics", headers=evil)
        assert public.status_code == 200
    assert metric(keyed, "hangar_auth_checks_total") == checks, "/metrics ran an auth check"
    assert 'tool="echo"' in public.text
    assert "admin.secret" not in public.text
    # The admin listener shows everything, to whoever can reach it.
    full = httpx.get(f"{keyed.admin_url}/metrics")
    assert full.status_code == 200 and 'tool="admin.secret"' in full.text
    assert httpx.get(f"{keyed.admin_url}/readyz").json()["status"] == "ready"
    assert httpx.get(f"{keyed.admin_url}/tools").status_code == 404


def test_bodies_that_are_not_json_get_415(keyed):
    plain = {"content-type": "text/plain", **as_client(50)}
    r = httpx.post(f"{keyed.url}/tools/echo/call", content=b'{"text":"x"}',
                   headers={**plain, "x-api-key": KEY})
    assert r.status_code == 415, r.text
    r = httpx.post(f"{keyed.url}/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                   headers={**plain, "accept": "application/json, text/event-stream"})
    assert r.status_code == 415 and r.json()["error"]["code"] == -32600
    ok = httpx.post(f"{keyed.url}/tools/echo/call", json={"text": "x"},
                    headers=as_client(50, **{"x-api-key": KEY}))
    assert ok.status_code == 200


def test_a_body_declared_too_large_is_refused_from_its_head(keyed):
    status, head, took = raw_post(keyed, "/tools/echo/call", {
        "content-type": "application/json", "content-length": str(100 << 20),
        "x-api-key": KEY, "x-forwarded-for": "198.51.100.60"}, 0, timeout=10)
    assert status == 413 and "connection: close" in head, head
    assert took < 5


def test_uploads_are_refused_unread_when_no_tool_takes_them(keyed):
    c = Mcp(keyed.url)
    c.http.headers.update(as_client(70))
    c.initialize()
    status, head, _ = raw_post(keyed, "/uploads", {
        "content-type": "multipart/form-data; boundary=x", "content-length": str(20 << 20),
        "mcp-session-id": c.session, "x-forwarded-for": "198.51.100.70"}, 64 << 10)
    assert status == 403 and "connection: close" in head, head


def test_forwarded_for_is_ignored_from_untrusted_peers(start_server):
    s = start_server(plugins=("echo", "api-key"), config=f"""
[plugins.api-key]
config = {{ keys = "{KEYS}" }}

[[tools]]
name = "echo"
auth = {{ plugin = "api-key" }}
""")
    codes = [httpx.post(f"{s.url}/tools/echo/call", json={"text": "x"},
                        headers={"x-forwarded-for": f"198.51.100.{i}", "x-api-key": "bad"}).status_code
             for i in range(12)]
    assert codes == [401] * 10 + [429] * 2, codes


def test_readyz_is_503_while_the_cluster_redis_is_unreachable(start_server):
    """A replica that cannot reach the shared Redis is alive but not ready:
    a balancer reading status codes takes it out of rotation."""
    dead = free_port()
    s = start_server(plugins=("echo",), config=f'\n[cluster]\nredis = "redis://127.0.0.1:{dead}"\n'
                                                 'prefix = "hangar-readyz-test"\n'
                                                 '[artifacts]\nsigning_key = "hangar-test-readyz-signing"\n')
    assert httpx.get(f"{s.url}/livez").json() == {"status": "ok"}
    r = httpx.get(f"{s.url}/readyz", headers={"host": "10.0.0.9:8080"}, timeout=30)
    assert r.status_code == 503, r.text
    assert r.json() == {"status": "not ready", "waiting_for": ["cluster redis unreachable"]}
