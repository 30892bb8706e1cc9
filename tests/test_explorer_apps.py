"""The explorer at /ui as an MCP Apps host (SEP-1865), driven in headless
Chromium (Debian's, through Playwright): the example plugin sales-chart's
view runs in a sandboxed frame under its own CSP, gets the call's input and
result, calls a second tool through the page, and is torn down before its
frame goes. What a view would try on its own (another plugin's tool or
resource, a hidden tool, a script from elsewhere, a resize) is done by
evaluating script inside the view's frame."""

import httpx
import pytest

from conftest import ROOT, Server, wait_for
from test_explorer import browser  # noqa: F401 (the fixture: Debian's Chromium)

SCREENSHOTS = ROOT / "target" / "ui-screenshots"

USER_KEY = "user-key-0123456789abcdef"
ADMIN_KEY = "admin-key-0123456789abcdef"

# echo is hidden from everyone but admin; the sales tools are anyone's.
# everything is another plugin, with resources and one tool (a short list).
CONFIG = f"""
[plugins.api-key]
config = {{ keys = "admin={ADMIN_KEY}, user={USER_KEY}" }}

[plugins.everything]
tools = ["test_simple_text"]

[auth]
plugin = "api-key"

[[tools]]
name = "echo"
visible_to = {{ sub = ["admin"] }}
"""

VIEW = "ui://sales-chart/view"
FRAME = "iframe.app-frame"


@pytest.fixture(scope="module")
def server(tmp_path_factory, shared_cache):
    s = Server(tmp_path_factory.mktemp("ui-apps"), ["sales-chart", "echo", "everything", "api-key"], CONFIG, shared_cache)
    s.start()
    yield s
    s.stop()


def explorer(server, browser, key=USER_KEY):
    """The explorer with `key` in its headers and the tools it lists loaded."""
    page = browser.new_page(viewport={"width": 1100, "height": 760})
    page.goto(server.url + "/ui")
    page.click("#auth summary")
    page.fill("#headers", f"x-api-key: {key}")
    page.dispatch_event("#headers", "change")
    # The lists as this key sees them: the load the change began has ended.
    page.wait_for_selector('#tools[aria-busy="false"] li[data-tool="sales.chart"]')
    return page


def call_chart(page, region="north", pick=True):
    """Calls sales.chart from its form (picked first unless `pick` is false);
    answers the view's frame once the view drew the result."""
    if pick:
        page.click('#tools li[data-tool="sales.chart"]')
    page.select_option("#f-region", f'"{region}"')
    page.click("#call")
    page.wait_for_selector("#outcome:not(.error)")
    frame = page.wait_for_selector(FRAME).content_frame()
    frame.wait_for_function("() => document.getElementById('forecast') && !document.getElementById('forecast').disabled")
    return frame


# Sends a JSON-RPC request from inside the view to its host and answers the
# reply (the way a view's own script does).
ASK_HOST = """([id, method, params]) => new Promise((resolve) => {
    window.addEventListener("message", function answer(ev) {
        if (ev.source !== window.parent || !ev.data || ev.data.id !== id) return;
        window.removeEventListener("message", answer);
        resolve(ev.data);
    });
    window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
})"""


def test_a_list_answer_that_comes_mid_click_does_not_lose_the_click(server, browser):
    """The lists are fetched again whenever the headers change. An answer
    that comes between the button going down on an entry and coming up must
    leave that entry in place: replaced under the pointer, the click would go
    to the list and pick nothing (the page once lost a click so)."""
    page = explorer(server, browser)
    box = page.locator('#tools li[data-tool="sales.chart"] .name').bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    # The change marks the lists busy at once (in the event's handler);
    # they are done once the answers are in.
    page.dispatch_event("#headers", "change")
    page.wait_for_selector('#tools[aria-busy="false"]')
    page.mouse.up()
    page.wait_for_selector("#f-region")
    assert page.locator("#detail h2").inner_text().startswith("Sales chart")
    page.close()


def test_a_tool_with_an_app_is_marked_and_its_view_runs_sandboxed(server, browser):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = explorer(server, browser)
    # The list and the tool's page say it has an app; the app-only tool is marked.
    assert page.locator('#tools li[data-tool="sales.chart"] .badge.app').count() == 1
    assert page.locator('#tools li[data-tool="sales.forecast"]').inner_text().count("app only") == 1
    frame = call_chart(page, "north")
    assert page.locator("#app-note code").inner_text() == VIEW

    # A sandbox that leaves the view an opaque origin: scripts only.
    iframe = page.locator(FRAME)
    assert iframe.get_attribute("sandbox") == "allow-scripts"
    assert frame.evaluate("() => { try { return String(window.parent.document.title); }"
                          " catch (e) { return e.name; } }") == "SecurityError"
    assert frame.evaluate("() => window.origin") == "null"

    # The view got the arguments and the result, and drew them.
    assert frame.evaluate("() => state.region") == "north"
    assert frame.locator("#title").inner_text() == "Units sold per month — north"
    assert frame.locator("rect.bar").count() == 12
    result = httpx.post(server.url + "/tools/sales.chart/call", json={"region": "north"},
                        headers={"x-api-key": USER_KEY}).json()
    assert frame.locator("#status").inner_text() == f"12 months, {result['structuredContent']['total']} units"
    log = page.locator("#app-messages").text_content()
    for line in ("← ui/initialize #1", "→ result for ui/initialize #1", "← ui/notifications/initialized",
                 "→ ui/notifications/tool-input", "→ ui/notifications/tool-result"):
        assert line in log, log

    # Its button calls sales.forecast through the page (REST, the page's key).
    frame.click("#forecast")
    frame.wait_for_selector("#status:has-text('Forecast: ')")
    forecast = httpx.post(server.url + "/tools/sales.forecast/call", json={"region": "north", "months": 3},
                          headers={"x-api-key": USER_KEY}).json()
    expected = ", ".join(f"{m['month']} {m['units']}" for m in forecast["structuredContent"]["forecast"])
    assert frame.locator("#status").inner_text() == "Forecast: " + expected
    assert frame.locator("rect.forecast").count() == 3
    assert "← tools/call #2" in page.locator("#app-messages").text_content()
    page.screenshot(path=str(SCREENSHOTS / "explorer-app.png"))
    page.close()


def access_lines(server, tool):
    return [line for line in server.log_text().splitlines()
            if "hangar::access" in line and f'tool="{tool}"' in line]


def test_a_view_calls_and_reads_only_its_own_plugins_tools_and_resources(server, browser):
    """A view's requests would run with the page's credentials: sales-chart's view asks,
    in the page of a user who may call echo and read everything's resources, for echo
    (another plugin's tool), for everything's tool, resource and templated resource.
    Each is refused in the page, as an error the view gets, and never reaches the
    server: no request leaves the page and no access line is written. Its own plugin's
    tools and resources it still gets."""
    page = explorer(server, browser, ADMIN_KEY)
    sent = []
    page.on("request", lambda r: sent.append(r.url))
    frame = call_chart(page)
    ask = lambda id, method, params: frame.evaluate(ASK_HOST, [id, method, params])

    refused = {}
    for name in ("echo", "test_simple_text", "no-such-tool"):
        answer = ask("call-" + name, "tools/call", {"name": name, "arguments": {"text": "x"}})
        assert "result" not in answer, answer
        refused[name] = answer["error"]
    # One answer for another plugin's tool and for no tool at all: a view
    # learns nothing of what else the server has.
    for name, error in refused.items():
        assert error == {"code": -32601, "message": refused["no-such-tool"]["message"].replace("no-such-tool", name)}
    assert "echo" in refused["echo"]["message"] and "plugin sales-chart" in refused["echo"]["message"]
    for uri in ("test://static-text", "test://template/7/data"):
        answer = ask("read-" + uri, "resources/read", {"uri": uri})
        assert "result" not in answer, answer
        assert answer["error"]["code"] == -32002 and uri in answer["error"]["message"], answer

    # Its own plugin's: a tool (the marker: its access line comes after any the
    # refused calls could have left) and its view.
    forecast = ask("own-1", "tools/call", {"name": "sales.forecast", "arguments": {"region": "west"}})
    assert forecast["result"]["structuredContent"]["forecast"], forecast
    read = ask("own-2", "resources/read", {"uri": VIEW})
    assert read["result"]["contents"][0]["uri"] == VIEW
    wait_for(lambda: access_lines(server, "sales.forecast"), 10, "the view's own call's access line")

    assert not [u for u in sent if "/tools/echo/" in u or "test_simple_text" in u or "no-such-tool" in u
                or "/resources/read" in u and "test%3A" in u], sent
    assert access_lines(server, "echo") == [] and access_lines(server, "test_simple_text") == []
    log = page.locator("#app-messages").text_content()
    assert "→ error for tools/call" in log and "→ error for resources/read" in log
    page.close()

    # What the view was refused, its user may do.
    admin = {"x-api-key": ADMIN_KEY}
    assert httpx.post(server.url + "/tools/echo/call", json={"text": "hi"}, headers=admin).status_code == 200
    r = httpx.get(server.url + "/resources/read", params={"uri": "test://static-text"}, headers=admin)
    assert r.status_code == 200, r.text


def test_a_view_is_refused_a_hidden_tool_as_any_other(server, browser):
    """echo is hidden from the user: REST says it is not found; the view is
    refused it as it is refused any tool not of its plugin."""
    page = explorer(server, browser, USER_KEY)
    frame = call_chart(page)
    rest = httpx.post(server.url + "/tools/echo/call", json={"text": "x"}, headers={"x-api-key": USER_KEY})
    assert rest.status_code == 404
    answer = frame.evaluate(ASK_HOST, ["hidden-1", "tools/call", {"name": "echo", "arguments": {"text": "x"}}])
    other = frame.evaluate(ASK_HOST, ["hidden-2", "tools/call", {"name": "nothing", "arguments": {}}])
    assert "result" not in answer
    assert answer["error"] == {"code": -32601, "message": other["error"]["message"].replace("nothing", "echo")}
    page.close()


def test_a_prefixed_plugins_view_calls_its_tools_by_either_name(tmp_path_factory, shared_cache, browser):
    """With `prefix = "shop."` the catalog lists shop.sales.chart: the view's own button
    calls shop.sales.forecast (Hangar's name, from its hostContext), and the plugin's own
    name sales.forecast reaches the same tool; echo stays out of reach."""
    config = '[plugins.sales-chart]\nprefix = "shop."\n'
    s = Server(tmp_path_factory.mktemp("ui-prefix"), ["sales-chart", "echo"], config, shared_cache)
    s.start()
    try:
        listed = {t["name"]: t for t in httpx.get(s.url + "/tools").json()}
        assert listed["shop.sales.forecast"]["plugin"] == {"name": "sales-chart", "tool": "sales.forecast"}
        assert listed["echo"]["plugin"] == {"name": "echo", "tool": "echo"}
        resources = httpx.get(s.url + "/resources").json()["resources"]
        assert [r["plugin"] for r in resources if r["uri"] == VIEW] == [{"name": "sales-chart"}]
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(s.url + "/ui")
        page.click('#tools li[data-tool="shop.sales.chart"]')
        page.click("#call")
        page.wait_for_selector("#outcome:not(.error)")
        frame = page.wait_for_selector(FRAME).content_frame()
        frame.wait_for_function("() => document.getElementById('forecast') && !document.getElementById('forecast').disabled")
        frame.click("#forecast")
        frame.wait_for_selector("#status:has-text('Forecast: ')")
        own = frame.evaluate(ASK_HOST, ["own-1", "tools/call", {"name": "sales.forecast", "arguments": {"region": "west"}}])
        assert own["result"]["structuredContent"]["forecast"], own
        echo = frame.evaluate(ASK_HOST, ["echo-1", "tools/call", {"name": "echo", "arguments": {"text": "x"}}])
        assert echo["error"]["code"] == -32601, echo
        wait_for(lambda: len(access_lines(s, "shop.sales.forecast")) == 2, 10, "the view's own calls' access lines")
        assert access_lines(s, "echo") == []
        page.close()
    finally:
        s.stop()


def test_a_view_reads_resources_and_gets_errors_for_what_no_host_serves(server, browser):
    page = explorer(server, browser)
    frame = call_chart(page)
    read = frame.evaluate(ASK_HOST, ["read-1", "resources/read", {"uri": VIEW}])
    assert read["result"]["contents"][0]["mimeType"] == "text/html;profile=mcp-app"
    missing = frame.evaluate(ASK_HOST, ["read-2", "resources/read", {"uri": "ui://nothing/here"}])
    assert missing["error"]["code"] == -32002 and "ui://nothing/here" in missing["error"]["message"]
def test_the_views_csp_blocks_a_script_from_a_domain_it_did_not_declare(server, browser):
    # sales-chart declares no domains: the spec's restrictive default.
    page = explorer(server, browser)
    frame = call_chart(page)
    with page.expect_console_message(lambda m: "scripts.example.net" in m.text) as message:
        violation = frame.evaluate("""() => new Promise((resolve) => {
            document.addEventListener("securitypolicyviolation", (e) =>
                resolve({ blocked: e.blockedURI, directive: e.effectiveDirective, disposition: e.disposition }));
            const s = document.createElement("script");
            s.src = "https://scripts.example.net/tracker.js";
            document.head.append(s);
        })""")
    assert "Content Security Policy" in message.value.text
    assert violation == {"blocked": "https://scripts.example.net/tracker.js", "directive": "script-src-elem",
                         "disposition": "enforce"}
    fetched = frame.evaluate("""() => new Promise((resolve) => {
        document.addEventListener("securitypolicyviolation", (e) => resolve(e.effectiveDirective));
        fetch("https://api.example.net/data").catch(() => {});
    })""")
    assert fetched == "connect-src"
    page.close()


def test_the_frame_route_builds_the_policy_from_the_declared_domains(server):
    csp = ('{"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.example"],'
           ' "frameDomains": [], "baseUriDomains": []}')
    r = httpx.get(server.url + "/ui/frame", params={"csp": csp})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    directives = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["connect-src"] == "https://api.example.com"
    assert directives["script-src"] == "'self' 'unsafe-inline' https://*.cdn.example"
    assert directives["frame-src"] == "'none'"
    assert directives["sandbox"] == "allow-scripts"
    assert directives["frame-ancestors"] == "'self'"
    bad = httpx.get(server.url + "/ui/frame", params={"csp": '{"connectDomains": ["https://a.example; script-src *"]}'})
    assert bad.status_code == 400 and "csp.connectDomains" in bad.json()["error"]
    assert "script-src *" not in bad.headers.get("content-security-policy", "")
    assert httpx.get(server.url + "/ui/frame", params={"csp": "[1]"}).status_code == 400


def test_size_changed_resizes_the_frame_and_only_the_frame_is_heard(server, browser):
    page = explorer(server, browser)
    frame = call_chart(page)
    # The view reports its own height: the frame fits it.
    fits = "() => Math.abs(document.querySelector('iframe.app-frame').getBoundingClientRect().height - %s) < 1"

    def frame_fits(height):
        # Polled from here: the explorer's CSP forbids the eval that
        # page.wait_for_function's in-page polling needs once its first check fails.
        wait_for(lambda: page.evaluate(fits % height), 10, f"the frame to be {height}px high")

    frame_fits(frame.evaluate("() => document.documentElement.scrollHeight"))
    # The view grows: its ResizeObserver tells the host, the frame follows.
    frame.evaluate("() => { const d = document.createElement('div'); d.style.height = '700px';"
                   " document.body.append(d); }")
    grown = frame.evaluate("() => document.documentElement.scrollHeight")
    assert grown > 700
    frame_fits(grown)
    # A size-changed from another window (the page itself) is not heard; the
    # view's own next one is.
    page.evaluate("""() => window.postMessage({ jsonrpc: "2.0", method: "ui/notifications/size-changed",
        params: { width: 10, height: 1234 } }, "*")""")
    frame.evaluate("""() => window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/size-changed",
        params: { width: 10, height: 321 } }, "*")""")
    frame_fits(321)
    page.close()


def test_teardown_is_sent_before_the_frame_is_replaced(server, browser):
    page = explorer(server, browser)
    call_chart(page, "north")
    old = page.locator(".app-box").get_attribute("data-app")
    # Another call: the view is asked to go (it answers), and only then goes.
    second = call_chart(page, "south", pick=False)
    assert second.locator("#title").inner_text() == "Units sold per month — south"
    assert page.locator(".app-box").count() == 1
    assert page.locator(".app-box").get_attribute("data-app") != old
    log = page.locator(f'#app-messages li[data-app="{old}"]').all_text_contents()
    sent = [i for i, line in enumerate(log) if "→ ui/resource-teardown #1" in line]
    answered = [i for i, line in enumerate(log) if "← result for ui/resource-teardown #1" in line]
    assert len(sent) == 1 and len(answered) == 1 and sent[0] < answered[0], log
    assert log[-1].endswith("· torn down: another call"), log
    assert not any("tool-result" in line for line in log[sent[0]:]), log

    # Picking another tool tears the view down too.
    newer = page.locator(".app-box").get_attribute("data-app")
    page.click('#tools li[data-tool="sales.forecast"]')
    page.wait_for_selector(".app-box", state="detached")
    log = page.locator(f'#app-messages li[data-app="{newer}"]').all_text_contents()
    assert any("← result for ui/resource-teardown #1" in line for line in log), log
    assert log[-1].endswith("· torn down: another tool was picked"), log
    page.close()


def test_an_upstream_servers_app_runs_and_calls_its_own_tools_by_their_names(start_server, browser):
    """The MCP Apps SDK's example server from npm behind `[upstreams.apps]` (prefix `apps.`):
    its view, drawn in the explorer, asks for `get-time` by the name its server gives it;
    the page calls `apps.get-time` (REST lists each upstream tool's own name). A plugin's
    tool and view beside it are out of the upstream view's reach, and the other way round."""
    from apps_upstream import TOOL, VIEW as UPSTREAM_VIEW, start_apps
    s = start_apps(start_server, plugins=("sales-chart",))
    listed = {t["name"]: t for t in httpx.get(s.url + "/tools").json()}
    assert listed["apps." + TOOL]["upstream"] == {"name": "apps", "tool": TOOL}
    page = browser.new_page(viewport={"width": 1100, "height": 760})
    page.goto(s.url + "/ui")
    page.click(f'#tools li[data-tool="apps.{TOOL}"]')
    page.click("#call")
    page.wait_for_selector("#outcome:not(.error)")
    frame = page.wait_for_selector(FRAME).content_frame()
    time_shown = "() => /^\\d{4}-\\d\\d-\\d\\dT/.test(document.getElementById('server-time').textContent)"
    frame.wait_for_function(time_shown)
    # The view's own tools/call, from its button.
    calls = lambda: page.locator("#app-messages").text_content().count("← tools/call #")
    assert calls() == 0
    frame.evaluate("() => { document.getElementById('server-time').textContent = 'asked'; }")
    frame.click("#get-time-btn")
    frame.wait_for_function(time_shown)
    assert calls() == 1
    assert frame.locator("#server-time").inner_text() != "[ERROR]"

    # Hangar's name for its own tool works too; a plugin's tool and view do not.
    ask = lambda id, method, params: frame.evaluate(ASK_HOST, [id, method, params])
    assert "result" in ask("own-1", "tools/call", {"name": "apps." + TOOL, "arguments": {}})
    for name in ("sales.forecast", "forecast"):
        answer = ask("other-" + name, "tools/call", {"name": name, "arguments": {"region": "west"}})
        assert answer["error"]["code"] == -32601 and "upstream apps" in answer["error"]["message"], answer
    answer = ask("other-view", "resources/read", {"uri": VIEW})
    assert answer["error"]["code"] == -32002, answer
    assert "result" in ask("own-view", "resources/read", {"uri": UPSTREAM_VIEW})
    page.close()

    # sales-chart's view may not reach the upstream's tool or view.
    page = browser.new_page(viewport={"width": 1100, "height": 760})
    page.goto(s.url + "/ui")
    frame = call_chart(page)
    for name in (TOOL, "apps." + TOOL):
        answer = frame.evaluate(ASK_HOST, ["up-" + name, "tools/call", {"name": name, "arguments": {}}])
        assert answer["error"]["code"] == -32601 and "plugin sales-chart" in answer["error"]["message"], answer
    answer = frame.evaluate(ASK_HOST, ["up-view", "resources/read", {"uri": UPSTREAM_VIEW}])
    assert answer["error"]["code"] == -32002, answer
    # The marker: the chart call's line is in; any line of the refused calls would be before it.
    frame.click("#forecast")
    frame.wait_for_selector("#status:has-text('Forecast: ')")
    wait_for(lambda: access_lines(s, "sales.forecast"), 10, "the chart view's own call's access line")
    # The explorer's call, and the upstream view's own two.
    assert len(access_lines(s, "apps." + TOOL)) == 3
    page.close()


@pytest.mark.parametrize("tool,field,value,view_text,button,after", [
    ("py.show_note", "#f-topic", '"mcp"', "#topic", "wasm", "wasm"),
    ("js.show_color", "#f-name", '"blue"', "#name", "purple", "purple"),
])
def test_python_and_javascript_views_run_and_call_their_tools(tmp_path_factory, shared_cache, browser,
                                                              tool, field, value, view_text, button, after):
    """The views of py-notes and js-notes (their `_meta` made by the SDKs' app helpers) draw
    the call's result and call their tool again from a button, through the page."""
    s = Server(tmp_path_factory.mktemp("ui-polyglot"), ["py-notes", "js-notes"], "", shared_cache)
    s.start()
    try:
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(s.url + "/ui")
        page.click(f'#tools li[data-tool="{tool}"]')
        page.select_option(field, value)
        page.click("#call")
        page.wait_for_selector("#outcome:not(.error)")
        frame = page.wait_for_selector(FRAME).content_frame()
        frame.wait_for_function(f"() => document.querySelector('{view_text}').textContent === {value}")
        frame.click(f"button:text-is('{button}')")
        frame.wait_for_function(f"() => document.querySelector('{view_text}').textContent === '{after}'")
        assert "← tools/call #2" in page.locator("#app-messages").text_content()
        page.close()
    finally:
        s.stop()
