"""The HTTP front against slow, silent and greedy clients: header, body,
idle and write timeouts, the connection cap, and SSE streams that must
outlive those timeouts while their client reads them. Timeouts are set short
here; every test asserts what happened (closed, 408, 503), never how fast."""

import json
import socket
import time

import httpx
import pytest

from conftest import Mcp, session, wait_for
from test_mcp_offers import Stream

TIMEOUTS = """
header_timeout = "1s"
body_timeout = "1s"
idle_timeout = "2s"
write_timeout = "1s"

[[tools]]
name = "big_output"
limits = { memory_mib = 128, max_output_bytes = 67108864 }
"""

BIG = 24_000_000  # bytes of result text: more than the kernel buffers on both ends hold


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("echo", "everything", "abuse"), config=TIMEOUTS)


def connect(server, data=b"", rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(60)
    s.connect(("127.0.0.1", server.port))
    if data:
        s.sendall(data)
    return s


def read_until_closed(s, limit=None):
    """Everything the server sends until it closes the connection (or resets
    it); a server that keeps it open makes the read time out and the test fail."""
    got = bytearray()
    try:
        while chunk := s.recv(1 << 16):
            got += chunk
            if limit and len(got) > limit:
                break
    except ConnectionResetError:
        pass
    return bytes(got)


def http_stats(server):
    return httpx.get(server.url + "/healthz", timeout=10).json()["http"]


def test_half_sent_request_heads_are_closed(server):
    before = http_stats(server)["header_timeouts"]
    socks = [connect(server, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1") for _ in range(20)]
    silent = connect(server)  # connected, never says anything
    for s in socks + [silent]:
        assert read_until_closed(s) == b""
        s.close()
    assert http_stats(server)["header_timeouts"] >= before + 21


def test_idle_keep_alive_connection_is_closed_after_serving(server):
    s = connect(server)
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    # The same connection answers requests one after another (keep-alive) ...
    for _ in range(3):
        s.sendall(request)
        head, body = read_response(s)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert json.loads(body)["status"] in ("ok", "degraded")
    # ... and is closed once it has waited idle_timeout for the next one.
    assert read_until_closed(s) == b""
    s.close()
    assert http_stats(server)["idle_closed"] >= 1


def read_response(s):
    """One HTTP/1.1 response with a content-length: (head, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, f"connection closed mid-head: {buf!r}"
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        chunk = s.recv(65536)
        assert chunk, "connection closed mid-body"
        rest += chunk
    return head, rest[:length]


def test_a_body_that_stops_coming_gets_408_and_the_connection_closes(server):
    s = connect(server, b"POST /tools/echo/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"text\":")
    answer = read_until_closed(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    assert "body_timeout" in json.loads(body)["error"]
    assert http_stats(server)["body_timeouts"] >= 1


def test_a_client_that_never_reads_its_response_is_cut_off(server):
    before = http_stats(server)["write_timeouts"]
    body = json.dumps({"bytes": BIG}).encode()
    s = connect(server, b"POST /tools/big_output/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
                rcvbuf=4096)
    # The client reads nothing; the server gives up on the blocked write.
    wait_for(lambda: http_stats(server)["write_timeouts"] > before, 60, "the write timeout")
    # What was already in the buffers arrives, then the connection ends short of the answer.
    got = read_until_closed(s)
    s.close()
    assert got.startswith(b"HTTP/1.1 200"), got[:200]
    assert len(got) < BIG
    # The server goes on serving.
    r = httpx.post(server.url + "/tools/echo/call", json={"text": "still here"}, timeout=10)
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "still here"


def test_long_calls_and_sse_streams_outlive_the_timeouts(server):
    c = session(server)
    stream = Stream(server, c.session)
    try:
        assert c.request("resources/subscribe", {"uri": "test://watched-resource"})["result"] == {}
        # A call that answers after longer than every timeout, in one JSON answer ...
        r = c.call("sleep_once", {"seconds": 3})
        assert r["result"]["content"][0]["text"] == "slept 3 s", r
        # ... one that streams its progress (SSE) ...
        r = c.request("tools/call", {"name": "test_tool_with_progress", "_meta": {"progressToken": "p"}})
        assert r["result"]["content"][0]["text"] == "Progress test completed"
        assert len([e for e in r["_events"] if e["method"] == "notifications/progress"]) == 3
        # ... and the session's GET stream, quiet all that time, still carries updates.
        assert not stream.ended.is_set()
        c.call("test_touch_resource", {"uri": "test://watched-resource"})
        assert stream.next()["params"]["uri"] == "test://watched-resource"
    finally:
        stream.close()


def was_refused(s) -> bool:
    """Whether the server answered this held connection's socket (a 503 or a
    close): a held connection that is really holding a slot hears nothing."""
    import select
    if not select.select([s], [], [], 0)[0]:
        return False
    try:
        s.setblocking(False)
        data = s.recv(4096, socket.MSG_PEEK)
    except (BlockingIOError, ConnectionResetError):
        data = b""
    finally:
        s.setblocking(True)
        s.settimeout(60)
    return data == b"" or data.startswith(b"HTTP/1.1 503")


def test_connections_over_the_cap_get_503(start_server):
    capped = start_server(plugins=("echo",), config='max_connections = 3\nheader_timeout = "60s"\n')
    # Each held connection has started a request, so the server is surely reading it.
    held = []

    def hold_the_cap_and_probe():
        # A connection the client just closed (the start-up probe's, a probe
        # here) keeps its slot until the server reads the close, so a held
        # connection can itself be refused; replace those and probe again.
        for s in [s for s in held if was_refused(s)]:
            held.remove(s)
            s.close()
        while len(held) < 3:
            held.append(connect(capped, b"GET /healthz HTTP/1.1\r\n"))
        if httpx.get(capped.url + "/healthz", timeout=10).status_code != 503:
            return False
        # The three slots must be the held connections' (a just-closed probe
        # could still hold one while a held connection was refused).
        time.sleep(0.2)
        return not any(was_refused(s) for s in held)

    try:
        wait_for(hold_the_cap_and_probe, 30, "a connection over the cap to be refused")
        r = httpx.get(capped.url + "/healthz", timeout=10)
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert "max_connections" in r.json()["error"]
        # A slot freed is a slot served.
        held.pop().close()
        wait_for(lambda: httpx.get(capped.url + "/healthz", timeout=10).status_code == 200, 30,
                 "a freed slot to serve again")
        stats = httpx.get(capped.url + "/healthz", timeout=10).json()["http"]
        assert stats["max_connections"] == 3 and stats["refused"] >= 1
    finally:
        for s in held:
            s.close()


def test_sessions_are_capped_and_expire(start_server):
    capped = start_server(plugins=("echo",), config='max_sessions = 5\nsession_timeout = "2s"\n')
    clients = [session(capped) for _ in range(30)]
    sessions = httpx.get(capped.url + "/healthz", timeout=10).json()["sessions"]
    assert sessions["open"] <= 5 and sessions["max"] == 5
    assert sessions["evicted"] >= 25
    # The newest session works; the evicted ones are told so.
    assert "result" in clients[-1].request("ping")
    alive = [c for c in clients if c.request("ping")["_status"] == 200]
    assert 1 <= len(alive) <= 5
    gone = clients[0].request("ping")
    assert gone["_status"] == 404 and gone["error"]["message"] == "Session not found"
    # A session unused for session_timeout is forgotten (every request uses it, so wait unused).
    time.sleep(3)
    expired = clients[-1].request("ping")
    assert expired["_status"] == 404 and expired["error"]["message"] == "Session not found"
    sessions = httpx.get(capped.url + "/healthz", timeout=10).json()["sessions"]
    assert sessions["expired"] >= 1 and sessions["open"] == 0


def test_a_session_in_use_does_not_expire(start_server):
    s = start_server(plugins=("echo",), config='session_timeout = "2s"\n')
    c = session(s)
    end = time.monotonic() + 5
    while time.monotonic() < end:
        assert c.request("ping")["_status"] == 200
        time.sleep(0.5)


def test_plain_clients_are_unaffected(server):
    """Many ordinary requests over one keep-alive connection and over fresh ones."""
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for i in range(50):
            r = http.post("/tools/echo/call", json={"text": str(i)})
            assert r.status_code == 200 and r.json()["content"][0]["text"] == str(i)
    c = Mcp(server.url)
    c.initialize()
    assert c.call("echo", {"text": "mcp"})["result"]["content"][0]["text"] == "mcp"
