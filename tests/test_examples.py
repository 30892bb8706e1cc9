"""The shipped hangar.toml (SQLite demo, no server needed) and
examples/postgres.toml (the same tools on PostgreSQL) work as documented."""

import json
import shutil

import pytest

from conftest import DATABASE_URL, ROOT, Mcp, Server, psql, run_hangar


def rows(r):
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]["structuredContent"]["rows"]


@pytest.fixture
def workdir(tmp_path, shared_cache):
    """The shipped config and examples in a folder of their own (the demo
    database is created there, as on a fresh checkout), compiled components
    from the run's shared cache (the Python and JavaScript examples take
    seconds each to compile)."""
    text = (ROOT / "hangar.toml").read_text()
    assert 'cache_dir = ".cache/hangar"' in text
    (tmp_path / "hangar.toml").write_text(text.replace(
        'cache_dir = ".cache/hangar"', f'cache_dir = "{shared_cache}"'))
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("demo.db*"))
    return tmp_path


# The example plugins the shipped config serves (scripts/run builds the
# Rust ones; `--all` and scripts/test the Python and JavaScript ones too).
SHIPPED = tuple(sorted(p.stem for p in (ROOT / "plugins").glob("*.wasm")))


def start_in(workdir, config="hangar.toml", env=None):
    return Server(workdir, SHIPPED, env=env, config_file=workdir / config).start()


def test_shipped_config_checks_clean_and_serves_the_sqlite_demo(workdir):
    s = start_in(workdir)
    s.stop()
    out = run_hangar("check", "--config", str(workdir / "hangar.toml"), "--plugins", str(workdir / "plugins"))
    assert out.returncode == 0, out.stdout + out.stderr
    s = start_in(workdir)
    try:
        c = Mcp(s.url)
        c.initialize()
        names = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
        assert {"echo", "demo.products.search", "demo.products.get"} <= names
        # A demo, not the test bench: no conformance fixture is shipped.
        assert not [n for n in names if n.startswith("test_")], names
        found = rows(c.call("demo.products.search", {"query": "jacket"}))
        assert found == [{"id": 2, "name": "Rain jacket", "category": "outerwear", "price": 189.5, "in_stock": 3}]
        assert rows(c.call("demo.products.get", {"id": 4}))[0]["name"] == "Headlamp 400 lm"
        assert rows(c.call("demo.products.search", {"query": "' OR 1=1 --"})) == []
        assert rows(c.call("demo.products.restock", {"id": 3, "units": 5})) == [{"id": 3, "in_stock": 5}]
        templates = c.request("resources/templates/list")["result"]["resourceTemplates"]
        assert "demo://products/{id}" in {t["uriTemplate"] for t in templates}
        [item] = c.request("resources/read", {"uri": "demo://products/4"})["result"]["contents"]
        assert item["mimeType"] == "application/json"
        assert json.loads(item["text"]) == [
            {"id": 4, "name": "Headlamp 400 lm", "category": "gear", "price": 44.0, "in_stock": 27}]
        assert c.request("resources/read", {"uri": "demo://products/99"})["error"]["code"] == -32002
        assert (workdir / "examples/demo.db").exists()
    finally:
        s.stop()


def test_sqlite_read_only_tool_refuses_a_write(tmp_path, shared_cache):
    config = f"""
[connectors.lite]
kind = "sqlite"
path = "{tmp_path / 'w.db'}"
init = "{ROOT / 'examples/demo.sql'}"

[[tools]]
name = "lite.wipe"
description = "A write in a read-only tool"
use = "lite"
statement = "DELETE FROM products WHERE id > {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}

[[tools]]
name = "lite.count"
description = "Counts products"
use = "lite"
statement = "SELECT count(*) AS n FROM products"
"""
    s = Server(tmp_path / "srv", ["echo"], config, shared_cache).start()
    try:
        c = Mcp(s.url)
        r = c.call("lite.wipe", {"id": 0})
        assert r["error"]["data"]["stage"] == "connector"
        assert "read_only" in r["error"]["message"]
        assert rows(c.call("lite.count", {})) == [{"n": 8}]
    finally:
        s.stop()


def test_postgres_example_serves_the_same_tools(workdir):
    psql("DROP TABLE IF EXISTS products")
    psql((ROOT / "examples/demo-postgres.sql").read_text())
    s = start_in(workdir, "examples/postgres.toml", {"DATABASE_URL": DATABASE_URL})
    try:
        c = Mcp(s.url)
        found = rows(c.call("demo.products.search", {"query": "JACKET"}))
        assert found == [{"id": 2, "name": "Rain jacket", "category": "outerwear", "price": "189.50", "in_stock": 3}]
        assert rows(c.call("demo.products.get", {"id": 4}))[0]["name"] == "Headlamp 400 lm"
        [item] = c.request("resources/read", {"uri": "demo://products/4"})["result"]["contents"]
        assert json.loads(item["text"])[0]["name"] == "Headlamp 400 lm"
    finally:
        s.stop()
        psql("DROP TABLE IF EXISTS products")


@pytest.mark.parametrize("name", ["echo", "api-key", "normalize", "redact"])
def test_slim_example_plugins_import_nothing_from_wasi(name):
    """The Rust examples that need no WASI are built for wasm32-unknown-unknown
    (scripts/lib.sh SLIM_PLUGINS): no WASI interface is named anywhere in the
    component, where a wasm32-wasip2 build of the same SDK names several."""
    assert b"wasi:" not in (ROOT / "plugins" / f"{name}.wasm").read_bytes()
    # The check can fail: a plugin built for wasm32-wasip2 names std's imports.
    assert b"wasi:cli/" in (ROOT / "plugins" / "wordcount.wasm").read_bytes()
