"""The user's catalog (issue 63): `requires = ["X"]` on a plugin
(`[plugins.P]`), a tool (`[[tools]]`, by catalog name) or an upstream
(`[upstreams.U]`) names the `[credentials.X]` providers its tools need.
With `[server] hide_unconnected = true`, a caller for whom X resolves to
nothing (no own connection, no team value, no default, in the order of the
provider's `sources`) does not see those tools in any listing: MCP
`tools/list`, `search_tools`, `read_tool`, REST `/tools`, `/openapi.json`,
the explorer, code mode's `tools.d.ts`. Once the caller connects, they
appear (listings are kept 5 s per caller). Calling a hidden tool works as
before. `read_tool` says which provider a tool needs (`authProvider`) and
whether the caller has it (`connected`).

Callers are told apart by the `api-key` auth plugin (and, for teams, by
`jwt` tokens carrying an `org` claim); the guest that needs a provider is
the `http-fetch` test plugin, whose `credential {provider}` tool answers the
token or the error; `echo` needs nothing and is always listed."""

import base64
import json
import os
import re
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import jwt as pyjwt
import pytest

from conftest import REDIS_URL, Mcp, Server, plugin_path, run_hangar, wait_for
from test_explorer import browser  # noqa: F401 (the Chromium fixture)

USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank", "iris"]
ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode()
ENV = {"HANGAR_CREDENTIALS_KEY": ENCRYPTION_KEY}
JWT_SECRET = "an-hs256-secret-of-at-least-32-bytes"
UPSTREAM = Path(__file__).parent / "clients" / "upstream_server.py"
NO_CREDENTIALS = re.compile(r'^credentials: no credentials for "paste": connect it at (\S+)$')
# What the caches of listings may take to forget (5 s per caller), and some.
SETTLE = 8
RUN = uuid.uuid4().hex[:12]

# http-fetch's tools (the plugin requires paste).
FETCH_TOOLS = {"credential", "config", "fetch"}
META_TOOLS = {"search_tools", "read_tool", "call_tool"}


def key(user: str) -> str:
    return f"{user}-key-0123456789abcdef"


def as_user(user: str) -> dict:
    return {"x-api-key": key(user)}


def upstream_command() -> str:
    return f"command = [{json.dumps(sys.executable)}, {json.dumps(str(UPSTREAM))}]\nargs = [\"stdio\"]"


API_KEY_AUTH = f"""
[auth]
plugin = "api-key"

[plugins.api-key]
config = {{ keys = "{', '.join(f'{u}={key(u)}' for u in USERS)}" }}
"""

PROVIDERS = """
[credentials]
encryption_key = "{{ env.HANGAR_CREDENTIALS_KEY }}"

[credentials.paste]
kind = "user-key"

[credentials.notebook]
kind = "user-key"

[credentials.fallback]
kind = "user-key"
default = "server-fallback-value"

[credentials.shared]
kind = "static"
value = "static-shared-value"

[plugins.http-fetch]
grants = { credentials = ["paste", "notebook", "fallback", "shared"] }
requires = ["paste"]
"""


def tools_config(work: Path) -> str:
    return f"""
[connectors.lite]
kind = "sqlite"
path = "{work / 'lite.db'}"

[[tools]]
name = "wordcount"
requires = ["notebook"]

[[tools]]
name = "notes.read"
description = "Reads the caller's notebook"
use = "lite"
statement = "SELECT 'notes' AS what"
requires = ["notebook", "paste"]

[[tools]]
name = "fallback.read"
description = "Needs the fallback provider, which has a server-wide default"
use = "lite"
statement = "SELECT 'fallback' AS what"
requires = ["fallback"]

[[tools]]
name = "shared.read"
description = "Needs the static shared provider"
use = "lite"
statement = "SELECT 'shared' AS what"
requires = ["shared"]

[upstreams.up]
{upstream_command()}
requires = ["paste"]

[toolsets.coder]
tools = ["*"]
catalog = "code"

# tools.d.ts needs no sandbox: none is compiled (a minute of CPU); `run`
# is not called here.
[code]
javascript = "/nonexistent/code-js.wasm"
python = "/nonexistent/code-py.wasm"
"""


# Hidden from a caller with no connection at all (up.*: every upstream tool).
NEEDS_PASTE = FETCH_TOOLS | {"notes.read"}
NEEDS_NOTEBOOK = {"wordcount", "notes.read"}
ALWAYS = {"echo", "fallback.read", "shared.read"}


def make_server(workdir: Path, plugins, body: str, cache: Path, server_keys: str = "") -> Server:
    """A Server on the run's compiled cache (code mode's sandboxes take a
    minute to compile), whose connections are kept in Redis under a prefix
    of its own (the embedded kv file would sit in that shared folder)."""
    s = Server(workdir, plugins, env=ENV)
    prefix = f"hangar-test:{RUN}:{workdir.name}"
    s.kv_prefix = prefix
    s.config_path.write_text(
        f'[server]\ncache_dir = "{cache}"\npublic_url = "{s.url}"\n'
        f'auth_failures = "1000/m"\n{server_keys}{body}'
        f'\n[kv]\nbackend = "redis"\nurl = "{REDIS_URL}"\nprefix = "{prefix}"\n')
    return s


@pytest.fixture(scope="module")
def servers():
    started = []
    yield started
    from test_kv import redis_command, redis_keys
    for s in started:
        s.stop()
        for k in redis_keys(f"{s.kv_prefix}*"):
            redis_command("DEL", k)


PLUGINS = ("echo", "http-fetch", "api-key", "wordcount")


@pytest.fixture(scope="module")
def hub(tmp_path_factory, shared_cache, servers):
    """hide_unconnected, catalog "both", a code-mode toolset; alice has
    connected paste (and sees the upstream's tools once it is up)."""
    work = tmp_path_factory.mktemp("hiding")
    s = make_server(work, PLUGINS, API_KEY_AUTH + PROVIDERS + tools_config(work), shared_cache,
                    'hide_unconnected = true\ncatalog = "both"\n')
    servers.append(s.start())
    connect(s, "alice", "paste")
    wait_for(lambda: "up.add" in rest_tools(s, as_user("alice")), 30, "the upstream's tools (alice)")
    return s


@pytest.fixture(scope="module")
def open_server(tmp_path_factory, shared_cache, servers):
    """The same without hide_unconnected (the default: nothing hidden)."""
    work = tmp_path_factory.mktemp("not-hiding")
    s = make_server(work, PLUGINS, API_KEY_AUTH + PROVIDERS + tools_config(work), shared_cache,
                    'catalog = "both"\n')
    servers.append(s.start())
    wait_for(lambda: "up.add" in rest_tools(s, as_user("bob")), 30, "the upstream's tools")
    return s


# --------------------------------------------------------------- what callers see

def connect(server: Server, user: str, provider: str, headers: dict | None = None):
    r = httpx.post(f"{server.url}/connect/{provider}", json={"key": f"{user}-{provider}-key"},
                   headers=headers or as_user(user))
    assert r.status_code == 200 and r.json() == {"connected": True}, r.text


def disconnect(server: Server, user: str, provider: str, headers: dict | None = None):
    r = httpx.delete(f"{server.url}/connect/{provider}", headers=headers or as_user(user))
    assert r.status_code == 200 and r.json() == {"connected": False}, r.text


def mcp(server: Server, headers: dict, path: str = "/mcp") -> Mcp:
    c = Mcp(server.url, path=path)
    c.http.headers.update(headers)
    return c


def mcp_tools(server: Server, headers: dict) -> set[str]:
    c, names, cursor = mcp(server, headers), [], None
    while True:
        r = c.request("tools/list", {"cursor": cursor} if cursor else {})
        assert "result" in r, r
        names += [t["name"] for t in r["result"]["tools"]]
        cursor = r["result"].get("nextCursor")
        if not cursor:
            return set(names)


def rest_tools(server: Server, headers: dict) -> set[str]:
    r = httpx.get(f"{server.url}/tools", headers=headers)
    assert r.status_code == 200, r.text
    return {t["name"] for t in r.json()}


def searched(server: Server, headers: dict, query: str) -> set[str]:
    r = mcp(server, headers).call("search_tools", {"query": query, "limit": 50})
    assert r["result"]["isError"] is False, r
    return {hit["path"] for hit in r["result"]["structuredContent"]["results"]}


def read_tool(server: Server, headers: dict, name: str) -> dict | None:
    """read_tool's description of `name`, or None when it is not found."""
    r = mcp(server, headers).call("read_tool", {"path": name})["result"]
    if r["isError"]:
        assert r["content"][0]["text"] == f"Error: Tool not found: {name}", r
        return None
    return r["structuredContent"]


def openapi_tools(server: Server, headers: dict) -> set[str]:
    r = httpx.get(f"{server.url}/openapi.json", headers=headers)
    assert r.status_code == 200, r.text
    return {p[len("/tools/"):-len("/call")] for p in r.json()["paths"] if p.endswith("/call")}


def tools_d_ts(server: Server, headers: dict) -> str:
    c = mcp(server, headers, "/mcp/coder")
    r = c.request("resources/read", {"uri": "hangar://code/tools.d.ts"})
    assert "result" in r, r
    return r["result"]["contents"][0]["text"]


def declared(ts: str, name: str) -> bool:
    """Whether tools.d.ts declares the (undotted) tool `name`."""
    return re.search(rf"\n\s+{re.escape(name)}\(args", ts) is not None


def surfaces(server: Server, headers: dict) -> dict[str, set[str]]:
    """The tools each surface lists for the caller (code mode: the undotted
    names it declares, and `up` for the upstream's object)."""
    ts = tools_d_ts(server, headers)
    names = {"credential", "config", "fetch", "echo", "wordcount"}
    code = {n for n in names if declared(ts, n)} | ({"up"} if "\n  up: {" in ts else set())
    return {
        "tools/list": mcp_tools(server, headers) - META_TOOLS,
        "GET /tools": rest_tools(server, headers) - META_TOOLS,
        "openapi": openapi_tools(server, headers) - META_TOOLS,
        "tools.d.ts": code,
    }


def upstream(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("up.")}


# ----------------------------------------------------------------------- tests

def test_an_unconnected_caller_sees_no_tool_that_needs_a_provider_anywhere(hub):
    bob = as_user("bob")
    for surface, names in surfaces(hub, bob).items():
        if surface == "tools.d.ts":
            assert names == {"echo"}, (surface, names)
            continue
        assert ALWAYS <= names, (surface, names)
        assert not names & (NEEDS_PASTE | NEEDS_NOTEBOOK), (surface, names)
        assert not upstream(names), (surface, names)
    assert "credential" not in searched(hub, bob, "Answers the token of credential provider")
    assert not upstream(searched(hub, bob, "add two numbers"))
    assert "echo" in searched(hub, bob, "Repeat a text")
    for name in ("credential", "wordcount", "notes.read", "up.add"):
        assert read_tool(hub, bob, name) is None, name
        assert httpx.get(f"{hub.url}/tools/{name}", headers=bob).status_code == 404, name
    assert httpx.get(f"{hub.url}/tools/echo", headers=bob).status_code == 200
    echo = read_tool(hub, bob, "echo")
    assert echo["authProvider"] is None, echo


def test_a_connected_caller_sees_them_on_every_surface(hub):
    """alice connected paste (the hub fixture): http-fetch's tools and the
    upstream's; not those that also need notebook."""
    alice = as_user("alice")
    for surface, names in surfaces(hub, alice).items():
        if surface == "tools.d.ts":
            assert names == FETCH_TOOLS | {"echo", "up"}, (surface, names)
            continue
        assert ALWAYS | FETCH_TOOLS <= names, (surface, names)
        assert "up.add" in names, (surface, names)
        assert not names & NEEDS_NOTEBOOK, (surface, names)
    assert "credential" in searched(hub, alice, "Answers the token of credential provider")
    read = read_tool(hub, alice, "credential")
    assert read["authProvider"] == "paste" and read["connected"] is True, read
    assert read_tool(hub, alice, "up.add")["authProvider"] == "paste"
    assert httpx.get(f"{hub.url}/tools/credential", headers=alice).status_code == 200


def test_connecting_shows_the_tools_and_disconnecting_hides_them_again(hub):
    carol = as_user("carol")
    assert not mcp_tools(hub, carol) & NEEDS_PASTE  # listed (and cached) before connecting
    connect(hub, "carol", "paste")
    wait_for(lambda: FETCH_TOOLS <= mcp_tools(hub, carol), SETTLE, "carol's tools/list to show http-fetch")
    wait_for(lambda: FETCH_TOOLS <= rest_tools(hub, carol), SETTLE, "carol's GET /tools")
    assert not mcp_tools(hub, carol) & NEEDS_NOTEBOOK
    # notes.read needs notebook and paste; wordcount notebook alone.
    connect(hub, "carol", "notebook")
    wait_for(lambda: NEEDS_NOTEBOOK <= mcp_tools(hub, carol), SETTLE, "carol's notebook tools")
    read = read_tool(hub, carol, "notes.read")
    assert read["authProvider"] == "notebook" and read["connected"] is True, read
    assert read_tool(hub, carol, "wordcount")["authProvider"] == "notebook"
    wait_for(lambda: declared(tools_d_ts(hub, carol), "wordcount"), SETTLE, "carol's tools.d.ts")
    # Without paste again: http-fetch's tools and notes.read go, wordcount stays.
    disconnect(hub, "carol", "paste")

    def gone():
        names = mcp_tools(hub, carol)
        return not names & NEEDS_PASTE and not upstream(names)

    wait_for(gone, SETTLE, "carol's paste tools to go")
    assert "wordcount" in mcp_tools(hub, carol)
    wait_for(lambda: not FETCH_TOOLS & openapi_tools(hub, carol), SETTLE, "carol's openapi.json")


def test_a_hidden_tool_can_still_be_called(hub):
    dave = as_user("dave")
    assert "credential" not in mcp_tools(hub, dave)
    r = mcp(hub, dave).call("credential", {"provider": "paste"})
    assert "result" in r and r["result"]["isError"] is True, r
    text = r["result"]["content"][0]["text"]
    m = NO_CREDENTIALS.match(text)
    assert m and m[1].startswith(f"{hub.url}/connect/paste"), text
    r = mcp(hub, dave).call("notes.read", {})
    assert r["result"]["structuredContent"]["rows"] == [{"what": "notes"}], r
    r = mcp(hub, dave).call("up.add", {"a": 2, "b": 3})
    assert "result" in r and r["result"]["isError"] is False, r
    r = httpx.post(f"{hub.url}/tools/credential/call", json={"provider": "paste"}, headers=dave)
    assert r.status_code == 500 and r.json()["isError"] is True, r.text
    assert NO_CREDENTIALS.match(r.json()["content"][0]["text"]), r.text
    # The server-wide and default values still reach the guest.
    r = mcp(hub, dave).call("credential", {"provider": "shared"})
    assert r["result"]["content"][0]["text"] == "static-shared-value", r


def test_two_callers_see_different_lists_at_the_same_time(hub):
    connect(hub, "erin", "paste")
    wait_for(lambda: FETCH_TOOLS <= rest_tools(hub, as_user("erin")), SETTLE, "erin's tools")

    def listing(user):
        return user, mcp_tools(hub, as_user(user)), rest_tools(hub, as_user(user))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(listing, ["erin", "frank"] * 12))
    for user, listed, rest in results:
        for names in (listed, rest):
            if user == "erin":
                assert FETCH_TOOLS <= names, (user, names)
            else:
                assert not names & FETCH_TOOLS, (user, names)
            assert ALWAYS <= names


def test_the_explorer_lists_what_the_headers_may_see(hub, browser):  # noqa: F811
    connect(hub, "gina", "paste")
    wait_for(lambda: "credential" in rest_tools(hub, as_user("gina")), SETTLE, "gina's tools")
    page = browser.new_page()
    try:
        page.goto(hub.url + "/ui")
        page.click("#auth summary")
        page.fill("#headers", f"x-api-key: {key('hank')}")
        page.dispatch_event("#headers", "change")
        page.wait_for_selector('#tools li[data-tool="echo"]')
        assert page.locator('#tools li[data-tool="credential"]').count() == 0
        page.fill("#headers", f"x-api-key: {key('gina')}")
        page.dispatch_event("#headers", "change")
        page.wait_for_selector('#tools li[data-tool="credential"]')
        page.fill("#headers", f"x-api-key: {key('hank')}")
        page.dispatch_event("#headers", "change")
        page.wait_for_selector('#tools li[data-tool="credential"]', state="detached")
        assert page.locator('#tools li[data-tool="echo"]').count() == 1
    finally:
        page.close()


def test_the_explorers_connections_view_connects_and_disconnects(hub, browser):  # noqa: F811
    """The Connections view lists the caller's providers (GET /connect);
    "Connect" gives a link whose ticket stands for the caller, which a tab
    without the page's headers opens to a key form naming the user; once the
    key is posted there, the view shows the provider connected and the
    tools that need it are listed; "Disconnect" undoes it."""
    page = browser.new_page()
    try:
        page.goto(hub.url + "/ui")
        # Anonymous: no Connections view (and /connect is not asked).
        page.wait_for_selector('#tools li[data-tool="echo"]', state="attached")
        assert page.locator("#view-connections").is_hidden()
        page.click("#auth summary")
        page.fill("#headers", f"x-api-key: {key('iris')}")
        page.dispatch_event("#headers", "change")
        page.locator("#view-connections").wait_for(state="visible")
        page.click("#view-connections")
        row = page.locator('#connections li[data-provider="paste"]')
        row.wait_for(state="attached")
        assert row.get_attribute("data-connected") == "false"
        page.click('button[data-connect="paste"]')
        link = page.locator('a[data-link="paste"]')
        link.wait_for(state="attached")
        url = link.get_attribute("href")
        assert "/connect/paste?ticket=" in url, url
        # The tab it opens holds none of the page's headers: the ticket says who.
        tab = browser.new_page()
        try:
            tab.goto(url)
            assert "iris" in tab.content()
            tab.fill('input[name="key"]', "iris-paste-key")
            tab.click('button[type="submit"]')
            tab.wait_for_load_state()
            assert "Connected" in tab.content()
        finally:
            tab.close()
        page.click("#refresh-connections")
        page.locator('#connections li[data-provider="paste"][data-connected="true"]').wait_for(
            state="attached")
        page.click("#view-tools")
        page.wait_for_selector('#tools li[data-tool="credential"]', state="attached")
        r = mcp(hub, as_user("iris")).call("credential", {"provider": "paste"})
        assert r["result"]["content"][0]["text"] == "iris-paste-key", r
        page.click("#view-connections")
        page.click('button[data-disconnect="paste"]')
        page.locator('#connections li[data-provider="paste"][data-connected="false"]').wait_for(
            state="attached")
    finally:
        page.close()


def test_without_hide_unconnected_nothing_is_hidden_and_read_tool_says_connected(open_server):
    s, bob = open_server, as_user("bob")
    everything = ALWAYS | NEEDS_PASTE | NEEDS_NOTEBOOK | {"up.add"}
    assert everything <= mcp_tools(s, bob)
    assert everything <= rest_tools(s, bob)
    assert everything <= openapi_tools(s, bob)
    assert "credential" in searched(s, bob, "Answers the token of credential provider")
    read = read_tool(s, bob, "credential")
    assert read["authProvider"] == "paste" and read["connected"] is False, read
    read = read_tool(s, bob, "notes.read")
    assert read["authProvider"] == "notebook" and read["connected"] is False, read
    assert read_tool(s, bob, "echo")["authProvider"] is None
    assert read_tool(s, bob, "up.add")["authProvider"] == "paste"
    connect(s, "bob", "paste")
    wait_for(lambda: read_tool(s, bob, "credential")["connected"] is True, SETTLE,
             "read_tool to say bob is connected")
    # notes.read also needs notebook.
    assert read_tool(s, bob, "notes.read")["connected"] is False
    assert read_tool(s, as_user("iris"), "credential")["connected"] is False


# ------------------------------------------------------- teams, defaults, sources

TEAMS = f"""
[auth]
plugin = "jwt"
policy = {{ audience = "hangar" }}

[plugins.jwt]
config = {{ hs256_secret = "{JWT_SECRET}" }}

[credentials]
encryption_key = "{{{{ env.HANGAR_CREDENTIALS_KEY }}}}"

[credentials.teamkey]
kind = "user-key"
team_claim = "org"
teams = {{ acme = "acme-team-key" }}

[credentials.fallback]
kind = "user-key"
default = "server-fallback-value"

[credentials.strict]
kind = "user-key"
default = "a-default-its-sources-skip"
sources = ["user"]

[credentials.teamonly]
kind = "user-key"
team_claim = "org"
teams = {{ acme = "acme-teamonly-key" }}
sources = ["user", "default"]

[plugins.http-fetch]
grants = {{ credentials = ["teamkey", "fallback", "strict", "teamonly"] }}
requires = ["teamkey"]

[connectors.lite]
kind = "sqlite"
path = "LITEDB"

[[tools]]
name = "fallback.read"
description = "Needs fallback (a default)"
use = "lite"
statement = "SELECT 'fallback' AS what"
requires = ["fallback"]

[[tools]]
name = "strict.read"
description = "Needs strict (a default its sources skip)"
use = "lite"
statement = "SELECT 'strict' AS what"
requires = ["strict"]

[[tools]]
name = "teamonly.read"
description = "Needs teamonly (team values its sources skip)"
use = "lite"
statement = "SELECT 'teamonly' AS what"
requires = ["teamonly"]
"""


def jwt_user(sub: str, **claims) -> dict:
    token = pyjwt.encode({"sub": sub, "aud": "hangar", "exp": int(time.time()) + 600, **claims},
                         JWT_SECRET, "HS256")
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def teams(tmp_path_factory, shared_cache, servers):
    work = tmp_path_factory.mktemp("hiding-teams")
    s = make_server(work, ("echo", "http-fetch", "jwt"), TEAMS.replace("LITEDB", str(work / "lite.db")),
                    shared_cache, "hide_unconnected = true\n")
    servers.append(s.start())
    return s


def test_team_values_defaults_and_sources_decide_what_is_listed(teams):
    acme, globex, teamless = jwt_user("dave", org="acme"), jwt_user("erin", org="globex"), jwt_user("frank")
    seen = {who: rest_tools(teams, h) for who, h in
            (("acme", acme), ("globex", globex), ("teamless", teamless))}
    # teamkey: acme's team value; nobody else's.
    assert FETCH_TOOLS <= seen["acme"], seen["acme"]
    assert not seen["globex"] & FETCH_TOOLS and not seen["teamless"] & FETCH_TOOLS, seen
    assert FETCH_TOOLS <= mcp_tools(teams, acme) and not mcp_tools(teams, globex) & FETCH_TOOLS
    assert mcp(teams, acme).call("credential", {"provider": "teamkey"})["result"]["content"][0]["text"] \
        == "acme-team-key"
    for who, names in seen.items():
        # fallback: its default, for everyone.
        assert {"echo", "fallback.read"} <= names, (who, names)
        # strict: sources = ["user"], so its default does not count.
        assert "strict.read" not in names, (who, names)
        # teamonly: sources skip "team", and it has no default.
        assert "teamonly.read" not in names, (who, names)
    # A connection of one's own counts under every sources list.
    connect(teams, "erin", "strict", headers=globex)
    connect(teams, "erin", "teamkey", headers=globex)
    wait_for(lambda: {"strict.read"} | FETCH_TOOLS <= rest_tools(teams, globex), SETTLE,
             "erin's own connections to show her tools")
    assert "strict.read" not in rest_tools(teams, teamless)


# ------------------------------------------------------------------ hangar check

def test_check_refuses_requires_naming_no_provider(tmp_path, shared_cache):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "http-fetch.wasm").write_bytes(plugin_path("http-fetch").read_bytes())
    head = (f'[server]\ncache_dir = "{shared_cache}"\npublic_url = "http://127.0.0.1:1"\n'
            + PROVIDERS.replace('requires = ["paste"]', "REQUIRES_PLUGIN"))
    tool = f"""
[connectors.lite]
kind = "sqlite"
path = "{tmp_path / 'lite.db'}"

[[tools]]
name = "notes.read"
use = "lite"
statement = "SELECT 1 AS one"
REQUIRES_TOOL

[upstreams.up]
{upstream_command()}
REQUIRES_UPSTREAM
"""
    good = {"REQUIRES_PLUGIN": 'requires = ["paste"]', "REQUIRES_TOOL": 'requires = ["notebook"]',
            "REQUIRES_UPSTREAM": 'requires = ["shared"]'}

    def check(name, **bad):
        text = head + tool
        for placeholder, value in {**good, **bad}.items():
            text = text.replace(placeholder, value)
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        return run_hangar("check", "--config", str(path), "--plugins", str(plugins), env=ENV)

    ok = check("good")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for where in good:
        provider = f"no-such-provider-{where.split('_')[1].lower()}"
        out = check(where, **{where: f'requires = ["{provider}"]'})
        assert out.returncode != 0, (where, out.stdout + out.stderr)
        assert provider in out.stdout + out.stderr, (where, out.stdout + out.stderr)
