"""MCP Apps (the `io.modelcontextprotocol/ui` extension): the sales-chart plugin's tool
links its view `ui://sales-chart/view` in `_meta.ui`, the view is read with MIME type
`text/html;profile=mcp-app` and its `_meta.ui` under both protocol revisions, the
server advertises the extension only where a tool links a view (per toolset), an
app-only tool is left out of the list of a client that renders no apps, a plugin's bad
`_meta` is refused with a clear error while the rest loads, and a DB tool's or
resource's `meta` passes through unchanged (MCP and REST)."""

import asyncio
import json
import subprocess
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from conftest import Server, parse_reply, run_hangar, session
from test_explorer import browser  # noqa: F401 (the fixture)
from test_mcp_2026 import meta as modern_meta

HERE = Path(__file__).resolve().parent
SDK2_PYTHON = HERE / ".venv-mcp2" / "bin" / "python"
UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
VIEW = "ui://sales-chart/view"
V2026 = "2026-07-28"
DECLARES = {"extensions": {UI: {"mimeTypes": [MIME]}}}

CHART_META = {"ui": {"resourceUri": VIEW, "visibility": ["model", "app"]}}
FORECAST_META = {"ui": {"resourceUri": VIEW, "visibility": ["app"]}}
VIEW_META = {"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}}
# Written in hangar.toml below; must come back exactly so.
DB_TOOL_META = {"ui": {"resourceUri": VIEW, "visibility": ["model", "app"]},
                "com.example/owner": {"team": "sales", "ids": [1, 2.5, True, "x"]}}
DB_RESOURCE_META = {"ui": {"prefersBorder": False, "csp": {"connectDomains": ["https://api.example.com"]}},
                    "note": "kept"}

CONFIG = """
[connectors.lite]
kind = "sqlite"
path = "{db}"

[[tools]]
name = "db.app"
description = "A DB tool that links the sales chart's view"
use = "lite"
statement = "SELECT 1 AS one"
meta = {{ ui = {{ resourceUri = "ui://sales-chart/view", visibility = ["model", "app"] }}, "com.example/owner" = {{ team = "sales", ids = [1, 2.5, true, "x"] }} }}

[[resources]]
uri = "lite://panel"
name = "panel"
use = "lite"
statement = "SELECT 'panel' AS p"
meta = {{ ui = {{ prefersBorder = false, csp = {{ connectDomains = ["https://api.example.com"] }} }}, note = "kept" }}

[toolsets.plain]
tools = ["echo"]

[toolsets.charts]
tools = ["sales.*"]
resources = ["ui://*"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, start_server):
    workdir = tmp_path_factory.mktemp("apps-db")
    return start_server(plugins=("echo", "sales-chart"), config=CONFIG.format(db=workdir / "t.db"))


@pytest.fixture(scope="module")
def plain(start_server):
    return start_server(plugins=("echo",))


def modern(server, method, params=None, caps=None, path="/mcp"):
    params = dict(params or {})
    params["_meta"] = modern_meta(caps)
    h = {"accept": "application/json, text/event-stream", "content-type": "application/json",
         "mcp-protocol-version": V2026, "mcp-method": method}
    if method == "resources/read":
        h["mcp-name"] = params["uri"]
    elif method == "tools/call":
        h["mcp-name"] = params["name"]
    r = httpx.post(server.url + path, headers=h, timeout=30,
                   json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return parse_reply(r)


def test_sdk_1_sees_the_tool_meta_and_reads_the_view(server):
    """The official Python SDK 1.x declares no apps support: it sees sales.chart with its
    _meta.ui and reads the view, and is not offered the app-only sales.forecast, which
    stays callable (visibility is no access control)."""
    async def go():
        async with streamablehttp_client(server.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                tools = {t.name: t for t in (await s.list_tools()).tools}
                listed = [r for r in (await s.list_resources()).resources if str(r.uri) == VIEW]
                view = await s.read_resource(VIEW)
                chart = await s.call_tool("sales.chart", {"region": "north"})
                forecast = await s.call_tool("sales.forecast", {"region": "north", "months": 2})
                return init, tools, listed, view, chart, forecast

    init, tools, listed, view, chart, forecast = asyncio.run(go())
    extensions = init.capabilities.model_extra["extensions"]
    assert extensions == {UI: {"mimeTypes": [MIME]}}
    assert tools["sales.chart"].meta == CHART_META
    assert "sales.forecast" not in tools
    assert tools["echo"].meta is None
    assert [(r.mimeType, r.meta) for r in listed] == [(MIME, VIEW_META)]
    [item] = view.contents
    assert (str(item.uri), item.mimeType, item.meta) == (VIEW, MIME, VIEW_META)
    assert item.text.startswith("<!DOCTYPE html>") and "ui/initialize" in item.text
    assert "<script src" not in item.text  # self-contained
    data = chart.structuredContent
    assert data["region"] == "north" and len(data["months"]) == 12
    assert data["total"] == sum(m["units"] for m in data["months"])
    assert "units" in chart.content[0].text
    assert not forecast.isError
    assert [m["month"] for m in forecast.structuredContent["forecast"]] == ["2027-01", "2027-02"]


# "auto" probes server/discover and settles on 2026-07-28 (pinned, the SDK skips discover).
@pytest.mark.parametrize("mode,protocol", [("legacy", "2025-11-25"), ("auto", V2026)])
@pytest.mark.parametrize("declare", [True, False])
def test_sdk_2_under_both_revisions(server, mode, protocol, declare):
    """The official Python SDK 2.x, on the 2025 handshake and on 2026-07-28: the
    server advertises the extension either way; a client that declares it (with the view
    MIME type) is offered the app-only tool too; the view's listing and read item carry
    its _meta.ui."""
    assert SDK2_PYTHON.exists(), "scripts/test installs mcp 2.x into tests/.venv-mcp2"
    out = subprocess.run([str(SDK2_PYTHON), str(HERE / "clients" / "sdk2_apps.py"), server.url + "/mcp",
                          mode, "declare" if declare else "plain"],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout)
    assert seen["protocol"] == protocol
    # Beside the tasks extension, which discover advertises too.
    assert seen["extensions"][UI] == {"mimeTypes": [MIME]}
    assert seen["tools"]["sales.chart"] == CHART_META
    if declare:
        assert seen["tools"]["sales.forecast"] == FORECAST_META
    else:
        assert "sales.forecast" not in seen["tools"]
    assert seen["listed"] == [{"mimeType": MIME, "_meta": VIEW_META}]
    assert seen["read"] == {"uri": VIEW, "mimeType": MIME, "_meta": VIEW_META, "doctype": True}
    assert seen["chart"]["region"] == "north" and len(seen["chart"]["months"]) == 12


@pytest.mark.parametrize("caps,offered", [
    (DECLARES, True),
    ({"extensions": {UI: {}}}, False),  # no mimeTypes: it renders nothing of ours
    ({"extensions": {UI: {"mimeTypes": ["text/uri-list"]}}}, False),
    ({}, False),
])
def test_the_app_only_tool_is_offered_to_clients_that_render_apps(server, caps, offered):
    c = session(server, caps)
    names = [t["name"] for t in c.request("tools/list")["result"]["tools"]]
    assert "sales.chart" in names
    assert ("sales.forecast" in names) == offered
    r = modern(server, "tools/list", caps=caps)
    names = [t["name"] for t in r["result"]["tools"]]
    assert ("sales.forecast" in names) == offered, r
    # The list follows the client's declared support: no shared cache may keep it.
    assert r["result"]["cacheScope"] == "private", r


def test_the_extension_is_advertised_only_where_an_app_is(server, plain):
    """Under both revisions: on a server without apps, on a toolset without one, not;
    on the whole catalog and on a toolset holding the app, yes."""
    def caps_2025(url, path):
        r = httpx.post(url + path, timeout=30, headers={"accept": "application/json, text/event-stream"},
                       json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                           "protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "apps-test", "version": "0"}}})
        return parse_reply(r)["result"]["capabilities"]

    for srv, path, advertised in [(server, "/mcp", True), (server, "/mcp/charts", True),
                                  (server, "/mcp/plain", False), (plain, "/mcp", False)]:
        caps = caps_2025(srv.url, path)
        assert ("extensions" in caps) == advertised, (srv.url, path, caps)
        discovered = modern(srv, "server/discover", path=path)["result"]["capabilities"]
        assert (UI in discovered.get("extensions", {})) == advertised, (srv.url, path, discovered)
        if advertised:
            assert caps["extensions"][UI] == {"mimeTypes": [MIME]}
            assert discovered["extensions"][UI] == {"mimeTypes": [MIME]}


def test_a_modern_read_of_the_view_carries_its_meta(server):
    r = modern(server, "resources/read", {"uri": VIEW}, caps=DECLARES)
    [item] = r["result"]["contents"]
    assert (item["mimeType"], item["_meta"]) == (MIME, VIEW_META)


def test_db_meta_passes_through_unchanged_on_mcp_and_rest(server):
    c = session(server)
    tools = {t["name"]: t for t in c.request("tools/list")["result"]["tools"]}
    assert tools["db.app"]["_meta"] == DB_TOOL_META
    rest = {t["name"]: t for t in httpx.get(server.url + "/tools").json()}
    assert rest["db.app"]["_meta"] == DB_TOOL_META
    assert rest["sales.chart"]["_meta"] == CHART_META
    assert "_meta" not in rest["echo"]
    one = httpx.get(server.url + "/tools/sales.chart").json()
    assert one["_meta"] == CHART_META
    listed = {r["uri"]: r for r in c.request("resources/list")["result"]["resources"]}
    assert listed["lite://panel"]["_meta"] == DB_RESOURCE_META
    [item] = c.request("resources/read", {"uri": "lite://panel"})["result"]["contents"]
    assert item["_meta"] == DB_RESOURCE_META


def test_a_db_entry_with_a_bad_meta_is_a_clear_config_error(tmp_path):
    (tmp_path / "plugins").mkdir()
    for meta, said in [('{ ui = { resourceUri = "https://example.com/v" } }', "must be a ui:// URI"),
                       ('{ ui = "ui://a/b" }', "_meta.ui must be a JSON object"),
                       ('{ ui = { visibility = ["everyone"] } }', "visibility")]:
        config = tmp_path / "hangar.toml"
        config.write_text(f'[connectors.lite]\nkind = "sqlite"\npath = "{tmp_path / "t.db"}"\n'
                          f'[[tools]]\nname = "db.bad"\nuse = "lite"\nstatement = "SELECT 1"\nmeta = {meta}\n')
        out = run_hangar("check", "--config", str(config), "--plugins", str(tmp_path / "plugins"))
        assert out.returncode != 0
        assert "tool db.bad" in out.stderr + out.stdout and said in out.stderr + out.stdout, out


def test_a_plugins_bad_meta_is_refused_and_the_rest_loads(tmp_path, start_server):
    """bad-meta declares a _meta that is no object, a view that is not ui://, _meta for a
    tool and a resource it does not offer, and a tool whose view no one offers: each
    refusal names what it refused and why, and every tool still loads."""
    srv = start_server(plugins=("echo", "bad-meta"))
    log = srv.log_text()
    assert 'tool "meta.array": _meta must be a JSON object, not an array' in log
    assert 'tool "meta.http": _meta.ui.resourceUri must be a ui:// URI, not "https://example.com/view"' in log
    assert 'tool "meta.absent": _meta for a tool the component does not list' in log
    assert 'resource "ui://bad-meta/absent": _meta for a resource the component does not list' in log
    assert "tool meta.orphan: its view ui://bad-meta/missing" in log
    c = session(srv)
    tools = {t["name"]: t for t in c.request("tools/list")["result"]["tools"]}
    assert {"echo", "meta.fine", "meta.array", "meta.http", "meta.orphan"} <= set(tools)
    assert tools["meta.fine"]["_meta"] == {"ui": {"resourceUri": "ui://bad-meta/view"}, "x-extra": 1}
    assert "_meta" not in tools["meta.array"] and "_meta" not in tools["meta.http"]
    assert c.call("echo", {"text": "still here"})["result"]["content"][0]["text"] == "still here"

    work = tmp_path / "check"
    s = Server(work, ("echo", "bad-meta"))
    out = run_hangar("check", "--config", str(s.config_path), "--plugins", str(s.plugins_dir))
    text = out.stdout
    assert out.returncode == 1, text
    assert "  tool  meta.fine" in text
    assert "        app    view ui://bad-meta/view (visible to model, app)" in text
    assert "must be a JSON object, not an array" in text and "must be a ui:// URI" in text
    assert ("  warning tool meta.orphan: its view ui://bad-meta/missing (_meta.ui.resourceUri) "
            "is no resource the catalog offers") in text
    assert "tool meta.fine: its view" not in text


HOST_PAGE = """<!DOCTYPE html><html><body>
<iframe id="view" sandbox="allow-scripts" style="width:640px;height:320px;border:0"></iframe>
<script>
// A minimal MCP Apps host: it renders the view, answers its handshake, hands it the
// tool's input and result, and passes its tools/call on to Hangar (window.callTool).
window.seen = [];
const frame = document.getElementById("view");
window.addEventListener("message", async (event) => {
  if (event.source !== frame.contentWindow) return;
  const msg = event.data;
  window.seen.push(msg);
  const reply = (result) => frame.contentWindow.postMessage({ jsonrpc: "2.0", id: msg.id, result }, "*");
  if (msg.method === "ui/initialize") {
    reply({ protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "0" },
            hostCapabilities: { serverTools: {} },
            hostContext: { toolInfo: { tool: { name: "sales.chart" } }, displayMode: "inline" } });
  } else if (msg.method === "ui/notifications/initialized") {
    window.initialized = true;
  } else if (msg.method === "tools/call") {
    reply(await window.callTool(msg.params.name, msg.params.arguments));
  }
});
window.render = (html) => { frame.srcdoc = html; };
window.tell = (method, params) => frame.contentWindow.postMessage({ jsonrpc: "2.0", method, params }, "*");
</script></body></html>"""


def test_the_view_charts_the_result_and_calls_the_forecast_through_the_host(server, browser):
    """The view as a client would run it, in headless Chromium: the ui/initialize
    handshake, the tool's input and result as notifications, 12 bars drawn; its button
    sends tools/call for sales.forecast, which this host passes to Hangar over MCP, and
    3 projected bars follow; it reports its size."""
    c = session(server, DECLARES)
    [item] = c.request("resources/read", {"uri": VIEW})["result"]["contents"]
    arguments = {"region": "east"}
    result = c.call("sales.chart", arguments)["result"]
    calls = []

    def call_tool(name, args):
        calls.append((name, args))
        return c.call(name, args)["result"]

    page = browser.new_page()
    page.expose_function("callTool", call_tool)
    page.set_content(HOST_PAGE)
    page.evaluate("html => window.render(html)", item["text"])
    page.wait_for_function("window.initialized === true")
    page.evaluate("([a, r]) => { tell('ui/notifications/tool-input', { arguments: a }); "
                  "tell('ui/notifications/tool-result', r); }", [arguments, result])
    view = page.frame_locator("#view")
    view.locator("rect.bar").nth(11).wait_for()
    assert view.locator("rect.bar").count() == 12
    assert view.locator("#title").inner_text() == "Units sold per month — east"
    view.locator("#forecast").click()
    view.locator("rect.forecast").nth(2).wait_for()
    assert view.locator("rect.forecast").count() == 3
    assert calls == [("sales.forecast", {"region": "east", "months": 3})]
    assert view.locator("#status").inner_text().startswith("Forecast: 2027-01 ")
    seen = page.evaluate("window.seen")
    init = next(m for m in seen if m.get("method") == "ui/initialize")
    assert init["params"]["protocolVersion"] == "2026-01-26" and init["params"]["appInfo"]["name"] == "sales-chart"
    sizes = [m["params"] for m in seen if m.get("method") == "ui/notifications/size-changed"]
    assert sizes and all(s["width"] > 0 and s["height"] > 0 for s in sizes)
    page.close()
