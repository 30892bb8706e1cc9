"""State sync: the SQLite demo's restock (`invalidates = ["demo.products.*",
"demo://products/*"]`) drops the cached reads it makes stale, and its
result's _meta says which."""

import json
import shutil

import httpx
import pytest

from conftest import ROOT, Mcp, Server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("state-sync")
    shutil.copy(ROOT / "hangar.toml", work / "hangar.toml")
    shutil.copytree(ROOT / "examples", work / "examples", ignore=shutil.ignore_patterns("demo.db*"))
    s = Server(work, ("echo",), config_file=work / "hangar.toml").start()
    yield s
    s.stop()


def cache(server, name):
    return httpx.get(server.url + "/healthz").json()["result_cache"][name]


def rows(r):
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]["structuredContent"]["rows"]


def test_restock_invalidates_the_cached_reads_and_says_so(server):
    c = Mcp(server.url)
    c.initialize()
    [before] = rows(c.call("demo.products.get", {"id": 4}))
    start = cache(server, "demo.products.get")
    # A second read is served from the cache.
    assert rows(c.call("demo.products.get", {"id": 4})) == [before]
    assert cache(server, "demo.products.get") == {"hits": start["hits"] + 1, "misses": start["misses"]}
    [item] = c.request("resources/read", {"uri": "demo://products/4"})["result"]["contents"]
    assert json.loads(item["text"])[0]["in_stock"] == before["in_stock"]

    r = c.call("demo.products.restock", {"id": 4, "units": 5})
    assert rows(r) == [{"id": 4, "in_stock": before["in_stock"] + 5}]
    assert r["result"]["_meta"]["hangar/invalidated"] == [
        "demo.products.search", "demo.products.get", "demo://products/{id}"]

    # The next read is a miss, and sees the new stock.
    [after] = rows(c.call("demo.products.get", {"id": 4}))
    assert after["in_stock"] == before["in_stock"] + 5
    assert cache(server, "demo.products.get") == {"hits": start["hits"] + 1, "misses": start["misses"] + 1}
    [item] = c.request("resources/read", {"uri": "demo://products/4"})["result"]["contents"]
    assert json.loads(item["text"])[0]["in_stock"] == before["in_stock"] + 5


def test_a_failed_write_invalidates_nothing(server):
    c = Mcp(server.url)
    c.initialize()
    rows(c.call("demo.products.get", {"id": 2}))
    start = cache(server, "demo.products.get")
    r = c.call("demo.products.restock", {"id": 2})
    assert "error" in r
    rows(c.call("demo.products.get", {"id": 2}))
    assert cache(server, "demo.products.get")["hits"] == start["hits"] + 1


def test_reads_carry_no_invalidation_meta(server):
    c = Mcp(server.url)
    c.initialize()
    r = c.call("demo.products.get", {"id": 1})
    assert "hangar/invalidated" not in (r["result"].get("_meta") or {})
