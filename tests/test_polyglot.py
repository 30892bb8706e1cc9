"""Plugins in other languages, built from source by scripts/: a Python tool
and mapper (componentize-py) and a JavaScript tool (componentize-js),
listed and called over MCP."""

import pytest

from conftest import Mcp

CONFIG = """
[[tools]]
name = "echo"
mappers = { output = "py-shout" }
"""


@pytest.fixture(scope="module")
def mcp(start_server):
    s = start_server(plugins=("echo", "py-greet", "py-shout", "js-reverse"), config=CONFIG)
    c = Mcp(s.url)
    c.initialize()
    c.server = s
    return c


def test_python_and_js_tools_are_listed(mcp):
    tools = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}
    assert tools["py.greet"]["inputSchema"]["required"] == ["name"]
    assert tools["py.greet"]["annotations"]["readOnlyHint"] is True
    assert tools["js.reverse"]["title"] == "Reverse (JavaScript)"


def test_python_tool_call_and_error(mcp):
    r = mcp.call("py.greet", {"name": "Ada"})["result"]
    assert r == {"content": [{"type": "text", "text": "Hello, Ada! (from Python)"}],
                 "structuredContent": {"greeting": "Hello, Ada!"}, "isError": False}
    err = mcp.call("py.greet", {"name": "  "})["result"]
    assert err["isError"] is True and err["content"][0]["text"] == "name must not be empty"
    assert "greeting Ada" in mcp.server.log_text()


def test_js_tool_call_and_error(mcp):
    assert mcp.call("js.reverse", {"text": "hangar ✓"})["result"]["content"][0]["text"] == "✓ ragnah"
    err = mcp.call("js.reverse", {"text": ""})["result"]
    assert err["isError"] is True and err["content"][0]["text"] == "text must not be empty"


def test_python_mapper(mcp):
    assert mcp.call("echo", {"text": "quiet please"})["result"]["content"][0]["text"] == "QUIET PLEASE"


def test_python_guest_limits_apply(mcp):
    # The schema check runs first; a wrong type never reaches the guest.
    r = mcp.call("py.greet", {"name": 3})
    assert r["error"]["data"]["stage"] == "validate"
