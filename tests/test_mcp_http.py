"""MCP Streamable HTTP at /mcp, spoken raw: framing, sessions, errors, guards."""

import httpx
import pytest

from conftest import Mcp

CONFIG = """
max_body_bytes = 65536
page_size = 4
"""


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(config=CONFIG)


@pytest.fixture
def mcp(server):
    client = Mcp(server.url)
    client.initialize()
    return client


def test_initialize_issues_a_session_and_negotiates_the_version(server):
    c = Mcp(server.url)
    r = c.initialize()
    assert c.session and len(c.session) >= 16
    assert r["result"]["protocolVersion"] == "2025-11-25"
    # A reload (plugins or config changed, SIGHUP) sends list_changed on the GET stream.
    assert r["result"]["capabilities"]["tools"] == {"listChanged": True}
    assert "logging" in r["result"]["capabilities"]
    assert r["result"]["serverInfo"]["name"] == "hangar"
    older = Mcp(server.url).request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                                   "clientInfo": {"name": "t", "version": "0"}})
    assert older["result"]["protocolVersion"] == "2025-03-26"
    future = Mcp(server.url).request("initialize", {"protocolVersion": "2099-01-01", "capabilities": {},
                                                    "clientInfo": {"name": "t", "version": "0"}})
    assert future["result"]["protocolVersion"] == "2025-11-25"


def test_ping(mcp):
    r = mcp.request("ping")
    assert r["result"] == {} and r["_status"] == 200


def test_tools_list_paginates_with_cursors(mcp):
    names, cursor, pages = [], None, 0
    while True:
        r = mcp.request("tools/list", {"cursor": cursor} if cursor else {})
        page = r["result"]["tools"]
        assert len(page) <= 4
        names += [t["name"] for t in page]
        pages += 1
        cursor = r["result"].get("nextCursor")
        if not cursor:
            break
    assert pages >= 3
    assert len(names) == len(set(names))
    assert {"echo", "test_simple_text", "spin", "hog"} <= set(names)


def test_tool_definitions_carry_schema_and_annotations(server):
    import httpx
    tool = httpx.get(server.url + "/tools/echo").json()
    assert tool["inputSchema"]["required"] == ["text"]
    assert tool["annotations"] == {"readOnlyHint": True}
    assert tool["title"] == "Echo"


def test_invalid_cursor_is_invalid_params(mcp):
    for cursor in ["garbage!!", "b2Zmc2V0Ojk5OTk"]:  # the second decodes to offset:9999
        r = mcp.request("tools/list", {"cursor": cursor})
        assert r["error"]["code"] == -32602, r


def test_echo_call(mcp):
    r = mcp.call("echo", {"text": "hi", "times": 3})
    assert r["result"] == {"content": [{"type": "text", "text": "hi hi hi"}], "isError": False}


def test_unknown_tool_is_method_not_found_naming_the_tool(mcp):
    r = mcp.call("no.such.tool", {})
    assert r["error"]["code"] == -32601
    assert r["error"]["message"] == "Tool not found: no.such.tool"
    assert r["error"]["data"]["stage"] == "resolve"


def test_tool_error_is_a_result_with_is_error(mcp):
    r = mcp.call("test_error_handling", {})
    assert r["result"]["isError"] is True
    assert r["result"]["content"][0]["text"] == "This tool intentionally returns an error for testing"


def test_wrong_argument_types_are_a_validation_error_naming_the_field(mcp):
    r = mcp.call("echo", {"text": 42})
    assert r["error"]["code"] == -32000 and r["error"]["data"]["stage"] == "validate"
    assert r["error"]["message"] == 'validate: invalid arguments: /text: 42 is not of type "string"'
    r = mcp.call("echo", {"text": "a", "loud": True, "times": 0})
    msg = r["error"]["message"]
    assert "/loud: not a declared argument" in msg and "/times: 0 is less than the minimum of 1" in msg, msg
    r = mcp.call("echo", {})
    assert '"text" is a required property' in r["error"]["message"]
    r = mcp.request("tools/call", {"name": "echo", "arguments": "not an object"})
    assert r["error"]["code"] == -32602


def test_malformed_json_is_parse_error(mcp):
    r = mcp.post(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32700


def test_invalid_requests(mcp):
    for body in ['{"jsonrpc":"1.0","id":1,"method":"ping"}', '[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
                 '{"jsonrpc":"2.0","id":1,"method":7}', '"just a string"']:
        r = mcp.post(body)
        assert r.status_code == 400, body
        assert r.json()["error"]["code"] == -32600, body


def test_unknown_method(mcp):
    r = mcp.request("resources/teleport")
    assert r["error"]["code"] == -32601


def test_body_over_the_limit_is_413(mcp, server):
    big = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"' \
        + "x" * 70_000 + '"}}}'
    r = mcp.post(big)
    assert r.status_code == 413
    assert mcp.call("echo", {"text": "still here"})["result"]["content"][0]["text"] == "still here"


def test_notifications_and_responses_get_202(mcp):
    assert mcp.notify("notifications/initialized").status_code == 202
    r = mcp.post({"jsonrpc": "2.0", "id": 99, "result": {}})
    assert r.status_code == 202 and r.content == b""


def test_unknown_session_is_404_and_delete_ends_a_session(mcp, server):
    bad = Mcp(server.url)
    bad.session = "does-not-exist"
    r = bad.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 404
    assert mcp.http.delete("/mcp", headers={"mcp-session-id": mcp.session}).status_code == 200
    assert mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 404
    assert mcp.http.delete("/mcp", headers={"mcp-session-id": mcp.session}).status_code == 404


def test_requests_without_a_session_are_served(server):
    c = Mcp(server.url)
    assert c.request("ping")["result"] == {}


def test_get_needs_a_session_and_sse(mcp):
    r = mcp.http.get("/mcp", headers={"accept": "text/event-stream"})
    assert r.status_code == 400 and "Mcp-Session-Id" in r.text
    r = mcp.http.get("/mcp", headers={"accept": "application/json", "mcp-session-id": mcp.session})
    assert r.status_code == 406
    r = mcp.http.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": "nope"})
    assert r.status_code == 404


def test_protocol_version_header(mcp):
    ok = mcp.request("ping", headers={"mcp-protocol-version": "2025-03-26"})
    assert ok["result"] == {}
    r = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"mcp-protocol-version": "1999-01-01"})
    assert r.status_code == 400


def test_dns_rebinding_protection(server):
    c = Mcp(server.url)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    assert c.post(init, {"origin": "http://evil.example.com"}).status_code == 403
    assert c.post(init, {"host": "evil.example.com"}).status_code == 403
    assert c.post(init, {"origin": f"http://localhost:{server.port}"}).status_code == 200


ROUTES = [("GET", "/healthz"), ("GET", "/openapi.json"), ("GET", "/ui"), ("GET", "/tools"), ("GET", "/tools/echo"),
          ("POST", "/tools/echo/call"), ("GET", "/resources"), ("GET", "/resources/read?uri=test://static-text"),
          ("GET", "/prompts"), ("POST", "/prompts/test_simple_prompt/get"), ("GET", "/no/such/route")]


@pytest.mark.parametrize("method, path", ROUTES)
def test_every_route_refuses_a_foreign_host_or_origin(server, method, path):
    http = httpx.Client(base_url=server.url, timeout=10)
    body = {"text": "x"} if path == "/tools/echo/call" else None
    for foreign in ({"host": "evil.example.com"}, {"origin": "http://evil.example.com"}):
        r = http.request(method, path, headers=foreign, json=body)
        assert r.status_code == 403, (foreign, r.status_code, r.text)
        assert "echo" not in r.text and "status" not in r.text
    # The same request from a loopback origin is served (an unknown route: 404).
    ok = http.request(method, path, headers={"origin": f"http://localhost:{server.port}"}, json=body)
    assert ok.status_code == (404 if path == "/no/such/route" else 200), (path, ok.text)


def test_logging_and_progress_stream_as_sse(mcp):
    assert mcp.request("logging/setLevel", {"level": "info"})["result"] == {}
    r = mcp.call("test_tool_with_logging", {})
    assert r["result"]["isError"] is False
    logs = [e for e in r["_events"] if e["method"] == "notifications/message"]
    assert [e["params"]["data"] for e in logs] == [
        "Tool execution started", "Tool processing data", "Tool execution completed"]
    assert all(e["params"]["level"] == "info" for e in logs)

    r = mcp.request("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                   "_meta": {"progressToken": "tok-1"}})
    progress = [e["params"] for e in r["_events"] if e["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("tok-1", 0, 100), ("tok-1", 50, 100), ("tok-1", 100, 100)]
    assert r["result"]["isError"] is False


def test_log_level_filters_and_no_level_means_no_log_notifications(server):
    c = Mcp(server.url)
    c.initialize()
    assert c.call("test_tool_with_logging", {})["_events"] == []
    c.request("logging/setLevel", {"level": "error"})
    assert c.call("test_tool_with_logging", {})["_events"] == []
    assert c.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602


def test_json_only_clients_get_json(server):
    c = Mcp(server.url, accept="application/json")
    c.initialize()
    c.request("logging/setLevel", {"level": "debug"})
    r = c.request("tools/call", {"name": "test_tool_with_progress", "_meta": {"progressToken": 5}})
    assert r["_events"] == [] and r["result"]["isError"] is False
