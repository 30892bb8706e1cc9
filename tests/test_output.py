"""The presenter whole (issue 65, items 1–3): results checked against their
tool's `outputSchema` after the output map, for a component tool
(misbehave's `shaped`) and an upstream tool (tests/clients/hostile_upstream.py's
`shaped`), each of which can return a result that contradicts the schema it
declares; under `[server] output_validation` = strict / warn / off and
`strip_undeclared`; results cut by `[[tools]] limit` (and a tool's own
`x-hangar-limit`) before the check; and a DB tool's `max_rows` reported the
same way."""

import json
import re

import httpx
import pytest

from conftest import run_hangar, session
from test_hostile_upstream import Hostile

TOOLS = ["shaped", "hostile.shaped"]


@pytest.fixture(scope="module")
def hostile():
    h = Hostile()
    yield h
    h.stop()


def upstream(h):
    return f"""
[upstreams.hostile]
url = "{h.url}"
timeout = "20s"
"""


def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "rows.db"
    return f"""
[connectors.lite]
kind = "sqlite"
path = "{path}"

[[tools]]
name = "db.numbers"
description = "Ten numbers, three at most"
use = "lite"
statement = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10) SELECT x FROM c"
max_rows = 3
"""


@pytest.fixture(scope="module")
def strict(start_server, hostile, tmp_path_factory):
    """The default (`strict`), with `shaped` and `hostile.shaped` cut to 50 items."""
    limits = "".join(f"""
[[tools]]
name = "{t}"
limit = {{ pointer = "/items", max = 50 }}
""" for t in TOOLS)
    return start_server(plugins=("echo", "misbehave"),
                        config=upstream(hostile) + db(tmp_path_factory) + limits)


@pytest.fixture(scope="module")
def warn(start_server, hostile):
    return start_server(plugins=("echo", "misbehave"),
                        config='output_validation = "warn"\n' + upstream(hostile))


@pytest.fixture(scope="module")
def stripping(start_server, hostile):
    """`strip_undeclared` for the whole server, turned off again for `shaped_limited`."""
    return start_server(plugins=("echo", "misbehave"),
                        config="strip_undeclared = true\n" + upstream(hostile)
                        + '[[tools]]\nname = "shaped_limited"\nstrip_undeclared = false\n')


def mcp_call(server, tool, args):
    c = session(server)
    return c.call(tool, args)


def rest_call(server, tool, args):
    return httpx.post(f"{server.url}/tools/{tool}/call", json=args, timeout=60)


@pytest.mark.parametrize("tool", TOOLS)
def test_a_conforming_result_passes_and_lists_its_schema(strict, tool):
    c = session(strict)
    listed = {t["name"]: t for t in c.request("tools/list")["result"]["tools"]}
    assert listed[tool]["outputSchema"]["required"] == ["count", "items"]
    r = c.call(tool, {"mode": "good", "n": 3})
    assert r["result"]["structuredContent"] == {"count": 3, "items": [{"id": 0}, {"id": 1}, {"id": 2}]}
    assert "hangar/truncated" not in (r["result"].get("_meta") or {})


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mode, said", [
    ("wrong_type", r'/count: "3" is not of type "integer"'),
    ("missing", r'/: "count" is a required property'),
    ("undeclared", r"/: Additional properties are not allowed \('secret' was unexpected\)"),
    ("none", r"no structuredContent"),
])
def test_strict_refuses_a_result_that_contradicts_the_schema_naming_where_and_what(strict, tool, mode, said):
    r = mcp_call(strict, tool, {"mode": mode, "n": 3})
    assert "error" in r, r
    assert r["error"]["code"] == -32000
    assert r["error"]["data"]["stage"] == "output"
    assert re.search(said, r["error"]["message"]), r["error"]["message"]
    assert r["error"]["message"].startswith("output: the result does not match") or mode == "none"
    # REST: the output stage is a 500 carrying the same message.
    rest = rest_call(strict, tool, {"mode": mode, "n": 3})
    assert rest.status_code == 500, rest.text
    body = rest.json()
    assert body["isError"] is True
    assert re.search(said, body["content"][0]["text"]), body


def test_an_undeclared_item_property_is_named_with_its_path(strict):
    r = mcp_call(strict, "shaped", {"mode": "undeclared", "n": 2})
    message = r["error"]["message"]
    assert "/items/0: Additional properties are not allowed ('internal' was unexpected)" in message, message


def test_strict_failures_are_counted_and_logged(strict):
    mcp_call(strict, "hostile.shaped", {"mode": "wrong_type"})
    metrics = httpx.get(f"{strict.url}/metrics", timeout=10).text
    line = next(l for l in metrics.splitlines() if l.startswith('hangar_output_invalid_total{tool="hostile.shaped"}'))
    assert int(float(line.split()[-1])) >= 1
    assert re.search(r'stage="output"', metrics), "the output stage is timed and counted"
    assert "result refused" in strict.log_text()


@pytest.mark.parametrize("tool", TOOLS)
def test_warn_passes_the_result_on_logs_and_counts_it(warn, tool):
    r = mcp_call(warn, tool, {"mode": "wrong_type", "n": 2})
    assert r["result"]["structuredContent"]["count"] == "2", r
    assert "isError" not in r["result"] or r["result"]["isError"] is False
    metrics = httpx.get(f"{warn.url}/metrics", timeout=10).text
    assert f'hangar_output_invalid_total{{tool="{tool}"}}' in metrics
    log = warn.log_text()
    assert "result passed on as it is" in log
    assert re.search(r'/count: "2" is not of type \\?"integer', log), log[-2000:]


@pytest.mark.parametrize("tool", TOOLS)
def test_strip_undeclared_drops_what_a_closed_schema_does_not_declare(stripping, tool):
    r = mcp_call(stripping, tool, {"mode": "undeclared", "n": 2})
    assert r["result"]["structuredContent"] == {"count": 2, "items": [{"id": 0}, {"id": 1}]}, r
    # Stripping drops properties; it does not mend a wrong type.
    wrong = mcp_call(stripping, tool, {"mode": "wrong_type", "n": 2})
    assert wrong["error"]["data"]["stage"] == "output"


def test_a_tools_own_strip_setting_wins_over_the_servers(stripping):
    r = mcp_call(stripping, "shaped_limited", {"mode": "undeclared", "n": 2})
    assert r["error"]["data"]["stage"] == "output"
    assert "'secret' was unexpected" in r["error"]["message"]


def test_off_checks_nothing(start_server, hostile):
    s = start_server(plugins=("echo", "misbehave"), config='output_validation = "off"\n' + upstream(hostile))
    for tool in TOOLS:
        r = mcp_call(s, tool, {"mode": "wrong_type", "n": 1})
        assert r["result"]["structuredContent"]["count"] == "1", r
    assert "hangar_output_invalid_total{" not in httpx.get(f"{s.url}/metrics", timeout=10).text


@pytest.mark.parametrize("tool", TOOLS)
def test_a_ten_thousand_item_result_is_cut_to_fifty_and_says_so(strict, tool):
    r = mcp_call(strict, tool, {"mode": "good", "n": 10_000})
    result = r["result"]
    assert result["structuredContent"]["count"] == 10_000
    assert [i["id"] for i in result["structuredContent"]["items"]] == list(range(50))
    # The text block that mirrored the structured content is cut the same way.
    assert len(json.loads(result["content"][0]["text"])["items"]) == 50
    assert result["_meta"]["hangar/truncated"] == {"pointer": "/items", "total": 10_000, "kept": 50}
    rules = result["_meta"]["hangar/hints"]["rules"]
    assert any("50 of 10000 items at /items" in rule for rule in rules), rules


def test_a_cut_comes_before_the_check(strict):
    """Items past the cut are never checked: an undeclared property only in
    them cannot fail the call, and one in the kept items still does."""
    r = mcp_call(strict, "shaped", {"mode": "wrong_type", "n": 10_000})
    assert r["error"]["data"]["stage"] == "output"
    assert "/count" in r["error"]["message"]


def test_a_tool_declares_its_own_limit_in_its_output_schema(strict):
    r = mcp_call(strict, "shaped_limited", {"mode": "good", "n": 10_000})
    assert len(r["result"]["structuredContent"]["items"]) == 5
    assert r["result"]["_meta"]["hangar/truncated"] == {"pointer": "/items", "total": 10_000, "kept": 5}
    # Fewer items than the limit: nothing said.
    r = mcp_call(strict, "shaped_limited", {"mode": "good", "n": 5})
    assert "hangar/truncated" not in (r["result"].get("_meta") or {})


def test_a_db_tools_max_rows_is_reported_the_same_way(strict):
    r = mcp_call(strict, "db.numbers", {})
    result = r["result"]
    assert result["structuredContent"] == {"rows": [{"x": 1}, {"x": 2}, {"x": 3}], "truncated": True}
    assert result["_meta"]["hangar/truncated"] == {"pointer": "/rows", "total": None, "kept": 3}
    assert any("3 of more items at /rows" in rule for rule in result["_meta"]["hangar/hints"]["rules"])


def test_errors_as_results_carry_the_output_failure(start_server):
    s = start_server(plugins=("echo", "misbehave"), config='errors = "result"\n')
    r = mcp_call(s, "shaped", {"mode": "wrong_type"})
    assert r["result"]["isError"] is True
    assert r["result"]["content"][0]["text"].startswith("output: the result does not match"), r


@pytest.mark.parametrize("limit, said", [
    ('{ pointer = "items", max = 5 }', 'must start with "/"'),
    ('{ pointer = "/items", max = 0 }', "nonzero"),
    ('{ pointer = "/items" }', "missing field `max`"),
])
def test_check_refuses_a_limit_that_cannot_work(tmp_path, limit, said):
    config = tmp_path / "hangar.toml"
    config.write_text(f'[[tools]]\nname = "shaped"\nlimit = {limit}\n')
    (tmp_path / "plugins").mkdir()
    out = run_hangar("check", "--config", str(config), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode != 0
    assert said in out.stderr + out.stdout, out


def test_the_python_sdk_gets_a_clear_error_instead_of_a_result_it_would_reject(strict):
    """The official client validates structured content against the tool's
    outputSchema; under strict it is never handed a result that fails it."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.exceptions import McpError

    async def run():
        async with streamablehttp_client(f"{strict.url}/mcp") as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()
                good = await s.call_tool("hostile.shaped", {"mode": "good", "n": 2})
                assert good.structuredContent == {"count": 2, "items": [{"id": 0}, {"id": 1}]}
                with pytest.raises(McpError) as refused:
                    await s.call_tool("hostile.shaped", {"mode": "wrong_type", "n": 2})
                return refused.value.error

    error = asyncio.run(run())
    assert error.data["stage"] == "output" and "/count" in error.message
