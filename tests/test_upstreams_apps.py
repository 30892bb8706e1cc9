"""MCP Apps from an upstream MCP server: the MCP Apps SDK's basic example server
from npm (tests/apps_upstream.py) behind `[upstreams.apps]`. Its app tool keeps
its `_meta.ui.resourceUri`, its `ui://` view is listed and read through Hangar
exactly as the server gives it (compared with what the server answers the
official Python SDK directly), under both protocol revisions and over REST,
over stdio and over Streamable HTTP. Two upstreams offering one URI: the first
keeps it and the other's is a problem; `resources = false` offers none;
`visible_to` and toolsets' `resources` globs apply to upstream resources."""

import asyncio
from datetime import datetime

import httpx
import pytest

from apps_upstream import BASIC_APP, MIME, NODE, TOOL, VIEW, HttpApp, http_config, start_apps, stdio_config
from conftest import session, wait_for
from test_mcp_2026 import modern

APP_TOOL = "apps." + TOOL


@pytest.fixture(scope="module")
def apps(start_server):
    return start_apps(start_server)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def direct():
    """What the example server answers the official SDK over stdio, without Hangar."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def run():
        params = StdioServerParameters(command=str(NODE), args=[str(BASIC_APP), "--stdio"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name: dump(t) for t in (await session.list_tools()).tools}
                resources = {str(r.uri): dump(r) for r in (await session.list_resources()).resources}
                return {"tool": tools[TOOL], "resource": resources[VIEW],
                        "read": dump(await session.read_resource(VIEW))}
    return asyncio.run(run())


def is_time(value):
    return isinstance(datetime.fromisoformat(value.replace("Z", "+00:00")), datetime)


def test_the_sdk_sees_the_app_tool_and_reads_its_view_as_the_server_gives_them(apps):
    want = direct()
    assert want["tool"]["_meta"]["ui"]["resourceUri"] == VIEW and want["resource"]["mimeType"] == MIME
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(apps.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.protocolVersion == "2025-11-25"
                assert init.capabilities.resources is not None
                tools = {t.name: t for t in (await session.list_tools()).tools}
                tool = tools[APP_TOOL]
                assert tool.meta["ui"]["resourceUri"] == VIEW
                assert dump(tool)["_meta"] == want["tool"]["_meta"]
                assert dump(tool)["inputSchema"] == want["tool"]["inputSchema"]
                resources = {str(r.uri): r for r in (await session.list_resources()).resources}
                assert dump(resources[VIEW]) == want["resource"]
                read = await session.read_resource(VIEW)
                assert dump(read) == want["read"]
                [contents] = read.contents
                assert contents.mimeType == MIME and "<html" in contents.text.lower()
                result = await session.call_tool(APP_TOOL, {})
                assert result.isError is False and is_time(result.structuredContent["time"])
    asyncio.run(run())


def test_the_2026_revision_sees_reads_and_calls_the_app(apps):
    tools = {t["name"]: t for t in modern(apps, "tools/list")["result"]["tools"]}
    assert tools[APP_TOOL]["_meta"]["ui"]["resourceUri"] == VIEW
    listed = {r["uri"]: r for r in modern(apps, "resources/list")["result"]["resources"]}
    assert listed[VIEW]["mimeType"] == MIME
    r = modern(apps, "resources/read", {"uri": VIEW})
    assert r["result"]["resultType"] == "complete", r
    [contents] = r["result"]["contents"]
    assert contents["uri"] == VIEW and contents["mimeType"] == MIME
    assert contents["text"] == direct()["read"]["contents"][0]["text"]
    r = modern(apps, "tools/call", {"name": APP_TOOL, "arguments": {}})
    assert r["result"]["isError"] is False and is_time(r["result"]["structuredContent"]["time"]), r


def test_rest_lists_reads_and_calls_the_app(apps):
    listed = {r["uri"]: r for r in httpx.get(apps.url + "/resources", timeout=10).json()["resources"]}
    assert listed[VIEW]["mimeType"] == MIME
    r = httpx.get(apps.url + "/resources/read", params={"uri": VIEW}, timeout=30)
    assert r.status_code == 200, r.text
    [contents] = r.json()["contents"]
    assert contents["mimeType"] == MIME and "<html" in contents["text"].lower()
    assert r.json()["_meta"]["_trace_id"]
    r = httpx.post(f"{apps.url}/tools/{APP_TOOL}/call", json={}, timeout=30)
    assert r.status_code == 200 and is_time(r.json()["structuredContent"]["time"]), r.text
    # A URI the upstream does not offer is not found, as any unknown one.
    r = httpx.get(apps.url + "/resources/read", params={"uri": "ui://get-time/other.html"}, timeout=30)
    assert r.status_code == 404, r.text


def test_the_app_over_streamable_http(start_server):
    app = HttpApp()
    try:
        s = start_apps(start_server, config=http_config(app.url))
        r = httpx.get(s.url + "/resources/read", params={"uri": VIEW}, timeout=30)
        assert r.status_code == 200, r.text
        [contents] = r.json()["contents"]
        assert contents["mimeType"] == MIME and "<html" in contents["text"].lower()
        tools = session(s).request("tools/list")["result"]["tools"]
        assert [t["_meta"]["ui"]["resourceUri"] for t in tools if t["name"] == APP_TOOL] == [VIEW]
        r = httpx.post(f"{s.url}/tools/{APP_TOOL}/call", json={}, timeout=30)
        assert r.status_code == 200 and is_time(r.json()["structuredContent"]["time"]), r.text
    finally:
        app.stop()


def health(s):
    return httpx.get(s.url + "/healthz", timeout=10).json()


def test_two_upstreams_offering_one_view_the_first_keeps_it(start_server):
    s = start_server(plugins=(), config=stdio_config("first", "first.") + stdio_config("second", "second."))
    wait_for(lambda: health(s)["problems"], 60, "both upstreams listed")
    report = health(s)
    assert report["status"] == "degraded"
    assert report["problems"] == [{"path": "upstreams.second",
                                   "error": f'resource "{VIEW}" is offered twice: the first source keeps it'}], report
    # Both tools are there, and the view is read (from the first).
    names = {t["name"] for t in httpx.get(s.url + "/tools", timeout=10).json()}
    assert {"first." + TOOL, "second." + TOOL} <= names
    listed = [r["uri"] for r in httpx.get(s.url + "/resources", timeout=10).json()["resources"]]
    assert listed.count(VIEW) == 1
    r = httpx.get(s.url + "/resources/read", params={"uri": VIEW}, timeout=30)
    assert r.status_code == 200 and r.json()["contents"][0]["mimeType"] == MIME


def test_resources_false_offers_none_of_its_resources(start_server):
    s = start_apps(start_server, config=stdio_config(extra="resources = false"))
    assert health(s)["problems"] == []
    listed = httpx.get(s.url + "/resources", timeout=10).json()["resources"]
    assert VIEW not in [r["uri"] for r in listed]
    r = httpx.get(s.url + "/resources/read", params={"uri": VIEW}, timeout=30)
    assert r.status_code == 404, r.text
    # Its tools are offered as before, their _meta unchanged.
    tools = session(s).request("tools/list")["result"]["tools"]
    assert [t["_meta"]["ui"]["resourceUri"] for t in tools if t["name"] == APP_TOOL] == [VIEW]


RULES = """
[plugins.api-key]
config = { keys = "admin=admin-key,user=user-key" }

[auth]
plugin = "api-key"

[[resources]]
uri = "ui://get-time/mcp-app.html"
visible_to = { sub = ["admin"] }

[toolsets.clock]
tools = ["apps.*"]
resources = ["ui://*"]

[toolsets.bare]
tools = ["apps.*"]
"""


def test_visible_to_and_toolsets_apply_to_an_upstreams_view(start_server):
    s = start_server(plugins=("api-key",), config=stdio_config() + RULES)
    admin, user = {"x-api-key": "admin-key"}, {"x-api-key": "user-key"}

    def listed(prefix, who):
        r = httpx.get(f"{s.url}{prefix}/resources", headers=who, timeout=10)
        assert r.status_code == 200, r.text
        return [r["uri"] for r in r.json()["resources"]]

    def read(prefix, who):
        return httpx.get(f"{s.url}{prefix}/resources/read", params={"uri": VIEW}, headers=who, timeout=30)

    wait_for(lambda: VIEW in listed("", admin), 60, "the app server's view")
    for prefix in ("", "/toolsets/clock"):
        assert VIEW in listed(prefix, admin)
        assert read(prefix, admin).json()["contents"][0]["mimeType"] == MIME
        # Hidden from one who may not see it, as an unknown one.
        assert VIEW not in listed(prefix, user)
        r = read(prefix, user)
        assert r.status_code == 404 and r.json() == {"error": f"Resource not found: {VIEW}"}, r.text
    # A toolset whose resources globs do not take it: neither listed nor read.
    assert VIEW not in listed("/toolsets/bare", admin)
    assert read("/toolsets/bare", admin).status_code == 404
    # Without a key the hidden view is not found either (not refused: that would tell it is there).
    assert read("", {}).status_code == 404
