"""Rate limits per caller (principal, or client address when anonymous) on a
tool, a plugin and the server: REST 429 with Retry-After, MCP -32000 stage
rate_limit with data.retry_after_ms, and the allowance refills."""

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from conftest import Mcp

KEYS = ("alice=alice-key-0123456789abcdef0123, bob=bob-key-0123456789abcdef01234, "
        "carol=carol-key-0123456789abcdef012")

CONFIG = f"""
[plugins.api-key]
config = {{ keys = "{KEYS}" }}

[[tools]]
name = "echo"
rate_limit = "5/m"
auth = {{ plugin = "api-key" }}

[[tools]]
name = "test_simple_text"
rate_limit = "5/s"

# The plugin's limit is far above its tool's: test_the_allowance_refills
# must meet the tool's 5/s, even where a loaded machine answers slowly.
[plugins.everything]
rate_limit = "600/m"
"""


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("echo", "everything", "api-key"), config=CONFIG)


def rest_echo(server, key):
    return httpx.post(server.url + "/tools/echo/call", json={"text": "hi"}, headers={"x-api-key": key})


def test_the_sixth_call_of_a_five_per_minute_tool_gets_429_with_retry_after(server):
    codes = [rest_echo(server, "alice-key-0123456789abcdef0123").status_code for _ in range(5)]
    assert codes == [200] * 5
    refused = rest_echo(server, "alice-key-0123456789abcdef0123")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 12
    assert "rate limit of 5/m on tool echo exceeded" in refused.json()["content"][0]["text"]
    # Another principal has an allowance of its own.
    assert rest_echo(server, "bob-key-0123456789abcdef01234").status_code == 200
    # Refused callers are told by auth first: a bad key is 401, not 429.
    assert rest_echo(server, "nobody").status_code == 401


def test_mcp_reports_the_stage_and_when_to_retry(server):
    # carol calls only here: her five calls fit, the sixth is refused.
    c = Mcp(server.url)
    c.initialize()
    key = {"x-api-key": "carol-key-0123456789abcdef012"}
    for _ in range(5):
        assert c.call("echo", {"text": "x"}, headers=key)["result"]["isError"] is False
    r = c.call("echo", {"text": "x"}, headers=key)
    assert r["error"]["code"] == -32000
    assert r["error"]["data"]["stage"] == "rate_limit"
    assert r["error"]["data"]["retry_after_ms"] > 0


def spend_the_burst(url, tool, limit):
    """Calls `tool` eight at a time until one is refused; eight at once
    outrun a 5/s refill however slowly each call is answered."""
    with httpx.Client(timeout=30) as http, ThreadPoolExecutor(8) as pool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for r in pool.map(lambda _: http.post(f"{url}/tools/{tool}/call", json={}), range(8)):
                if r.status_code == 429:
                    assert f"rate limit of {limit} on tool {tool} exceeded" in r.json()["content"][0]["text"]
                    return r
                assert r.status_code == 200, r.text
    pytest.fail(f"a {limit} tool called eight at a time for 30 s was never refused")


def test_the_allowance_refills(server):
    c = Mcp(server.url)
    c.initialize()
    # Anonymous callers are counted by address; spend the burst of a 5/s tool.
    r = spend_the_burst(server.url, "test_simple_text", "5/s")
    wait = int(r.headers["retry-after"])
    assert wait >= 1
    time.sleep(wait)
    assert httpx.post(server.url + "/tools/test_simple_text/call", json={}).status_code == 200
    assert c.call("test_simple_text", {})["result"]["isError"] is False


def test_a_plugin_limit_is_shared_by_its_tools_and_errors_result_style(start_server):
    s = start_server(plugins=("everything",), config='errors = "result"\n[plugins.everything]\nrate_limit = "3/m"\n')
    c = Mcp(s.url)
    c.initialize()
    for name in ("test_simple_text", "test_image_content", "test_audio_content"):
        assert c.call(name, {})["result"]["isError"] is False
    r = c.call("test_embedded_resource", {})
    assert r["result"]["isError"] is True
    assert "rate limit of 3/m on plugin everything exceeded" in r["result"]["content"][0]["text"]


def test_a_bad_rate_limit_is_a_config_error(start_server, tmp_path):
    from conftest import run_hangar
    cfg = tmp_path / "hangar.toml"
    cfg.write_text('[server]\nrate_limit = "5/h"\n')
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path))
    assert out.returncode != 0
    assert 'expected "N/s" or "N/m"' in out.stdout + out.stderr
