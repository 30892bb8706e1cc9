"""REST preconditions, the OpenAPI document, and the explorer page at /ui
driven in headless Chromium (Debian's, through Playwright)."""

import base64
import json
import shutil
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, Server, plugin_path
from test_upstreams import Upstream

SCREENSHOTS = ROOT / "target" / "ui-screenshots"

CONFIG = """
[plugins.api-key]
config = { keys = "tester=right-key" }
[plugins.secure]
prefix = "secure."
[[tools]]
name = "secure.echo"
auth = { plugin = "api-key" }
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, shared_cache):
    s = Server(tmp_path_factory.mktemp("ui"), ["echo", "everything", "misbehave", "api-key"], CONFIG, shared_cache)
    shutil.copy(plugin_path("echo"), s.plugins_dir / "secure.wasm")
    s.start()
    yield s
    s.stop()


def test_execution_disabled_is_403_before_anything_else(start_server):
    s = start_server(plugins=("echo",), config="allow_execute = false\n")
    for name in ("echo", "no-such-tool"):
        r = httpx.post(f"{s.url}/tools/{name}/call", json={"text": "x"})
        assert r.status_code == 403 and r.json() == {"error": "Tool execution is disabled."}
    assert httpx.get(s.url + "/tools").status_code == 200
    settings = page_config(httpx.get(s.url + "/ui").text)
    assert {k: settings[k] for k in ("allowExecute", "connections", "toolset", "base")} == {
        "allowExecute": False, "connections": False, "toolset": None, "base": ""}


def page_config(page: str) -> dict:
    """The settings the server wrote into the explorer page."""
    import re

    return json.loads(re.search(r"/\*HANGAR_CONFIG\*/(.*?)/\*END\*/", page).group(1))


def test_ui_can_be_turned_off(start_server):
    s = start_server(plugins=("echo",), config="ui = false\n")
    assert httpx.get(s.url + "/ui").status_code == 404


def test_no_trace_id_means_no_meta_key(start_server):
    s = start_server(plugins=("echo",), config="trace_ids = false\n")
    body = httpx.post(s.url + "/tools/echo/call", json={"text": "x"}).json()
    assert "_meta" not in body and body["content"][0]["text"] == "x"


def test_openapi_document_validates(server):
    from openapi_spec_validator import validate

    doc = httpx.get(server.url + "/openapi.json").json()
    validate(doc)
    call = doc["paths"]["/tools/echo/call"]["post"]
    assert call["requestBody"]["content"]["application/json"]["schema"]["required"] == ["text"]
    assert set(call["responses"]) == {"200", "401", "403", "404", "500"}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "scripts/test installs Debian's chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


def test_explorer_page_lists_fills_calls_and_renders(server, browser):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    page.goto(server.url + "/ui")
    page.wait_for_selector('#tools li[data-tool="echo"]')

    # The search box filters.
    page.fill("#search", "png")
    assert page.locator("#tools li[data-tool]").count() == 1
    page.fill("#search", "")

    # echo: a form from its schema, called, the text shown with a trace id.
    page.click('#tools li[data-tool="echo"]')
    page.fill("#f-text", "hello from the browser")
    page.fill("#f-times", "2")
    page.click("#call")
    page.wait_for_selector("#outcome")
    assert page.locator("#outcome .text").inner_text() == "hello from the browser hello from the browser"
    assert "trace id" in page.locator("#outcome .trace").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "echo.png"), full_page=True)

    # An image result is rendered as an <img>.
    page.click('#tools li[data-tool="test_image_content"]')
    page.click("#call")
    page.wait_for_selector("#outcome img")
    assert page.locator("#outcome img").get_attribute("src").startswith("data:image/png;base64,")

    # A tool error is marked.
    page.click('#tools li[data-tool="test_error_handling"]')
    page.click("#call")
    page.wait_for_selector("#outcome.error")

    # A wrong API key gets the 401, a right one goes through.
    page.click("#auth summary")
    page.fill("#headers", "x-api-key: wrong-key")
    page.click('#tools li[data-tool="secure.echo"]')
    page.fill("#f-text", "secret")
    page.click("#call")
    page.wait_for_selector("#outcome.error")
    assert "HTTP 401" in page.locator("#outcome .status").inner_text()
    assert "Unauthorized" in page.locator("#outcome").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "unauthorized.png"), full_page=True)
    page.fill("#headers", "x-api-key: right-key")
    page.click("#call")
    page.wait_for_selector("#outcome:not(.error)")
    assert page.locator("#outcome .text").inner_text() == "secret"
    page.close()


def test_explorer_reads_resources_and_renders_prompts(server, browser):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    png = httpx.get(server.url + "/resources/read", params={"uri": "test://static-binary"}).json()["contents"][0]
    page = browser.new_page()
    page.goto(server.url + "/ui")
    page.wait_for_selector('#tools li[data-tool="echo"]')

    # Resources: a text one is shown as text, an image blob as an <img> with its size.
    page.click("#view-resources")
    page.wait_for_selector('#resources li[data-resource="test://static-text"]')
    assert page.locator("#tools").is_hidden()
    page.click('#resources li[data-resource="test://static-text"]')
    page.click("#read")
    page.wait_for_selector("#outcome .text")
    assert page.locator("#outcome .text").inner_text() == "This is the content of the static text resource."
    page.click('#resources li[data-resource="test://static-binary"]')
    page.click("#read")
    page.wait_for_selector("#outcome img")
    assert page.locator("#outcome img").get_attribute("src") == "data:image/png;base64," + png["blob"]
    assert f"{len(base64.b64decode(png['blob']))} bytes" in page.locator("#outcome .bytes").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "resource-image.png"), full_page=True)

    # A template asks for its variables, then reads the URI they make.
    page.click('#resources li[data-template="test://template/{id}/data"]')
    page.fill("#v-id", "7")
    page.click("#read")
    page.wait_for_selector("#outcome .text")
    assert json.loads(page.locator("#outcome .text").inner_text()) == {
        "id": "7", "templateTest": True, "data": "Data for ID: 7"}
    assert "test://template/7/data" in page.locator("#outcome").inner_text()

    # The search box filters resources too.
    page.fill("#search", "binary")
    assert page.locator("#resources li:is([data-resource], [data-template])").count() == 1
    page.fill("#search", "")

    # Prompts: arguments filled in, messages rendered as text (markup stays text).
    page.click("#view-prompts")
    page.click('#prompts li[data-prompt="test_prompt_with_arguments"]')
    page.fill("#a-arg1", "<b>one</b>")
    page.fill("#a-arg2", "two")
    page.click("#get")
    page.wait_for_selector("#outcome .message")
    assert page.locator("#outcome .message .role").inner_text().lower() == "user"
    assert page.locator("#outcome .message .text").inner_text() == "Prompt with arguments: arg1='<b>one</b>', arg2='two'"
    assert page.locator("#outcome b").count() == 0
    page.screenshot(path=str(SCREENSHOTS / "prompt.png"), full_page=True)

    # A missing required argument gets the 400 and its reason.
    page.fill("#a-arg2", "")
    page.click("#get")
    page.wait_for_selector("#outcome.error")
    assert "HTTP 400" in page.locator("#outcome .status").inner_text()
    assert 'missing required argument "arg2"' in page.locator("#outcome").inner_text()

    # An image in a prompt message is an <img>.
    page.click('#prompts li[data-prompt="test_prompt_with_image"]')
    page.click("#get")
    page.wait_for_selector("#outcome .message img")
    assert page.locator("#outcome .message").count() == 2
    page.close()


def test_the_explorer_runs_only_its_own_script(server, browser):
    """The CSP names a fresh nonce for the page's one script and allows no
    inline script: the page works in Chromium, and a script added to it
    without the nonce does not run."""
    a, b = httpx.get(server.url + "/ui"), httpx.get(server.url + "/ui")
    directives = {}
    for d in a.headers["content-security-policy"].split(";"):
        name, _, value = d.strip().partition(" ")
        directives[name] = value
    script_src = directives["script-src"]
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    assert script_src.startswith("'nonce-")
    nonce = script_src.removeprefix("'nonce-").removesuffix("'")
    assert f'<script nonce="{nonce}">' in a.text
    assert nonce not in b.text and nonce not in b.headers["content-security-policy"]

    page = browser.new_page()
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(server.url + "/ui")
    page.wait_for_selector('#tools li[data-tool="echo"]')
    assert blocked == []
    page.click('#tools li[data-tool="echo"]')
    page.fill("#f-text", "nonce")
    page.click("#call")
    page.wait_for_selector("#outcome")
    assert page.locator("#outcome .text").inner_text() == "nonce"
    # Styles still apply (inline styles are allowed).
    assert page.eval_on_selector("body", "b => getComputedStyle(b).display") == "grid"
    # An inline script injected into the page is refused by the policy.
    page.evaluate("""() => { const s = document.createElement("script");
        s.textContent = "window.injected = true"; document.body.append(s); }""")
    assert page.evaluate("() => window.injected === undefined")
    page.close()


def test_the_explorer_links_only_http_urls(start_server, browser):
    """A tool's resource_link is a link only when its URI is http(s): a
    javascript: or data: URI is shown as text, and clicking it runs nothing."""
    u = Upstream().start()
    try:
        s = start_server(plugins=[], config=f'''
[upstreams.up]
url = "{u.url}"
prefix = "up."
tools = ["links"]
''')
        page = browser.new_page()
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(s.url + "/ui")
        page.wait_for_selector('#tools li[data-tool="up.links"]')
        page.click('#tools li[data-tool="up.links"]')
        page.click("#call")
        page.wait_for_selector("#outcome:not(.error)")
        hrefs = page.eval_on_selector_all("#outcome a", "as => as.map(a => a.getAttribute('href'))")
        assert hrefs == ["https://example.com/docs"], hrefs
        assert page.eval_on_selector_all("a[href^='javascript:' i], a[href^='data:' i]", "as => as.length") == 0
        text = page.locator("#outcome").inner_text()
        assert "click me" in text and "javascript:alert(document.domain)" in text
        assert "a page" in text
        page.get_by_text("click me").click()
        page.wait_for_timeout(300)
        assert dialogs == []
        page.close()
    finally:
        u.stop()


def call_again(page):
    """Clicks Call with the last outcome removed first: the page replaces it
    only when the new answer comes, so a wait for `#outcome` right after a
    second click could read the first call's."""
    page.evaluate("document.querySelector('#outcome')?.remove()")
    page.click("#call")


def test_the_explorer_builds_forms_from_a_plain_components_derived_schemas(start_server, browser):
    """A plain component's schemas have unions: an `option` is a form field
    of its one real type, left out when empty; a variant is a JSON field."""
    s = start_server(plugins=("typed-kitchen",))
    page = browser.new_page()
    page.goto(s.url + "/ui")
    page.wait_for_selector('#tools li[data-tool="typed-kitchen.describe"]')

    # describe(name: string, age: option<u32>): age is a number field.
    page.click('#tools li[data-tool="typed-kitchen.describe"]')
    assert page.locator("#f-age").get_attribute("type") == "number"
    page.fill("#f-name", "Ada")
    call_again(page)
    page.wait_for_selector("#outcome:not(.error)")
    without_age = page.locator("#outcome .text").inner_text()
    page.fill("#f-age", "36")
    call_again(page)
    page.wait_for_selector("#outcome:not(.error)")
    with_age = page.locator("#outcome .text").inner_text()
    assert "Ada" in without_age and "36" not in without_age, without_age
    assert "Ada" in with_age and "36" in with_age, with_age

    # echo-shape(v: variant): a JSON field, sent as typed.
    page.click('#tools li[data-tool="typed-kitchen.types.echo-shape"]')
    page.wait_for_selector("textarea#f-v")
    page.fill("#f-v", '{"tag": "square", "val": 4}')
    call_again(page)
    page.wait_for_selector("#outcome:not(.error)")
    assert json.loads(page.locator("#outcome .text").inner_text()) == {"tag": "square", "val": 4}
    page.close()


def test_a_toolsets_explorer_shows_and_calls_only_its_tools(start_server, browser):
    """`/toolsets/NAME/ui` (issue 65, item 9): the page fetches the catalog
    from `/toolsets/NAME/…`, so it lists and calls the toolset's tools only;
    `/ui` still shows everything."""
    config = """
[toolsets.ops]
tools = ["echo", "test_*"]
resources = []
prompts = []
"""
    s = start_server(plugins=("echo", "everything"), config=config)
    assert page_config(httpx.get(s.url + "/toolsets/ops/ui").text)["base"] == "/toolsets/ops"
    page = browser.new_page()
    try:
        page.goto(s.url + "/toolsets/ops/ui")
        page.wait_for_selector('#tools li[data-tool="echo"]')
        shown = set(page.locator("#tools li[data-tool]").evaluate_all("els => els.map(e => e.dataset.tool)"))
        listed = {t["name"] for t in httpx.get(s.url + "/toolsets/ops/tools").json()}
        everything = {t["name"] for t in httpx.get(s.url + "/tools").json()}
        assert shown == listed and "echo" in shown, shown
        assert everything - shown, "the whole catalog has tools the toolset leaves out"
        assert page.locator("h1").inner_text() == "Hangar · ops"
        page.click('#tools li[data-tool="echo"]')
        page.fill("#f-text", "through the toolset")
        page.click("#call")
        page.wait_for_selector("#outcome")
        assert page.locator("#outcome .text").inner_text() == "through the toolset"
        # The whole catalog's explorer lists what the toolset leaves out.
        page.goto(s.url + "/ui")
        page.wait_for_selector('#tools li[data-tool="echo"]')
        whole = set(page.locator("#tools li[data-tool]").evaluate_all("els => els.map(e => e.dataset.tool)"))
        assert whole == everything, whole
    finally:
        page.close()


def test_the_shipped_config_opens_on_a_landing_view_with_tools_grouped_by_source(tmp_path, shared_cache, browser):
    """Issue 68: a newcomer's first view of `scripts/run`. The explorer of the
    shipped config greets with what the server is, how to connect, and calls
    to try; its lists are grouped by where each entry comes from; and no
    conformance fixture is in the shipped catalog."""
    text = (ROOT / "hangar.toml").read_text().replace('cache_dir = ".cache/hangar"', f'cache_dir = "{shared_cache}"')
    (tmp_path / "hangar.toml").write_text(text)
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("demo.db*"))
    shipped = sorted(p.stem for p in (ROOT / "plugins").glob("*.wasm"))
    s = Server(tmp_path, shipped, config_file=tmp_path / "hangar.toml").start()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        listed = httpx.get(s.url + "/tools").json()
        assert not [t["name"] for t in listed if t["name"].startswith("test_")]
        sources = {t["name"]: t["source"] for t in listed}
        assert sources["echo"] == {"kind": "component", "name": "echo", "language": "rust"}
        assert sources["py.greet"] == {"kind": "component", "name": "py-greet", "language": "python"}
        assert sources["js.reverse"] == {"kind": "component", "name": "js-reverse", "language": "javascript"}
        assert sources["units.to-celsius"] == {"kind": "plain", "name": "units", "language": "rust"}
        assert sources["demo.products.search"] == {"kind": "sql", "name": "demo"}
        # One of each kind the shipped catalog keeps: an MCP App, a prompt, a resource.
        assert any((t.get("_meta") or {}).get("ui") for t in listed)
        assert httpx.get(s.url + "/prompts").json()["prompts"]
        resources = httpx.get(s.url + "/resources").json()
        assert resources["resources"] and resources["resourceTemplates"]

        page.goto(s.url + "/ui")
        page.wait_for_selector("#landing")
        landing = page.locator("#landing").inner_text()
        assert "Hangar " in landing and "commit" in landing
        assert "2025-11-25" in landing and "2026-07-28" in landing
        assert s.url + "/mcp" in landing, landing
        assert '"type": "http"' in landing and "mcp-remote" in landing
        tries = page.locator("#landing [data-try]").evaluate_all("els => els.map(e => e.dataset.try)")
        # Read-only calls of three kinds, none that needs a grant first.
        assert tries == ["echo", "demo.products.search", "units.to-celsius"], tries

        groups = page.locator("#tools li.group").evaluate_all("els => els.map(e => e.dataset.group)")
        assert "echo · Rust component" in groups, groups
        assert "demo · SQL" in groups, groups
        assert "units · plain WIT component (Rust)" in groups, groups
        assert any(g.endswith("· Python component") for g in groups), groups
        assert any(g.endswith("· JavaScript component") for g in groups), groups
        # Every group says how many it holds, and they add up to the list.
        counts = page.locator("#tools li.group .count").evaluate_all("els => els.map(e => +e.textContent)")
        assert sum(counts) == len(listed) == page.locator("#tools li[data-tool]").count()
        page.screenshot(path=str(SCREENSHOTS / "first-look.png"))

        # The search filters across groups; a group can be folded.
        page.fill("#search", "product")
        assert page.locator("#tools li.group").evaluate_all("els => els.map(e => e.dataset.group)") == ["demo · SQL"]
        page.fill("#search", "")
        page.click('#tools li.group[data-group="demo · SQL"] summary')
        assert not page.locator('#tools li[data-tool="demo.products.get"]').is_visible()

        # A suggested call opens its tool, which says where it comes from.
        page.click(f'#landing [data-try="{tries[0]}"]')
        page.wait_for_selector("#tool-source")
        assert page.locator("#tool-source").inner_text().startswith("From ")
        page.click('#tools li[data-tool="echo"]')
        page.wait_for_selector('#tool-source:has-text("echo · Rust component")')
        assert "runs under deadline" in page.locator("#tool-source").inner_text()
        assert "imports none of the host's capabilities" in page.locator("#tool-grants").inner_text()
        # A tool's page names what its plugin imports of the host and is granted.
        weather = httpx.get(s.url + "/tools/weather.forecast").json()
        assert weather["source"] == {"kind": "component", "name": "weather", "language": "rust"}
        assert any(g.startswith("imports wasi:http/outgoing-handler") and "grants http: none" in g
                   for g in weather["grants"]), weather["grants"]
        assert weather["limits"]["deadline_ms"] > 0
        page.click('#tools li[data-tool="weather.forecast"]')
        page.wait_for_selector('#tool-grants:has-text("wasi:http/outgoing-handler")')
    finally:
        page.close()
        s.stop()
