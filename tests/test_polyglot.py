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


def test_python_guest_arguments_are_validated_before_the_guest_runs(mcp):
    # The schema check runs first; a wrong type never reaches the guest.
    r = mcp.call("py.greet", {"name": 3})
    assert r["error"]["data"]["stage"] == "validate"


def test_python_guest_limits_apply(start_server):
    # The same Python tool under a fuel budget far below what one call
    # needs: the limit stops the guest with its error, and the server goes
    # on serving.
    s = start_server(plugins=("echo", "py-greet"), config="""
[[tools]]
name = "py.greet"
limits = { fuel = 100_000 }
""")
    c = Mcp(s.url)
    r = c.call("py.greet", {"name": "Ada"})
    assert r["error"]["data"]["stage"] == "handler", r
    assert r["error"]["message"] == "handler: fuel exhausted (limit 100000)"
    assert c.call("echo", {"text": "still here"})["result"]["content"][0]["text"] == "still here"
