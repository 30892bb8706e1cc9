"""`GET /metrics`: Prometheus counters that equal the calls made (by tool,
stage and outcome), stage latency histograms, fuel; behind the Host/Origin
check like /healthz; `[server] metrics = false` answers 404."""

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, Mcp

KEY = "alice-key-0123456789abcdef0123"

CONFIG = f"""
[plugins.api-key]
config = {{ keys = "alice={KEY}" }}

[[tools]]
name = "echo"
auth = {{ plugin = "api-key" }}

[[tools]]
name = "test_simple_text"
rate_limit = "2/m"
"""


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("echo", "everything", "api-key"), config=CONFIG)


def scrape(server) -> dict:
    """Every sample of /metrics as {(name, frozenset(labels)): value}."""
    r = httpx.get(server.url + "/metrics")
    assert r.status_code == 200, r.text
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0)


def test_counters_equal_the_calls_made(server):
    before = scrape(server)
    c = Mcp(server.url)
    c.initialize()
    good, bad = {"x-api-key": KEY}, {"x-api-key": "nobody"}
    outcomes = []
    for _ in range(3):
        outcomes.append(c.call("echo", {"text": "hi"}, headers=good))
    for _ in range(2):
        outcomes.append(c.call("echo", {"text": "hi"}, headers=bad))
    outcomes.append(c.call("test_error_handling", {}))
    for _ in range(2):
        outcomes.append(c.call("no_such_tool", {}))
    for _ in range(3):
        outcomes.append(c.call("test_simple_text", {}))

    # What the client saw, so the counters below are checked against it.
    ok = [r for r in outcomes if "result" in r and not r["result"].get("isError")]
    tool_errors = [r for r in outcomes if "result" in r and r["result"].get("isError")]
    stages = [r["error"]["data"]["stage"] for r in outcomes if "error" in r]
    assert len(ok) == 5 and len(tool_errors) == 1
    assert sorted(stages) == ["auth", "auth", "rate_limit", "resolve", "resolve"]

    after = scrape(server)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    calls = "hangar_calls_total"
    assert delta(calls, tool="echo", stage="-", outcome="ok") == 3
    assert delta(calls, tool="echo", stage="auth", outcome="unauthorized") == 2
    assert delta(calls, tool="test_error_handling", stage="handler", outcome="tool_error") == 1
    # An unknown name is never a label of its own.
    assert delta(calls, tool="(unknown)", stage="resolve", outcome="not_found") == 2
    assert not any(name == calls and ("tool", "no_such_tool") in labels for name, labels in after)
    assert delta(calls, tool="test_simple_text", stage="-", outcome="ok") == 2
    assert delta(calls, tool="test_simple_text", stage="rate_limit", outcome="rate_limited") == 1
    total = sum(v for (name, _), v in after.items() if name == calls) - \
        sum(v for (name, _), v in before.items() if name == calls)
    assert total == len(outcomes)

    assert delta("hangar_rate_limit_rejections_total") == 1
    assert delta("hangar_busy_rejections_total") == 0
    # Every resolved call entered auth; only those past every check ran a handler.
    assert delta("hangar_stage_duration_seconds_count", stage="auth") == 9
    assert delta("hangar_stage_duration_seconds_count", stage="handler") == 6
    assert delta("hangar_stage_duration_seconds_count", stage="resolve") == 11
    assert delta("hangar_fuel_consumed_total", tool="echo") > 0
    # Nothing runs now: no instance slot is held.
    assert value(after, "hangar_wasm_instances_in_use", pool="tools") == 0
    assert ("hangar_reloads_total", frozenset()) in after


def test_rest_calls_are_counted_too(server):
    before = scrape(server)
    r = httpx.post(server.url + "/tools/echo/call", json={"text": "x"}, headers={"x-api-key": KEY})
    assert r.status_code == 200
    after = scrape(server)
    key = ("hangar_calls_total", frozenset({"tool": "echo", "stage": "-", "outcome": "ok"}.items()))
    assert after[key] - before.get(key, 0) == 1


def test_any_host_may_scrape(server):
    """A scraper dials the pod's address: /metrics answers on any Host (it
    names nothing hidden and runs no auth check), unlike /healthz."""
    for headers in ({"host": "10.1.2.3:8080"}, {"origin": "http://evil.example.com"}):
        r = httpx.get(server.url + "/metrics", headers=headers)
        assert r.status_code == 200 and "hangar_calls_total" in r.text
        assert httpx.get(server.url + "/healthz", headers=headers).status_code == 403


def test_metrics_off_answers_404(start_server):
    off = start_server(plugins=("echo",), config="metrics = false\n")
    assert httpx.get(off.url + "/metrics").status_code == 404
    assert httpx.get(off.url + "/healthz").status_code == 200


HIDDEN = """
admin_listen = "127.0.0.1:__ADMIN__"

[plugins.api-key]
config = { keys = "admin=admin-key-0123456789abcdef, user=user-key-0123456789abcdef" }

[auth]
plugin = "api-key"

[[tools]]
name = "echo"
visible_to = { sub = ["admin"] }
"""


def test_a_hidden_tools_series_are_on_the_admin_listener_only(start_server):
    admin_port = free_port()
    server = start_server(plugins=("echo", "everything", "api-key"),
                          config=HIDDEN.replace("__ADMIN__", str(admin_port)))
    admin = {"x-api-key": "admin-key-0123456789abcdef"}
    c = Mcp(server.url)
    c.initialize()
    assert c.call("echo", {"text": "x"}, headers=admin)["result"]["content"][0]["text"] == "x"
    assert "result" in c.call("test_simple_text", {}, headers=admin)

    def tools_named(url, headers):
        r = httpx.get(url + "/metrics", headers=headers)
        assert r.status_code == 200, r.text
        return {s.labels.get("tool") for f in text_string_to_metric_families(r.text) for s in f.samples}

    # The main listener names no hidden tool, whoever asks: it runs no auth check.
    for who in (admin, {}, {"x-api-key": "user-key-0123456789abcdef"}, {"x-api-key": "wrong"}):
        seen = tools_named(server.url, who)
        assert "echo" not in seen, who
        assert "test_simple_text" in seen, who
    # The admin listener, which only operators reach, shows every series.
    full = tools_named(f"http://127.0.0.1:{admin_port}", {})
    assert "echo" in full and "test_simple_text" in full
