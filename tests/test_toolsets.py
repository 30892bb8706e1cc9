"""Toolsets: `[toolsets.NAME]` globs over tool names (and resource URIs),
served at `/mcp/NAME` under both protocol revisions and at
`/toolsets/NAME/…` on REST. Two toolsets whose globs overlap each list
exactly their own tools; a tool outside a toolset is an unknown tool there;
`/mcp` stays the whole catalog unless `[server] default_toolset` says
otherwise; a toolset with its own OAuth resource takes only tokens minted
for it (a real oidc-provider mints them)."""

import asyncio
import json
import queue

import httpx
import pytest

from conftest import Mcp, parse_reply, run_hangar, wait_for
from test_mcp_offers import Stream
from test_oauth import PRM, AuthServer, oauth_server

V2026 = "2026-07-28"

TOOLS = ["db.products", "db.orders", "weather.get", "weather.set"]

CONFIG = """
[connectors.lite]
kind = "sqlite"
path = "{db}"
{tools}
[[resources]]
uri = "lite://stats"
name = "stats"
use = "lite"
statement = "SELECT 1 AS one"

[[resources]]
uri = "lite://secret"
name = "secret"
use = "lite"
statement = "SELECT 'hidden' AS s"

[toolsets.data]
tools = ["db.*", "weather.get"]
resources = ["lite://stats"]

[toolsets.weather]
tools = ["weather.*", "db.products"]

[toolsets.stale]
tools = ["gone.*", "db.orders"]
"""


def tool_entries():
    return "".join(
        f'\n[[tools]]\nname = "{name}"\ndescription = "{name}"\nuse = "lite"\n'
        f"statement = \"SELECT '{name}' AS answer\"\n"
        for name in TOOLS
    )


def config_for(workdir, head=""):
    return head + CONFIG.format(db=workdir / "t.db", tools=tool_entries())


@pytest.fixture(scope="module")
def server(tmp_path_factory, start_server):
    workdir = tmp_path_factory.mktemp("toolsets-db")
    return start_server(plugins=(), config=config_for(workdir))


def names(items, key="name"):
    return sorted(i[key] for i in items)


def session_at(server, path):
    c = Mcp(server.url, path=path)
    c.initialize()
    return c


def modern(server, path, method, params=None):
    """One stateless 2026-07-28 request to `path`."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientInfo": {"name": "hangar-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json",
               "mcp-protocol-version": V2026, "mcp-method": method}
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    r = httpx.post(server.url + path, headers=headers, content=json.dumps(body), timeout=30)
    return parse_reply(r)


EXPECTED = {
    "/mcp": sorted(TOOLS),
    "/mcp/data": ["db.orders", "db.products", "weather.get"],
    "/mcp/weather": ["db.products", "weather.get", "weather.set"],
}


@pytest.mark.parametrize("path", list(EXPECTED))
def test_each_endpoint_lists_exactly_its_tools_under_2025(server, path):
    r = session_at(server, path).request("tools/list")
    assert names(r["result"]["tools"]) == EXPECTED[path]


@pytest.mark.parametrize("path", list(EXPECTED))
def test_each_endpoint_lists_exactly_its_tools_under_2026(server, path):
    r = modern(server, path, "tools/list")
    assert r["_status"] == 200, r
    assert names(r["result"]["tools"]) == EXPECTED[path]


def test_the_python_sdk_sees_only_the_toolset(server):
    from mcp import ClientSession
    from mcp.shared.exceptions import McpError
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(server.url + "/mcp/weather") as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()
                listed = await s.list_tools()
                called = await s.call_tool("weather.set", {})
                try:
                    await s.call_tool("db.orders", {})
                    outside = None
                except McpError as e:
                    outside = e.error
                return listed, called, outside

    listed, called, outside = asyncio.run(run())
    assert sorted(t.name for t in listed.tools) == EXPECTED["/mcp/weather"]
    assert not called.isError and "weather.set" in called.content[0].text
    assert outside is not None and outside.code == -32601
    assert outside.message == "Tool not found: db.orders"


@pytest.mark.parametrize("path,tool", [("/mcp/data", "weather.set"), ("/mcp/weather", "db.orders")])
def test_a_tool_outside_the_toolset_is_an_unknown_tool(server, path, tool):
    inside = session_at(server, "/mcp").call(tool, {})
    assert inside["result"]["isError"] is False, inside
    outside = session_at(server, path).call(tool, {})
    unknown = session_at(server, path).call("no.such.tool", {})
    assert outside["error"]["code"] == unknown["error"]["code"] == -32601
    assert outside["error"]["message"] == unknown["error"]["message"].replace("no.such.tool", tool)
    modern_outside = modern(server, path, "tools/call", {"name": tool, "arguments": {}})
    modern_unknown = modern(server, path, "tools/call", {"name": "no.such.tool", "arguments": {}})
    assert "error" in modern_outside, modern_outside
    assert modern_outside["error"]["code"] == modern_unknown["error"]["code"]


def test_a_tool_in_two_toolsets_answers_in_both(server):
    for path in ("/mcp/data", "/mcp/weather"):
        r = session_at(server, path).call("db.products", {})
        assert r["result"]["isError"] is False, r
        assert "db.products" in r["result"]["content"][0]["text"]
        r = modern(server, path, "tools/call", {"name": "weather.get", "arguments": {}})
        assert r["result"]["isError"] is False, r


def test_resources_follow_the_toolset(server):
    data = session_at(server, "/mcp/data")
    assert names(data.request("resources/list")["result"]["resources"], "uri") == ["lite://stats"]
    read = data.request("resources/read", {"uri": "lite://stats"})
    assert "contents" in read["result"], read
    hidden = data.request("resources/read", {"uri": "lite://secret"})
    absent = data.request("resources/read", {"uri": "lite://nothing"})
    assert hidden["error"]["code"] == absent["error"]["code"]
    # The weather toolset names no resources: none.
    weather = session_at(server, "/mcp/weather")
    assert weather.request("resources/list")["result"]["resources"] == []
    whole = session_at(server, "/mcp").request("resources/list")["result"]["resources"]
    assert names(whole, "uri") == ["lite://secret", "lite://stats"]


def test_rest_serves_each_toolset(server):
    for path, expected in [("/toolsets/data", EXPECTED["/mcp/data"]),
                           ("/toolsets/weather", EXPECTED["/mcp/weather"]),
                           ("", EXPECTED["/mcp"])]:
        r = httpx.get(f"{server.url}{path}/tools")
        assert r.status_code == 200, r.text
        assert names(r.json()) == expected
    r = httpx.post(f"{server.url}/toolsets/data/tools/weather.get/call", json={})
    assert r.status_code == 200 and "weather.get" in r.text, r.text
    r = httpx.post(f"{server.url}/toolsets/data/tools/weather.set/call", json={})
    assert r.status_code == 404, r.text
    assert httpx.get(f"{server.url}/toolsets/data/tools/weather.set").status_code == 404
    assert httpx.get(f"{server.url}/toolsets/weather/tools/weather.set").status_code == 200
    r = httpx.get(f"{server.url}/toolsets/data/resources")
    assert names(r.json()["resources"], "uri") == ["lite://stats"]
    assert httpx.get(f"{server.url}/toolsets/nope/tools").status_code == 404
    assert httpx.post(f"{server.url}/mcp/nope", json={}).status_code == 404


def test_healthz_lists_toolsets_and_globs_that_match_nothing(server):
    toolsets = httpx.get(server.url + "/healthz").json()["toolsets"]
    assert sorted(toolsets) == ["data", "stale", "weather"]
    assert toolsets["data"]["tools"] == 3 and toolsets["data"]["warnings"] == []
    assert toolsets["stale"]["tools"] == 1
    assert toolsets["stale"]["warnings"] == [
        '[toolsets.stale] tools: "gone.*" matches nothing in the catalog']


def test_check_lists_toolsets_and_warns(tmp_path):
    (tmp_path / "plugins").mkdir()
    config = tmp_path / "hangar.toml"
    config.write_text(config_for(tmp_path, f'[server]\ncache_dir = "{tmp_path / "cache"}"\n'))
    out = run_hangar("check", "--config", str(config), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "toolset data (3 tools" in out.stdout
    assert "toolset weather (3 tools" in out.stdout
    assert 'warning [toolsets.stale] tools: "gone.*" matches nothing in the catalog' in out.stdout


def test_default_toolset_narrows_mcp_and_rest(tmp_path_factory, start_server):
    workdir = tmp_path_factory.mktemp("toolsets-default")
    s = start_server(plugins=(), config=config_for(workdir, 'default_toolset = "weather"\n'))
    r = session_at(s, "/mcp").request("tools/list")
    assert names(r["result"]["tools"]) == EXPECTED["/mcp/weather"]
    assert names(modern(s, "/mcp", "tools/list")["result"]["tools"]) == EXPECTED["/mcp/weather"]
    assert names(httpx.get(s.url + "/tools").json()) == EXPECTED["/mcp/weather"]
    assert session_at(s, "/mcp").call("db.orders", {})["error"]["code"] == -32601
    # The other toolsets keep their own endpoints.
    r = session_at(s, "/mcp/data").request("tools/list")
    assert names(r["result"]["tools"]) == EXPECTED["/mcp/data"]


@pytest.mark.parametrize("text,why", [
    ('[toolsets."a/b"]\ntools = ["x"]\n', "path segment"),
    ('[server]\ndefault_toolset = "nope"\n[toolsets.a]\n', "default_toolset"),
    ('[toolsets.a]\nresource = "http://127.0.0.1/mcp/a"\n', "[oauth]"),
])
def test_bad_toolsets_are_refused_at_check(tmp_path, text, why):
    config = tmp_path / "hangar.toml"
    config.write_text(text)
    out = run_hangar("check", "--config", str(config), "--plugins", str(tmp_path))
    assert out.returncode != 0
    assert why in out.stdout + out.stderr


# -- a toolset with its own OAuth resource ---------------------------------

OAUTH_TOOLSET = """
[toolsets.ops]
tools = ["whoami", "refund"]
resource = "http://127.0.0.1:__PORT__/mcp/ops"

[toolsets.open]
tools = ["whoami"]
"""


@pytest.fixture(scope="module")
def auth_server():
    a = AuthServer(prefix="ts")
    yield a
    a.stop()


@pytest.fixture(scope="module")
def hangar(tmp_path_factory, shared_cache, auth_server):
    s = oauth_server(tmp_path_factory, shared_cache, auth_server, OAUTH_TOOLSET)
    yield s
    s.stop()


def bearer(token):
    return {"authorization": f"Bearer {token}"}


def test_the_toolset_metadata_names_its_own_resource(hangar, auth_server):
    own = httpx.get(f"{hangar.url}{PRM}/mcp/ops")
    assert own.status_code == 200, own.text
    assert own.json()["resource"] == f"{hangar.url}/mcp/ops"
    assert own.json()["authorization_servers"] == [auth_server.issuer]
    assert httpx.get(f"{hangar.url}{PRM}/mcp").json()["resource"] == hangar.resource
    r = Mcp(hangar.url, path="/mcp/ops").request("tools/list")
    assert r["_status"] == 401
    # Its challenge points at its own metadata.
    r = httpx.post(f"{hangar.url}/mcp/ops", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401
    assert f'resource_metadata="{hangar.url}{PRM}/mcp/ops"' in r.headers["www-authenticate"]


def test_a_toolset_refuses_a_token_minted_for_another_resource(hangar, auth_server):
    ops_token = auth_server.token("admin", f"{hangar.url}/mcp/ops", scope="tools:read tools:admin")
    main_token = auth_server.token("admin", hangar.resource, scope="tools:read tools:admin")

    ops = Mcp(hangar.url, path="/mcp/ops")
    ops.http.headers.update(bearer(main_token))
    r = ops.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401, r.text
    assert 'error="invalid_token"' in r.headers["www-authenticate"]
    assert httpx.get(f"{hangar.url}/toolsets/ops/tools", headers=bearer(main_token)).status_code == 401

    ops.http.headers.update(bearer(ops_token))
    ops.initialize()
    assert names(ops.request("tools/list")["result"]["tools"]) == ["refund", "whoami"]
    r = ops.call("refund", {})
    assert r["result"]["isError"] is False, r
    r = httpx.get(f"{hangar.url}/toolsets/ops/tools", headers=bearer(ops_token))
    assert r.status_code == 200 and names(r.json()) == ["refund", "whoami"]

    # The token for the toolset is no good on /mcp, nor on a toolset that
    # takes what [oauth] takes; the main token is good there.
    whole = Mcp(hangar.url)
    whole.http.headers.update(bearer(ops_token))
    assert whole.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 401
    opened = Mcp(hangar.url, path="/mcp/open")
    opened.http.headers.update(bearer(ops_token))
    assert opened.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 401
    opened.http.headers.update(bearer(main_token))
    opened.initialize()
    assert names(opened.request("tools/list")["result"]["tools"]) == ["whoami"]


# -- a toolset with its own auth check --------------------------------------

GUARDED = """
[plugins.api-key]
config = { keys = "ops=s3cret" }

[toolsets.guarded]
tools = ["db.*"]
resources = ["lite://*"]
auth = { plugin = "api-key", policy = { header = "x-api-key" } }
"""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, start_server):
    workdir = tmp_path_factory.mktemp("toolsets-auth")
    return start_server(plugins=("api-key",), config=config_for(workdir) + GUARDED)


def test_a_toolset_auth_check_guards_its_endpoints_only(guarded):
    anonymous = session_at(guarded, "/mcp/guarded")
    assert anonymous.request("tools/list")["result"]["tools"] == []
    assert anonymous.request("resources/list")["result"]["resources"] == []
    refused = anonymous.call("db.orders", {})
    assert "error" in refused and refused["error"]["data"]["stage"] == "auth", refused
    refused = anonymous.request("resources/read", {"uri": "lite://stats"})
    assert "error" in refused, refused
    assert httpx.get(guarded.url + "/toolsets/guarded/tools").json() == []
    r = httpx.post(guarded.url + "/toolsets/guarded/tools/db.orders/call", json={})
    assert r.status_code == 401, r.text

    key = {"x-api-key": "s3cret"}
    keyed = Mcp(guarded.url, path="/mcp/guarded")
    keyed.http.headers.update(key)
    keyed.initialize()
    assert names(keyed.request("tools/list")["result"]["tools"]) == ["db.orders", "db.products"]
    assert keyed.call("db.orders", {})["result"]["isError"] is False
    r = httpx.post(guarded.url + "/toolsets/guarded/tools/db.orders/call", json={}, headers=key)
    assert r.status_code == 200, r.text
    wrong = Mcp(guarded.url, path="/mcp/guarded")
    wrong.http.headers.update({"x-api-key": "nope"})
    assert "error" in wrong.call("db.orders", {})

    # The whole catalog at /mcp asks for no key.
    assert session_at(guarded, "/mcp").call("db.orders", {})["result"]["isError"] is False


# -- prompts ------------------------------------------------------------------

PROMPTS = """
[toolsets.prompts]
prompts = ["test_simple_prompt", "test_prompt_with_*"]
"""


def test_prompts_follow_the_toolset(tmp_path_factory, start_server):
    s = start_server(plugins=("everything",), config=PROMPTS, cache=False)
    c = session_at(s, "/mcp/prompts")
    assert c.request("tools/list")["result"]["tools"] == []
    listed = names(c.request("prompts/list")["result"]["prompts"])
    assert listed == ["test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                      "test_prompt_with_image", "test_simple_prompt"]
    got = c.request("prompts/get", {"name": "test_simple_prompt"})
    assert got["result"]["messages"], got
    outside = c.request("prompts/get", {"name": "test_input_required_result_prompt"})
    unknown = c.request("prompts/get", {"name": "no_such_prompt"})
    assert outside["error"]["code"] == unknown["error"]["code"] == -32602, outside
    whole = names(session_at(s, "/mcp").request("prompts/list")["result"]["prompts"])
    assert "test_input_required_result_prompt" in whole
    r = httpx.get(s.url + "/toolsets/prompts/prompts")
    assert names(r.json()["prompts"]) == listed


def test_a_config_edit_changes_what_a_toolset_serves(tmp_path_factory, start_server):
    workdir = tmp_path_factory.mktemp("toolsets-reload")
    s = start_server(plugins=(), config=config_for(workdir))

    def weather():
        return names(httpx.get(s.url + "/toolsets/weather/tools").json())

    assert weather() == EXPECTED["/mcp/weather"]
    text = s.config_path.read_text()
    s.config_path.write_text(text.replace('tools = ["weather.*", "db.products"]', 'tools = ["weather.*"]'))
    wait_for(lambda: weather() == ["weather.get", "weather.set"], 30, "the narrowed toolset")
    assert session_at(s, "/mcp/weather").call("db.products", {})["error"]["code"] == -32601
    assert names(httpx.get(s.url + "/toolsets/data/tools").json()) == EXPECTED["/mcp/data"]
    # Which toolsets exist is set at start-up: one added (and one removed) by an edit waits
    # for a restart, and the reload says so; the globs of the others still apply.
    edited = s.config_path.read_text().replace("[toolsets.stale]", "[toolsets.later]")
    s.config_path.write_text(edited.replace('tools = ["weather.*"]', 'tools = ["weather.set"]'))
    wait_for(lambda: weather() == ["weather.set"], 30, "the reload that adds a toolset")
    last = httpx.get(s.url + "/healthz").json()["reload"]["last"]
    assert last["outcome"] == "applied", last
    assert "[toolsets] added, removed or given another resource" in last["needs_restart"], last
    assert httpx.get(s.url + "/toolsets/later/tools").status_code == 404
    assert names(httpx.get(s.url + "/toolsets/stale/tools").json()) == ["db.orders"]


def test_a_list_change_is_told_only_where_the_list_changed(tmp_path_factory, start_server):
    """After a config edit, a session hears `tools/list_changed` only when the tool list of
    its own endpoint changed: narrowing `weather` tells `/mcp/weather` and no one else; a new
    `db.` tool tells `/mcp` and `/mcp/data` (whose glob takes it), not `/mcp/weather`."""
    workdir = tmp_path_factory.mktemp("toolsets-changes")
    s = start_server(plugins=(), config=config_for(workdir))
    paths = ["/mcp", "/mcp/data", "/mcp/weather"]
    streams = {p: Stream(s, session_at(s, p).session, path=p) for p in paths}
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}

    def heard(path, timeout):
        try:
            return streams[path].next(timeout=timeout)
        except queue.Empty:
            return None

    try:
        text = s.config_path.read_text()
        s.config_path.write_text(
            text.replace('tools = ["weather.*", "db.products"]', 'tools = ["weather.*"]'))
        assert heard("/mcp/weather", 30) == changed
        # Every stream was sent its change (or none) at the same moment.
        assert heard("/mcp", 2) is None
        assert heard("/mcp/data", 0.1) is None

        extra = '\n[[tools]]\nname = "db.extra"\ndescription = "x"\nuse = "lite"\nstatement = "SELECT 1 AS one"\n'
        s.config_path.write_text(s.config_path.read_text() + extra)
        assert heard("/mcp", 30) == changed
        assert heard("/mcp/data", 10) == changed
        assert heard("/mcp/weather", 2) is None
        assert "db.extra" in names(httpx.get(s.url + "/toolsets/data/tools").json())
    finally:
        for stream in streams.values():
            stream.close()


@pytest.mark.parametrize("path,offers_resources", [("/mcp", True), ("/mcp/data", True),
                                                   ("/mcp/weather", False)])
def test_a_toolset_offers_resources_only_when_it_holds_some(server, path, offers_resources):
    """`initialize` (2025) and `server/discover` (2026-07-28) advertise what the endpoint's
    toolset holds, not the whole catalog's: `weather` has no resources."""
    caps = Mcp(server.url, path=path).initialize()["result"]["capabilities"]
    discovered = modern(server, path, "server/discover")["result"]["capabilities"]
    assert ("resources" in caps) == offers_resources, caps
    assert ("resources" in discovered) == offers_resources, discovered
    assert "tools" in caps and "tools" in discovered


# -- two toolsets, two auth checks: one's answer never opens the other --------

TWO_CHECKS = """
catalog = "both"

[auth]
plugin = "api-key"

[plugins.api-key]
config = {{ keys = "pub=pub-key,adm=adm-key" }}

[plugins.admin-key]
config = {{ keys = "adm=adm-key" }}

[connectors.lite]
kind = "sqlite"
path = "{db}"

[[tools]]
name = "public.count"
description = "Counts for everyone"
use = "lite"
statement = "SELECT 1 AS n"

[[tools]]
name = "admin.wordcount"
description = "Counts words for administrators"
use = "lite"
statement = "SELECT 2 AS n"

[[resources]]
uri = "lite://public"
name = "public"
use = "lite"
statement = "SELECT 'public' AS s"

[[resources]]
uri = "lite://admin"
name = "admin"
use = "lite"
statement = "SELECT 'admin' AS s"

[toolsets.public]
tools = ["public.*"]
resources = ["lite://public"]
prompts = ["test_simple_prompt"]
auth = {{ plugin = "api-key" }}

[toolsets.admin]
tools = ["admin.*"]
resources = ["lite://admin"]
prompts = ["test_prompt_with_arguments"]
auth = {{ plugin = "admin-key" }}
"""


@pytest.fixture(scope="module")
def two_checks(tmp_path_factory, shared_cache):
    """The same api-key component twice, under two names with two key lists:
    `api-key` takes the public and the admin key, `admin-key` only the admin
    one. The server-wide check is `api-key`."""
    from conftest import Server, plugin_path
    import shutil

    workdir = tmp_path_factory.mktemp("toolsets-two-checks")
    s = Server(workdir, ("api-key", "everything"), TWO_CHECKS.format(db=workdir / "t.db"), shared_cache)
    shutil.copy(plugin_path("api-key"), s.plugins_dir / "admin-key.wasm")
    s.start()
    yield s
    s.stop()


PUBLIC = {"x-api-key": "pub-key"}
META = {"search_tools", "read_tool", "call_tool"}
ADMIN = {"x-api-key": "adm-key"}


def mcp_as(server, path, headers):
    c = Mcp(server.url, path=path)
    c.http.headers.update(headers)
    c.initialize()
    return c


def test_one_checks_answer_opens_only_its_own_listings(two_checks):
    """Every listing surface of `admin`, asked right after the same caller's
    `public` listing succeeded (the answer kept for listings is fresh): the
    public key opens none of them."""
    public = mcp_as(two_checks, "/mcp/public", PUBLIC)
    admin = mcp_as(two_checks, "/mcp/admin", PUBLIC)

    def opened_public():
        # The public check accepts the key: its answer is now kept.
        assert "public.count" in names(public.request("tools/list")["result"]["tools"])

    opened_public()
    assert set(names(admin.request("tools/list")["result"]["tools"])) <= META
    opened_public()
    assert admin.request("resources/list")["result"]["resources"] == []
    opened_public()
    assert admin.request("prompts/list")["result"]["prompts"] == []
    opened_public()
    # A meta-tool through the toolset is refused, or finds nothing.
    found = admin.call("search_tools", {"query": "count words administrators"})
    assert "error" in found or found["result"]["structuredContent"]["results"] == [], found
    opened_public()
    read = admin.call("read_tool", {"path": "admin.wordcount"})
    assert "error" in read or read["result"]["isError"] is True, read
    opened_public()
    r = httpx.get(two_checks.url + "/toolsets/admin/tools", headers=PUBLIC)
    assert r.json() == [], r.text
    opened_public()
    r = httpx.get(two_checks.url + "/toolsets/admin/resources", headers=PUBLIC)
    assert r.status_code in (200, 401) and "lite://admin" not in r.text, r.text
    opened_public()
    r = httpx.get(two_checks.url + "/toolsets/admin/prompts", headers=PUBLIC)
    assert "test_prompt_with_arguments" not in r.text, r.text
    # /healthz: the details are open to the public key (the server-wide
    # check takes it), but not what the admin toolset holds.
    opened_public()
    health = httpx.get(two_checks.url + "/healthz", headers=PUBLIC).json()
    assert health["toolsets"]["public"]["tools"] == 1, health
    assert health["toolsets"]["admin"]["tools"] == 0, health
    # And no call goes through either.
    opened_public()
    refused = admin.call("admin.wordcount", {})
    assert refused["error"]["data"]["stage"] == "auth", refused


def test_the_admin_key_opens_both(two_checks):
    admin = mcp_as(two_checks, "/mcp/admin", ADMIN)
    tools = names(admin.request("tools/list")["result"]["tools"])
    assert "admin.wordcount" in tools
    assert [r["uri"] for r in admin.request("resources/list")["result"]["resources"]] == ["lite://admin"]
    assert names(admin.request("prompts/list")["result"]["prompts"]) == ["test_prompt_with_arguments"]
    assert admin.call("admin.wordcount", {})["result"]["isError"] is False
    read = admin.call("read_tool", {"path": "admin.wordcount"})["result"]
    assert read["isError"] is False, read
    assert httpx.get(two_checks.url + "/toolsets/admin/tools", headers=ADMIN).json() != []
    health = httpx.get(two_checks.url + "/healthz", headers=ADMIN).json()
    assert health["toolsets"]["admin"]["tools"] == 1, health
    public = mcp_as(two_checks, "/mcp/public", ADMIN)
    assert "public.count" in names(public.request("tools/list")["result"]["tools"])
