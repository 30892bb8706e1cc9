"""The REST surface: GET /tools, GET /tools/{name}, POST /tools/{name}/call."""

import httpx
import pytest


@pytest.fixture(scope="module")
def server(start_server):
    return start_server()


def test_list_tools(server):
    tools = httpx.get(server.url + "/tools").json()
    echo = next(t for t in tools if t["name"] == "echo")
    assert set(echo) == {"name", "description", "inputSchema", "annotations", "plugin", "source"}
    assert echo["plugin"] == {"name": "echo", "tool": "echo"}
    assert echo["source"] == {"kind": "component", "name": "echo", "language": "rust"}
    simple = next(t for t in tools if t["name"] == "test_simple_text")
    assert "annotations" not in simple


def test_unknown_tool_is_404_with_exact_body(server):
    for r in (httpx.get(server.url + "/tools/nope"), httpx.post(server.url + "/tools/nope/call", json={})):
        assert r.status_code == 404
        assert r.json() == {"error": "Tool not found: nope"}


def test_call_success_carries_trace_id(server):
    r = httpx.post(server.url + "/tools/echo/call", json={"text": "rest"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["content"] == [{"type": "text", "text": "rest"}] and body["isError"] is False
    assert len(body["_meta"]["_trace_id"]) == 32


def test_traceparent_is_honoured(server):
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = httpx.post(server.url + "/tools/echo/call", json={"text": "t"}, headers={"traceparent": tp})
    assert r.json()["_meta"]["_trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_tool_error_is_500_with_is_error(server):
    r = httpx.post(server.url + "/tools/test_error_handling/call", json={})
    assert r.status_code == 500 and r.json()["isError"] is True


def test_invalid_json_body_runs_with_empty_arguments(server):
    r = httpx.post(server.url + "/tools/test_simple_text/call", content=b"{oops",
                   headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["content"][0]["text"] == "This is a simple text response for testing."


def test_a_body_that_does_not_say_json_is_415(server):
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded"):
        headers = {"content-type": content_type} if content_type else {}
        r = httpx.post(server.url + "/tools/test_simple_text/call", content=b"{}", headers=headers)
        assert r.status_code == 415, (content_type, r.text)
        assert r.json() == {"error": "the request body must be application/json (Content-Type)"}


def test_trapping_guest_is_500_with_its_message(server):
    r = httpx.post(server.url + "/tools/panic/call", json={})
    assert r.status_code == 500
    body = r.json()
    assert body["isError"] is True
    assert body["content"][0]["text"] == "handler: guest panicked: misbehave panicked on purpose"
