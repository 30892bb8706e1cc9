"""Per-client caps: what one client (address, or principal) may hold open — long-lived
streams (`GET /mcp`, `subscriptions/listen`), sessions, subscriptions per session, tasks per
owner — so that one client cannot take what every other needs. Another client is another
loopback address: the server listens on 127.0.0.1, and a client bound to 127.0.0.2 reaches it
from there."""

import json
import time

import httpx
import jwt as pyjwt
from conftest import PROTOCOL, wait_for
from test_mcp_2026 import headers_for, meta

CAPS = """
max_streams_per_client = 2
max_sessions_per_client = 4
max_subscriptions_per_session = 2
"""

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def http_from(address):
    """An HTTP client whose connections come from `address` (a loopback address)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def initialize(server, http):
    r = http.post(server.url + "/mcp", headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "caps-test", "version": "0"}}})
    return r


def open_session(server, http):
    r = initialize(server, http)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    r = http.post(server.url + "/mcp", headers={**ACCEPT, "mcp-session-id": sid},
                  json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202
    return sid


def get_stream(server, http, sid):
    """Opens `GET /mcp` on session `sid`; the caller closes the response."""
    req = http.build_request("GET", server.url + "/mcp",
                             headers={"accept": "text/event-stream", "mcp-session-id": sid})
    return http.send(req, stream=True)


def refused_429(r):
    # (An accepted stream would never end: its body is not read here.)
    assert r.status_code == 429, r.status_code
    assert int(r.headers["retry-after"]) >= 1
    body = json.loads(r.read())
    assert body["error"]["code"] == -32000 and "Too many open" in body["error"]["message"], body
    return body


def test_one_client_cannot_hold_every_stream(start_server):
    s = start_server(plugins=("echo",), config=CAPS)
    one, other = http_from("127.0.0.1"), http_from("127.0.0.2")
    sids = [open_session(s, one) for _ in range(3)]
    held = [get_stream(s, one, sid) for sid in sids[:2]]
    assert [r.status_code for r in held] == [200, 200]

    # A third stream from the same address is refused, not made room for.
    third = get_stream(s, one, sids[2])
    refused_429(third)
    third.close()
    # So is a 2026-07-28 subscriptions/listen stream: they share the cap.
    params = {"_meta": meta(), "notifications": {"toolsListChanged": True}}
    listen = one.post(s.url + "/mcp", headers=headers_for("subscriptions/listen", params),
                      content=json.dumps({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                                          "params": params}))
    assert refused_429(listen)["id"] == 7

    # Reconnecting a session that holds a stream takes its own slot back.
    again = get_stream(s, one, sids[0])
    assert again.status_code == 200
    held[0].close()
    held[0] = again

    # Another client still opens a stream, and /healthz answers everyone.
    theirs = get_stream(s, other, open_session(s, other))
    assert theirs.status_code == 200
    assert other.get(s.url + "/healthz").status_code == 200
    assert one.get(s.url + "/healthz").status_code == 200
    theirs.close()

    # A stream closed frees its slot.
    held[1].close()

    def reopened():
        r = get_stream(s, one, sids[2])
        if r.status_code == 200:
            held[1] = r
            return True
        r.close()
        return False

    wait_for(reopened, 30, "a closed stream's slot to be released")
    for r in held:
        r.close()


def test_one_client_cannot_hold_every_session(start_server):
    s = start_server(plugins=("echo",), config=CAPS)
    one, other = http_from("127.0.0.1"), http_from("127.0.0.2")
    sids = [open_session(s, one) for _ in range(4)]
    refused = initialize(s, one)
    refused_429(refused)
    assert "mcp-session-id" not in refused.headers
    # Nobody's session was evicted to make room: all four still answer.
    for sid in sids:
        r = one.post(s.url + "/mcp", headers={**ACCEPT, "mcp-session-id": sid},
                     json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert r.status_code == 200, r.text
    # Another address opens sessions of its own.
    assert initialize(s, other).status_code == 200
    # Ending one of its sessions lets the client open another.
    assert one.delete(s.url + "/mcp", headers={"mcp-session-id": sids[0]}).status_code == 200
    assert initialize(s, one).status_code == 200


SECRET = "caps-secret-0123456789abcdef0123456"

HIDDEN = f"""
[plugins.jwt]
config = {{ hs256_secret = "{SECRET}" }}

[auth]
plugin = "jwt"
policy = {{ audience = "any" }}

[[resources]]
uri = "test://static-binary"
visible_to = {{ role = ["admin"] }}
"""


def bearer(role):
    claims = {"sub": role + "-user", "role": role, "exp": int(time.time()) + 600}
    return {"authorization": "Bearer " + pyjwt.encode(claims, SECRET, algorithm="HS256")}


def subscribe(s, http, sid, uri, headers=None, on=True):
    method = "resources/subscribe" if on else "resources/unsubscribe"
    r = http.post(s.url + "/mcp", headers={**ACCEPT, "mcp-session-id": sid, **(headers or {})},
                  json={"jsonrpc": "2.0", "id": 3, "method": method, "params": {"uri": uri}})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_session_subscribes_to_at_most_its_cap(start_server):
    s = start_server(plugins=("everything",), config=CAPS)
    http = http_from("127.0.0.1")
    sid = open_session(s, http)
    assert "result" in subscribe(s, http, sid, "test://static-text")
    assert "result" in subscribe(s, http, sid, "test://watched-resource")
    # Subscribing again to one it has costs nothing.
    assert "result" in subscribe(s, http, sid, "test://static-text")
    over = subscribe(s, http, sid, "test://static-binary")
    assert over["error"]["code"] == -32000, over
    assert "Too many subscriptions" in over["error"]["message"]
    assert "result" in subscribe(s, http, sid, "test://static-text", on=False)
    assert "result" in subscribe(s, http, sid, "test://static-binary")


def test_a_hidden_resource_cannot_be_subscribed(start_server):
    s = start_server(plugins=("everything", "jwt"), config=HIDDEN)
    http = http_from("127.0.0.1")
    sid = open_session(s, http)
    user = bearer("user")
    hidden = subscribe(s, http, sid, "test://static-binary", user)
    unknown = subscribe(s, http, sid, "test://no-such-thing", user)
    assert "error" in hidden, hidden
    # Exactly as for an unknown resource, but for the URI it names.
    assert hidden["error"]["code"] == unknown["error"]["code"] == -32002
    assert hidden["error"]["message"] == unknown["error"]["message"]
    assert hidden["error"]["data"] == {"uri": "test://static-binary"}
    # Without credentials too; the admin may.
    assert subscribe(s, http, sid, "test://static-binary")["error"]["code"] == -32002
    assert "result" in subscribe(s, http, sid, "test://static-binary", bearer("admin"))


EXT = "io.modelcontextprotocol/tasks"
ALICE, BOB = "alice-key-0123456789abcdef0123", "bob-key-0123456789abcdef01234"

TASKS = f"""
max_tasks_per_owner = 2

[plugins.api-key]
config = {{ keys = "alice={ALICE},bob={BOB}" }}

[[tools]]
name = "echo"
task = "optional"
auth = {{ plugin = "api-key" }}

[[tools]]
name = "test_simple_text"
task = "optional"
"""


def task_call(s, http, tool, headers=None):
    params = {"name": tool, "arguments": {"text": "x"} if tool == "echo" else {},
              "_meta": meta({"extensions": {EXT: {}}})}
    h = {**headers_for("tools/call", params), **(headers or {})}
    r = http.post(s.url + "/mcp", headers=h, content=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
    return r.json()


def test_one_owner_at_its_task_cap_blocks_no_other(start_server):
    # A cache of its own: the kv store, where tasks are kept, lives there.
    s = start_server(plugins=("echo", "everything", "api-key"), config=TASKS, cache=False)
    one, other = http_from("127.0.0.1"), http_from("127.0.0.2")
    alice, bob = {"x-api-key": ALICE}, {"x-api-key": BOB}
    for _ in range(2):
        assert task_call(s, one, "echo", alice)["result"]["resultType"] == "task"
    full = task_call(s, one, "echo", alice)
    assert full["error"]["code"] == -32000 and "Too many tasks" in full["error"]["message"], full
    # Bob, from the same address, has a quota of his own.
    created = task_call(s, one, "echo", bob)["result"]
    assert created["resultType"] == "task"
    # His task is his: alice does not see it.
    params = {"taskId": created["taskId"], "_meta": meta({"extensions": {EXT: {}}})}
    h = {**headers_for("tasks/get", params), "mcp-name": created["taskId"]}
    got = one.post(s.url + "/mcp", headers={**h, **bob}, content=json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": params})).json()
    assert got["result"]["taskId"] == created["taskId"], got
    got = one.post(s.url + "/mcp", headers={**h, **alice}, content=json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": params})).json()
    assert got["error"]["code"] == -32602, got

    # Anonymous callers count by address.
    for _ in range(2):
        assert task_call(s, one, "test_simple_text")["result"]["resultType"] == "task"
    assert "Too many tasks" in task_call(s, one, "test_simple_text")["error"]["message"]
    assert task_call(s, other, "test_simple_text")["result"]["resultType"] == "task"


def test_sessions_per_client_are_counted_across_replicas(tmp_path, shared_cache):
    """Two replicas sharing Redis: sessions opened on one count on the other, and a
    session's Redis record holds no more subscriptions than the cap."""
    import subprocess
    import uuid

    from conftest import REDIS_URL, Server

    prefix = f"hangar-test-caps:{uuid.uuid4().hex[:10]}"
    config = f"""max_sessions_per_client = 2
max_subscriptions_per_session = 1

[cluster]
redis = "{REDIS_URL}"
prefix = "{prefix}"

[artifacts]
signing_key = "hangar-test-cluster-signing-key"
"""
    a = Server(tmp_path / "a", ["everything"], config, shared_cache).start()
    b = Server(tmp_path / "b", ["everything"], config, shared_cache).start()
    try:
        http = http_from("127.0.0.1")
        first, second = open_session(a, http), open_session(a, http)
        # Replica b holds none of them, yet the client is at its cap.
        refused_429(initialize(b, http))
        assert initialize(b, http_from("127.0.0.2")).status_code == 200
        # Ended on b, the session no longer counts anywhere.
        assert http.delete(b.url + "/mcp", headers={"mcp-session-id": first}).status_code == 200
        assert initialize(b, http).status_code == 200

        assert "result" in subscribe(a, http, second, "test://static-text")
        over = subscribe(b, http, second, "test://watched-resource")
        assert "Too many subscriptions" in over["error"]["message"], over
        fields = subprocess.run(["redis-cli", "-u", REDIS_URL, "HKEYS", f"{prefix}:session:{second}"],
                                capture_output=True, text=True, timeout=10).stdout.split()
        assert [f for f in fields if f.startswith("sub:")] == ["sub:test://static-text"], fields
    finally:
        a.stop()
        b.stop()


# --- behind a trusted proxy: the client cannot steer X-Forwarded-For from the left -----------

BEHIND_PROXY = """
trusted_proxies = ["127.0.0.1"]
auth_failures = "3/m"
max_sessions_per_client = 2

[auth]
plugin = "api-key"

[plugins.api-key]
config = { keys = "someone=right-key" }
"""


def xff(value, **headers):
    return {"x-forwarded-for": value, **headers}


def wrong_key_codes(s, hops):
    return [httpx.post(s.url + "/tools/echo/call", json={"text": "x"},
                       headers=xff(hop, **{"x-api-key": f"wrong-{i}"})).status_code
            for i, hop in enumerate(hops)]


def test_a_junk_hop_does_not_buy_unlimited_guesses(start_server):
    """The peer (127.0.0.1) is a trusted proxy that appended nothing after
    the client's own `7.7.7.N, junk`: every guess counts against the peer,
    whatever N the client makes up, so the fourth is throttled."""
    s = start_server(plugins=("echo", "api-key"), config=BEHIND_PROXY)
    started = time.monotonic()
    codes = wrong_key_codes(s, [f"7.7.7.{n}, junk" for n in range(8)])
    took = time.monotonic() - started
    assert codes[:4] == [401, 401, 401, 429], codes
    # "3/m" refills one check every 20 s: a machine that slow lets one
    # more through per 20 s, never one per made-up address.
    assert codes[3:].count(401) <= took // 20, (codes, took)


def test_a_junk_hop_cannot_lock_out_someone_else(start_server):
    """`192.0.2.99, junk` names 192.0.2.99 only from the left of an
    unreadable hop: the guesses count against the peer, and 192.0.2.99,
    coming through the proxy with the right key, is served."""
    s = start_server(plugins=("echo", "api-key"), config=BEHIND_PROXY)
    codes = wrong_key_codes(s, ["192.0.2.99, junk"] * 5)
    assert codes[3:] == [429, 429], codes
    ok = httpx.post(s.url + "/tools/echo/call", json={"text": "x"},
                    headers=xff("192.0.2.99", **{"x-api-key": "right-key"}))
    assert ok.status_code == 200, ok.text


def test_a_proxy_that_appends_ports_keeps_each_client_apart(start_server):
    """`ip:port` and `[v6]:port` hops are read: each client is throttled on
    its own, and another client behind the same proxy is not."""
    s = start_server(plugins=("echo", "api-key"), config=BEHIND_PROXY)
    codes = wrong_key_codes(s, [f"1.2.3.4, 198.51.100.7:{40000 + i}" for i in range(5)])
    assert codes == [401, 401, 401, 429, 429], codes
    v6 = wrong_key_codes(s, [f"[2001:db8:5::1]:{50000 + i}" for i in range(4)])
    assert v6 == [401, 401, 401, 429], v6
    ok = httpx.post(s.url + "/tools/echo/call", json={"text": "x"},
                    headers=xff("198.51.100.8:40000", **{"x-api-key": "right-key"}))
    assert ok.status_code == 200, ok.text


def test_per_client_caps_behind_a_proxy_hold_against_junk_hops(start_server):
    """Sessions per client: made-up left hops before junk are one client
    (the proxy's peer), so the third session is refused; a client named by
    the proxy with a port is one client whatever its port."""
    s = start_server(plugins=("echo", "api-key"), config=BEHIND_PROXY)
    http = http_from("127.0.0.1")
    codes = [http.post(s.url + "/mcp", headers={**ACCEPT, **xff(f"7.7.7.{n}, junk")}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "caps-test", "version": "0"}}}).status_code
        for n in range(4)]
    assert codes == [200, 200, 429, 429], codes
    codes = [http.post(s.url + "/mcp", headers={**ACCEPT, **xff(f"203.0.113.5:{1000 + n}")}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "caps-test", "version": "0"}}}).status_code
        for n in range(3)]
    assert codes == [200, 200, 429], codes
