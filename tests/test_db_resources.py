"""DB resources: `[[resources]]` entries with a statement, read through MCP
`resources/read` on the real PostgreSQL at DATABASE_URL and on SQLite. The
URI template's variables are bound as parameters, exactly like DB tools'
inputs."""

import json
import os
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from conftest import DATABASE_URL, ROOT, Mcp, psql, run_hangar

HERE = Path(__file__).resolve().parent
SCHEMA = f"hangar_res_{os.getpid()}"
API_KEY = "k-" + os.urandom(8).hex()
PAYLOADS = (HERE / "sql_injection_payloads.txt").read_text().splitlines()

SETUP = f"""
DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;
CREATE SCHEMA {SCHEMA};
CREATE TABLE {SCHEMA}.users (id serial PRIMARY KEY, name text NOT NULL, email text, score numeric);
INSERT INTO {SCHEMA}.users (name, email, score) VALUES
  ('alice', 'alice@example.com', 1.50), ('bob', 'bob@example.com', NULL), ('carol', NULL, 7);
CREATE TABLE {SCHEMA}.notes (id int PRIMARY KEY, owner text NOT NULL, body text NOT NULL);
INSERT INTO {SCHEMA}.notes VALUES (1, 'alice', 'alice''s note'), (2, 'bob', 'bob''s note');
"""

CONFIG = f"""
[plugins.api-key]
config = {{ keys = "alice={API_KEY}" }}

[connectors.main]
kind = "postgres"
url = "{{{{ env.DATABASE_URL }}}}"
pool_size = 4

[connectors.lite]
kind = "sqlite"
path = "lite.db"
init = "{ROOT / 'examples/demo.sql'}"

[[resources]]
uri_template = "pg://users/{{id}}"
name = "pg-user"
title = "A user"
description = "One user by id"
use = "main"
statement = "SELECT id, name, email, score FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.users WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer" }}

[[resources]]
uri_template = "pg://users/by-name/{{name}}"
name = "pg-user-by-name"
use = "main"
statement = "SELECT id, name FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.users WHERE name = {{{{ inputs.name }}}}"

[[resources]]
uri_template = "pg://users/search/{{q}}"
name = "pg-user-search"
use = "main"
statement = "SELECT id, name FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.users WHERE name LIKE '%' || {{{{ inputs.q }}}} || '%' ORDER BY id"

[[resources]]
uri = "pg://stats"
name = "pg-stats"
description = "How many users"
use = "main"
statement = "SELECT count(*)::int AS users FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.users"

[[resources]]
uri_template = "pg://cached/{{id}}"
name = "pg-cached"
use = "main"
statement = "SELECT id, name FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.users WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer" }}
cache = {{ ttl = "60s" }}

[[resources]]
uri_template = "pg://brief/{{id}}"
name = "pg-brief"
use = "main"
statement = "SELECT id, name FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.users WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer" }}
cache = {{ ttl = "1s" }}

[[resources]]
uri_template = "pg://insert/{{name}}"
name = "pg-insert"
description = "A write in a read-only resource"
use = "main"
statement = "INSERT INTO {{{{ env.HANGAR_TEST_SCHEMA }}}}.users (name) VALUES ({{{{ inputs.name }}}}) RETURNING id"

[[resources]]
uri_template = "pg://my-notes/{{id}}"
name = "pg-my-note"
description = "One of the caller's notes"
use = "main"
auth = {{ plugin = "api-key", policy = {{ header = "x-api-key" }} }}
statement = "SELECT id, body FROM {{{{ env.HANGAR_TEST_SCHEMA }}}}.notes WHERE id = {{{{ inputs.id }}}} AND owner = {{{{ inputs.owner }}}}"
inputs.id = {{ type = "integer" }}
inputs.owner = {{ type = "string", from_claim = "sub" }}

[[resources]]
uri_template = "lite://products/{{id}}"
name = "lite-product"
mime_type = "application/vnd.demo+json"
use = "lite"
statement = "SELECT id, name, price FROM products WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer" }}

[[resources]]
uri_template = "lite://products/by-name/{{name}}"
name = "lite-product-by-name"
use = "lite"
statement = "SELECT id, name FROM products WHERE name = {{{{ inputs.name }}}}"

[[resources]]
uri_template = "lite://products/cheaper/{{price}}/in/{{category}}"
name = "lite-cheaper"
use = "lite"
statement = "SELECT id FROM products WHERE price < {{{{ inputs.price }}}} AND category = {{{{ inputs.category }}}} ORDER BY id"
inputs.price = {{ type = "number" }}

[[resources]]
uri_template = "lite://wipe/{{id}}"
name = "lite-wipe"
description = "A write in a read-only resource"
use = "lite"
statement = "DELETE FROM products WHERE id > {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer" }}

[[resources]]
uri = "lite://count"
name = "lite-count"
use = "lite"
statement = "SELECT count(*) AS n FROM products"
"""


@pytest.fixture(scope="module")
def server(start_server):
    psql(SETUP)
    s = start_server(plugins=("echo", "api-key"), config=CONFIG,
                     env={"DATABASE_URL": DATABASE_URL, "HANGAR_TEST_SCHEMA": SCHEMA})
    yield s
    psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


@pytest.fixture
def mcp(server):
    c = Mcp(server.url)
    c.initialize()
    return c


def read(mcp, uri, **kw):
    return mcp.request("resources/read", {"uri": uri}, **kw)


def rows(reply, uri, mime="application/json"):
    """The rows a successful read answered: one content item, JSON text."""
    assert "result" in reply, reply
    [item] = reply["result"]["contents"]
    assert item["uri"] == uri and item["mimeType"] == mime, item
    return json.loads(item["text"])


def not_found(reply, uri):
    assert reply["error"]["code"] == -32002, reply
    assert reply["error"]["data"]["uri"] == uri
    return True


def user_count(mcp):
    return rows(read(mcp, "pg://stats"), "pg://stats")[0]["users"]


def test_templates_and_resources_are_listed(mcp):
    caps = mcp.initialize()["result"]["capabilities"]
    assert "resources" in caps
    templates = {t["uriTemplate"]: t for t in mcp.request("resources/templates/list")["result"]["resourceTemplates"]}
    assert templates["pg://users/{id}"] == {
        "uriTemplate": "pg://users/{id}", "name": "pg-user", "title": "A user",
        "description": "One user by id", "mimeType": "application/json"}
    assert templates["lite://products/{id}"]["mimeType"] == "application/vnd.demo+json"
    resources = {r["uri"]: r for r in mcp.request("resources/list")["result"]["resources"]}
    assert resources["pg://stats"] == {"uri": "pg://stats", "name": "pg-stats", "description": "How many users",
                                       "mimeType": "application/json"}
    assert "lite://count" in resources
    assert not any("{" in uri for uri in resources)


def test_a_matching_uri_reads_the_row_on_postgres(mcp):
    assert rows(read(mcp, "pg://users/1"), "pg://users/1") == [
        {"id": 1, "name": "alice", "email": "alice@example.com", "score": "1.50"}]
    assert rows(read(mcp, "pg://users/by-name/carol"), "pg://users/by-name/carol") == [{"id": 3, "name": "carol"}]
    assert rows(read(mcp, "pg://users/search/o"), "pg://users/search/o") == [
        {"id": 2, "name": "bob"}, {"id": 3, "name": "carol"}]
    assert user_count(mcp) == 3


def test_a_matching_uri_reads_the_row_on_sqlite(mcp):
    uri = "lite://products/4"
    assert rows(read(mcp, uri), uri, "application/vnd.demo+json") == [
        {"id": 4, "name": "Headlamp 400 lm", "price": 44.0}]
    uri = "lite://products/by-name/" + quote("Wool socks (3 pairs)", safe="")
    assert rows(read(mcp, uri), uri) == [{"id": 6, "name": "Wool socks (3 pairs)"}]
    uri = "lite://products/cheaper/45.5/in/gear"
    assert rows(read(mcp, uri), uri) == [{"id": 4}, {"id": 8}]
    assert rows(read(mcp, "lite://count"), "lite://count") == [{"n": 8}]


def test_a_variable_that_does_not_convert_is_refused(mcp, server):
    for uri, variable in [("pg://users/abc", "id"), ("pg://users/1%20OR%201=1", "id"), ("pg://users/1.5", "id"),
                          ("lite://products/4;DELETE", "id"), ("lite://products/cheaper/cheap/in/gear", "price")]:
        r = read(mcp, uri)
        assert r["error"]["code"] == -32602, r
        assert f"{variable}: expected" in r["error"]["message"], r
    assert user_count(mcp) == 3
    assert rows(read(mcp, "lite://count"), "lite://count") == [{"n": 8}]


def test_a_read_with_no_row_is_not_found(mcp):
    assert not_found(read(mcp, "pg://users/999"), "pg://users/999")
    assert not_found(read(mcp, "pg://users/by-name/zed"), "pg://users/by-name/zed")
    assert not_found(read(mcp, "lite://products/0"), "lite://products/0")
    # Neither does a URI that matches no template.
    assert not_found(read(mcp, "pg://nothing/1"), "pg://nothing/1")


def test_hostile_values_are_bound_never_executed(mcp):
    assert len(PAYLOADS) >= 50
    names = ["alice", "bob", "carol"]
    # The search finds what it should (so a "not found" below means the
    # value was looked for, not that the search is broken).
    assert [row["name"] for row in rows(read(mcp, "pg://users/search/ali"), "pg://users/search/ali")] == ["alice"]
    for p in PAYLOADS:
        for template in ("pg://users/by-name/", "lite://products/by-name/"):
            uri = template + quote(p, safe="")
            assert not_found(read(mcp, uri), uri), p
        # Bound as a value, a payload finds exactly the names it is part
        # of; run as SQL (`' OR '1'='1`) or as a wildcard (`%`), it would
        # find others.
        uri = "pg://users/search/" + quote(p, safe="")
        r = read(mcp, uri)
        expected = [n for n in names if p in n]
        if expected:
            assert sorted(row["name"] for row in rows(r, uri)) == expected, p
        else:
            assert not_found(r, uri), (p, r)
    assert user_count(mcp) == 3
    assert psql(f"SELECT string_agg(name, ',' ORDER BY id) FROM {SCHEMA}.users") == "alice,bob,carol"
    assert psql("SELECT to_regclass('public.pwn') IS NULL") == "t"
    assert rows(read(mcp, "lite://count"), "lite://count") == [{"n": 8}]


def cache_stats(server):
    return httpx.get(server.url + "/healthz").json()["result_cache"]["pg://cached/{id}"]


def test_a_second_read_within_the_ttl_hits_the_cache(mcp, server):
    start = cache_stats(server)
    uri = "pg://cached/2"
    first = rows(read(mcp, uri), uri)
    assert first == [{"id": 2, "name": "bob"}]
    assert cache_stats(server) == {"hits": start["hits"], "misses": start["misses"] + 1}
    # A change in the table is not seen while the entry lives (60 s: the
    # steps take milliseconds idle, seconds under load; with a 1 s ttl the
    # entry could expire before the read that must hit it).
    brief = rows(read(mcp, "pg://brief/2"), "pg://brief/2")
    psql(f"UPDATE {SCHEMA}.users SET name = 'robert' WHERE id = 2")
    try:
        assert rows(read(mcp, uri), uri) == first
        assert cache_stats(server) == {"hits": start["hits"] + 1, "misses": start["misses"] + 1}
        rows(read(mcp, "pg://cached/1"), "pg://cached/1")
        assert cache_stats(server)["misses"] == start["misses"] + 2
        # ...and is seen once the entry has expired: past a 1 s ttl,
        # however loaded the machine (a sleep only ever takes longer).
        assert brief == first
        time.sleep(1.2)
        assert rows(read(mcp, "pg://brief/2"), "pg://brief/2") == [{"id": 2, "name": "robert"}]
    finally:
        psql(f"UPDATE {SCHEMA}.users SET name = 'bob' WHERE id = 2")


def test_a_write_in_a_read_only_resource_fails(mcp):
    r = read(mcp, "pg://insert/mallory")
    assert r["error"]["code"] == -32000 and r["error"]["data"]["stage"] == "connector", r
    assert "read-only transaction" in r["error"]["message"]
    assert user_count(mcp) == 3
    r = read(mcp, "lite://wipe/0")
    assert r["error"]["code"] == -32000 and r["error"]["data"]["stage"] == "connector", r
    assert "read_only" in r["error"]["message"]
    assert rows(read(mcp, "lite://count"), "lite://count") == [{"n": 8}]


def test_claim_inputs_come_from_the_principal(mcp):
    key = {"x-api-key": API_KEY}
    assert rows(read(mcp, "pg://my-notes/1", headers=key), "pg://my-notes/1") == [{"id": 1, "body": "alice's note"}]
    # Bob's note is not alice's: no row, not found.
    assert not_found(read(mcp, "pg://my-notes/2", headers=key), "pg://my-notes/2")
    r = read(mcp, "pg://my-notes/1", headers={"x-api-key": "wrong"})
    assert r["error"]["message"] == "Unauthorized", r


def check(tmp_path, entry):
    """`hangar check` of a config with one SQLite connector and `entry`."""
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f"""
[server]
cache_dir = "{tmp_path / 'cache'}"
[connectors.lite]
kind = "sqlite"
path = "{tmp_path / 'c.db'}"
[[resources]]
name = "bad"
{entry}
""")
    (tmp_path / "plugins").mkdir(exist_ok=True)
    return run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path / "plugins"))


GOOD = 'uri_template = "x://t/{id}"\nuse = "lite"\nstatement = "SELECT {{ inputs.id }} AS id"'


@pytest.mark.parametrize("entry, message", [
    ('uri_template = "x://t/{id}"\nstatement = "SELECT {{ inputs.id }} AS id"',
     'resource x://t/{id}: a statement needs `use = "<connector>"`'),
    ('uri_template = "x://t/{id}"\nuse = "nope"\nstatement = "SELECT {{ inputs.id }} AS id"',
     'resource x://t/{id}: no connector named "nope"'),
    ('uri = "x://t/1"\nuri_template = "x://t/{id}"\nuse = "lite"\nstatement = "SELECT 1"',
     "needs exactly one of uri and uri_template"),
    ('use = "lite"\nstatement = "SELECT 1"', "needs exactly one of uri and uri_template"),
    ('uri_template = "x://t/{id}"\nuse = "lite"\nstatement = "SELECT {{ inputs.idd }} AS id"',
     "resource x://t/{id}: {{ inputs.idd }} names no variable of the URI template (its variables: id)"),
    ('uri = "x://t"\nuse = "lite"\nstatement = "SELECT {{ inputs.id }} AS id"',
     "{{ inputs.id }} names no variable of the URI template (its variables: none)"),
    (GOOD + '\ninputs.other = { type = "integer" }',
     "inputs.other is neither a variable of the URI template nor bound from a claim"),
    ('uri_template = "x://t/{id}"\nuse = "lite"\nstatement = "SELECT * FROM {{ inputs.id }}"',
     "{{ inputs.id }} cannot be a query parameter here"),
])
def test_check_reports_a_bad_entry(tmp_path, entry, message):
    out = check(tmp_path, entry)
    assert out.returncode != 0, out.stdout
    assert message in out.stderr, out.stderr


def test_check_lists_a_good_entry(tmp_path):
    out = check(tmp_path, GOOD)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "template x://t/{id} (hangar.toml)" in out.stdout


def test_check_reports_a_settings_entry_without_uri(tmp_path):
    """An entry without a statement (settings for a component's resource)
    that names no URI is a problem too."""
    out = check(tmp_path, 'visible_to = { role = ["admin"] }')
    assert out.returncode != 0, out.stdout
    assert "needs exactly one of uri and uri_template" in out.stdout, out.stdout
