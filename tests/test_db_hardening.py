"""DB connectors under hostile use: clients that hang up mid-query, calls
past their deadline, read-only tools whose statements try to change the
session or the database, numeric values past PostgreSQL's limits, TLS."""

import json
import os
import socket
import sqlite3
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import DATABASE_URL, Mcp, PrivatePostgres, psql, wait_for

SCHEMA = f"hangar_hard_{os.getpid()}"
TAG = f"hangar-hangup-{os.getpid()}"
# A statement that counts for minutes unless stopped.
COUNT_TO = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {{ inputs.n }}) "
            "SELECT count(*) AS n FROM c")
FOREVER = 10_000_000_000


def rows(reply):
    assert "result" in reply, reply
    assert reply["result"]["isError"] is False, reply
    return reply["result"]["structuredContent"]["rows"]


def error(reply, stage):
    assert "error" in reply, reply
    assert reply["error"]["code"] == -32000 and reply["error"]["data"]["stage"] == stage, reply
    return reply["error"]["message"]


def rest_call(server, tool, args, timeout=60):
    return httpx.post(f"{server.url}/tools/{tool}/call", json=args, timeout=timeout)


def hang_up(server, tool, args, after=0.3, until=None):
    """Sends a REST call and closes the socket while it runs: `after` s
    later, or once `until()` has returned."""
    body = json.dumps(args)
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall((f"POST /tools/{tool}/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
        if until:
            until()
        else:
            time.sleep(after)


def hang_up_many(server, tool, args, clients):
    threads = [threading.Thread(target=hang_up, args=(server, tool, args)) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ------------------------------------------------------------------ SQLite

SQLITE_CONFIG = f"""
[connectors.lite]
kind = "sqlite"
path = "lite.db"
init = "init.sql"
pool_size = 2
statement_timeout_ms = 600000
wait_timeout_ms = 10000

[connectors.short]
kind = "sqlite"
path = "short.db"
statement_timeout_ms = 300

[connectors.one]
kind = "sqlite"
path = "one.db"
init = "init.sql"
pool_size = 1
statement_timeout_ms = 3000
wait_timeout_ms = 200

[[tools]]
name = "lite.count"
description = "Counts to n, slowly"
use = "lite"
statement = "{COUNT_TO}"
inputs.n = {{ type = "integer", required = true }}

[[tools]]
name = "lite.notes"
description = "How many notes"
use = "lite"
statement = "SELECT count(*) AS n FROM notes"

[[tools]]
name = "short.count"
description = "Counts to n within 300 ms"
use = "short"
statement = "{COUNT_TO}"
inputs.n = {{ type = "integer", required = true }}

[[tools]]
name = "one.count"
description = "Counts to n on the only connection"
use = "one"
statement = "{COUNT_TO}"
inputs.n = {{ type = "integer", required = true }}

[[tools]]
name = "one.attach"
description = "A read-only tool that attaches a file"
use = "one"
statement = "ATTACH DATABASE {{{{ inputs.path }}}} AS evil"
inputs.path = {{ type = "string", required = true }}

[[tools]]
name = "one.begin"
description = "A read-only tool that opens a transaction"
use = "one"
statement = "BEGIN"

[[tools]]
name = "one.query_only_off"
description = "A read-only tool that turns query_only off"
use = "one"
statement = "PRAGMA query_only = 0"

[[tools]]
name = "one.begin_rw"
description = "A writer that opens a transaction and leaves it"
use = "one"
read_only = false
statement = "BEGIN"

[[tools]]
name = "one.add"
description = "Adds a note"
use = "one"
read_only = false
statement = "INSERT INTO notes (body) VALUES ({{{{ inputs.body }}}}) RETURNING id"
inputs.body = {{ type = "string", required = true }}

[[tools]]
name = "one.sneak"
description = "A read-only tool that writes"
use = "one"
statement = "INSERT INTO notes (body) VALUES ('sneaked') RETURNING id"
"""


@pytest.fixture(scope="module")
def lite(start_server, tmp_path_factory):
    init = tmp_path_factory.mktemp("init") / "init.sql"
    init.write_text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);\n")
    return start_server(plugins=("echo",), config=SQLITE_CONFIG.replace('init = "init.sql"', f'init = "{init}"'))


def test_sqlite_survives_clients_hanging_up_mid_query(lite):
    # Far more hang-ups than connections: each one's statement must stop and
    # its connection come back, or later calls wait or fail.
    hang_up_many(lite, "lite.count", {"n": FOREVER}, clients=8)
    for _ in range(6):
        r = rest_call(lite, "lite.notes", {})
        assert r.status_code == 200, r.text
        assert r.json()["structuredContent"]["rows"] == [{"n": 0}]
    c = Mcp(lite.url)
    c.initialize()
    assert rows(c.call("lite.count", {"n": 1000})) == [{"n": 1000}]
    assert "panicked" not in lite.log_text()
    assert httpx.get(lite.url + "/healthz").status_code == 200


def test_sqlite_statement_is_interrupted_at_its_timeout(lite):
    c = Mcp(lite.url)
    c.initialize()
    message = error(c.call("short.count", {"n": FOREVER}), "connector")
    assert "statement timeout of 300 ms exceeded" in message
    assert rows(c.call("short.count", {"n": 10})) == [{"n": 10}]


def test_sqlite_call_waits_for_a_connection_at_most_wait_timeout(lite):
    c = Mcp(lite.url)
    c.initialize()
    busy = threading.Thread(target=lambda: Mcp(lite.url).call("one.count", {"n": FOREVER}))
    busy.start()
    time.sleep(1.0)
    message = error(c.call("one.count", {"n": 1}), "connector")
    assert "timed out waiting for a connection" in message
    busy.join()
    assert rows(c.call("one.count", {"n": 1})) == [{"n": 1}]


def test_sqlite_read_only_tool_cannot_attach_a_file(lite, tmp_path):
    target = tmp_path / "created-by-a-read-only-tool.db"
    c = Mcp(lite.url)
    c.initialize()
    message = error(c.call("one.attach", {"path": str(target)}), "connector")
    assert "read_only" in message
    assert not target.exists()


def test_sqlite_read_only_tool_cannot_change_its_connection(lite):
    c = Mcp(lite.url)
    c.initialize()
    for tool in ("one.begin", "one.query_only_off"):
        assert "read_only" in error(c.call(tool, {}), "connector")
    assert "read_only" in error(c.call("one.sneak", {}), "connector")
    db = sqlite3.connect(lite.workdir / "one.db")
    assert db.execute("SELECT count(*) FROM notes WHERE body = 'sneaked'").fetchone() == (0,)


def test_sqlite_transaction_left_open_does_not_swallow_later_writes(lite):
    c = Mcp(lite.url)
    c.initialize()
    # A writer whose statement opens a transaction and leaves it: the next
    # caller of that (only) connection must not write into it unseen.
    rows(c.call("one.begin_rw", {}))
    [added] = rows(c.call("one.add", {"body": "kept"}))
    db = sqlite3.connect(lite.workdir / "one.db")
    assert db.execute("SELECT body FROM notes WHERE id = ?", (added["id"],)).fetchone() == ("kept",)


# ---------------------------------------------------------------- Postgres

PG_SETUP = f"""
DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;
CREATE SCHEMA {SCHEMA};
CREATE TABLE {SCHEMA}.canary (id serial PRIMARY KEY, v text NOT NULL);
INSERT INTO {SCHEMA}.canary (v) VALUES ('a'), ('b');
"""

PG_CONFIG = f"""
[connectors.main]
kind = "postgres"
url = "{{{{ env.DATABASE_URL }}}}"
pool_size = 1
statement_timeout_ms = 4000

[connectors.sleepy]
kind = "postgres"
url = "{{{{ env.DATABASE_URL }}}}"
pool_size = 2
statement_timeout_ms = 120000
wait_timeout_ms = 10000

[[tools]]
name = "ro.read_write_on"
description = "A read-only tool that turns the session's read-only default off"
use = "main"
statement = "SELECT set_config('default_transaction_read_only', 'off', false) AS v"

[[tools]]
name = "ro.insert"
description = "A read-only tool that writes"
use = "main"
statement = "INSERT INTO {SCHEMA}.canary (v) VALUES ({{{{ inputs.v }}}}) RETURNING id"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "ro.set"
description = "Sets a session variable"
use = "main"
statement = "SELECT set_config('hangar.secret', {{{{ inputs.v }}}}, false) AS v"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "ro.get"
description = "Reads a session variable"
use = "main"
statement = "SELECT current_setting('hangar.secret', true) AS v"

[[tools]]
name = "ro.set_then_fail"
description = "Sets a session variable, then fails (division by zero)"
use = "main"
statement = "SELECT set_config('hangar.secret', {{{{ inputs.v }}}}, false) || (1 / (random() * 0)::int)::text AS v"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "ro.listen"
description = "Listens on a channel"
use = "main"
statement = "LISTEN hangar_probe"

[[tools]]
name = "ro.listening"
description = "Counts the channels this session listens on"
use = "main"
statement = "SELECT count(*)::int AS n FROM pg_listening_channels()"

[[tools]]
name = "ro.lock"
description = "Takes a session-level advisory lock"
use = "main"
statement = "SELECT pg_try_advisory_lock({{{{ inputs.k }}}}) AS locked"
inputs.k = {{ type = "integer", required = true }}

[[tools]]
name = "ro.lock_then_fail"
description = "Takes a session-level advisory lock, then fails (division by zero)"
use = "main"
statement = "SELECT pg_try_advisory_lock({{{{ inputs.k }}}})::int + 1 / (random() * 0)::int AS locked"
inputs.k = {{ type = "integer", required = true }}

[[tools]]
name = "rw.set"
description = "Sets a session variable, as a writer"
use = "main"
read_only = false
statement = "SELECT set_config('hangar.secret', {{{{ inputs.v }}}}, false) AS v"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "rw.get"
description = "Reads a session variable, as a writer"
use = "main"
read_only = false
statement = "SELECT current_setting('hangar.secret', true) AS v, current_setting('statement_timeout') AS timeout"

[[tools]]
name = "pg.num"
description = "Binds a numeric"
use = "main"
statement = "SELECT {{{{ inputs.n }}}}::numeric AS n"
inputs.n = {{ type = "string", required = true }}

[[tools]]
name = "pg.float_num"
description = "Binds a JSON number as numeric"
use = "main"
statement = "SELECT {{{{ inputs.n }}}}::numeric AS n"
inputs.n = {{ type = "number", required = true }}

[[tools]]
name = "pg.sleep"
description = "Sleeps"
use = "sleepy"
statement = "SELECT 1 AS slept, '{TAG}' AS tag FROM pg_sleep({{{{ inputs.s }}}})"
inputs.s = {{ type = "number", required = true }}
"""


@pytest.fixture(scope="module")
def pg(start_server):
    psql(PG_SETUP)
    s = start_server(plugins=("echo",), config=PG_CONFIG, env={"DATABASE_URL": DATABASE_URL})
    yield s
    psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


@pytest.fixture
def mcp(pg):
    c = Mcp(pg.url)
    c.initialize()
    return c


def canary():
    return psql(f"SELECT string_agg(v, ',' ORDER BY id) FROM {SCHEMA}.canary")


def test_read_only_tool_cannot_make_a_later_write_succeed(mcp):
    assert canary() == "a,b"
    # The pool has one connection: every call below shares its session.
    rows(mcp.call("ro.read_write_on", {}))
    message = error(mcp.call("ro.insert", {"v": "mallory"}), "connector")
    assert "read-only transaction" in message
    assert canary() == "a,b"


@pytest.mark.parametrize("setter, getter", [("ro.set", "ro.get"), ("rw.set", "rw.get")])
def test_session_settings_do_not_leak_to_the_next_call(mcp, setter, getter):
    assert rows(mcp.call(setter, {"v": "alice-only"})) == [{"v": "alice-only"}]
    [row] = rows(mcp.call(getter, {}))
    assert row["v"] in (None, ""), row


def test_failed_read_only_statement_leaves_no_session_state(mcp):
    # The statement's error aborts its transaction: the rollback that ends
    # the call must still undo what it set, on the (only) connection that
    # the next calls get.
    assert "division by zero" in error(mcp.call("ro.set_then_fail", {"v": "bob-only"}), "connector")
    [row] = rows(mcp.call("ro.get", {}))
    assert row["v"] in (None, ""), row
    assert "read-only transaction" in error(mcp.call("ro.insert", {"v": "eve"}), "connector")
    assert canary() == "a,b"


def test_read_only_call_leaves_no_listen_behind(mcp):
    # LISTEN is allowed in a read-only transaction and outlives it when it
    # commits; the pool's one session must not keep it for the next caller.
    rows(mcp.call("ro.listen", {}))
    assert rows(mcp.call("ro.listening", {})) == [{"n": 0}]


def advisory_locks_held(key):
    return int(psql(f"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = {key}"))


def test_read_only_call_keeps_no_advisory_lock(mcp):
    key = 70_000 + os.getpid() % 10_000
    assert rows(mcp.call("ro.lock", {"k": key})) == [{"locked": True}]
    assert advisory_locks_held(key) == 0
    assert "division by zero" in error(mcp.call("ro.lock_then_fail", {"k": key}), "connector")
    assert advisory_locks_held(key) == 0
    assert rows(mcp.call("ro.lock", {"k": key})) == [{"locked": True}]
    assert advisory_locks_held(key) == 0


def test_writer_session_reset_keeps_the_configured_timeout(mcp):
    rows(mcp.call("rw.set", {"v": "x"}))
    [row] = rows(mcp.call("rw.get", {}))
    assert row["timeout"] == "4s"


@pytest.mark.parametrize("text, expected", [
    ("12345678901234567890.000000000000000000005", "12345678901234567890.000000000000000000005"),
    ("1.5e3", "1500"),
    ("-2.50E-2", "-0.0250"),
    ("9" * 12000, "9" * 12000),
    ("1" + "0" * 131071, "1" + "0" * 131071),
    ("0." + "0" * 16382 + "1", "0." + "0" * 16382 + "1"),
], ids=["exact", "exponent", "negative-exponent", "12000-digits", "131072-digits", "scale-16383"])
def test_numeric_binds_exactly_up_to_postgres_limits(mcp, text, expected):
    assert rows(mcp.call("pg.num", {"n": text})) == [{"n": expected}]


def test_float_arguments_bind_as_numeric(mcp):
    assert rows(mcp.call("pg.float_num", {"n": 1e-7})) == [{"n": "0.0000001"}]
    assert rows(mcp.call("pg.float_num", {"n": 1e20})) == [{"n": "100000000000000000000"}]


@pytest.mark.parametrize("text, says", [
    ("0." + "0" * 131070 + "1", "131071 digits after the decimal point"),
    ("1" + "0" * 131072, "131073 digits before the decimal point"),
    ("7" * 12001, "12001 significant digits"),
    ("9" * 200_000, "longer than PostgreSQL holds"),
    ("1e999999999", "digits before the decimal point"),
    ("12abc", "not a decimal number"),
], ids=["scale-131071", "131073-digits", "12001-digits", "200000-chars", "huge-exponent", "not-a-number"])
def test_numeric_past_postgres_limits_is_a_validate_error(mcp, text, says):
    message = error(mcp.call("pg.num", {"n": text}), "validate")
    assert message.startswith("validate: n: cannot be bound as numeric: "), message[:200]
    assert says in message, message[:300]
    assert len(message) < 400


def active_sleeps():
    """Sleeps running now. `query` is a session's last statement, also once it
    is idle: a call dropped after preparing its statement and before running
    it leaves a pooled connection whose last query is the sleep's text (the
    Parse sets it), with nothing running; counting it made the test wait the
    full minute (seen under parallel test workers)."""
    return int(psql(f"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%{TAG}%' "
                    f"AND state = 'active' AND pid <> pg_backend_pid()"))


def test_postgres_statement_of_a_client_that_hung_up_is_cancelled(pg, mcp):
    hang_up_many(pg, "pg.sleep", {"s": 60}, clients=4)
    wait_for(lambda: active_sleeps() == 0, 60, "the abandoned statements to be cancelled")
    for _ in range(4):
        assert rows(mcp.call("pg.sleep", {"s": 0})) == [{"slept": 1, "tag": TAG}]
    assert canary() == "a,b"


class HangingOnceProxy:
    """A TCP proxy in front of PostgreSQL. Once armed, it takes the next
    connection and never answers it (a server that hangs: the client waits
    for the answer to its first message, TLS or not); every other
    connection it passes on."""

    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = False
        self.held = []
        self.since_armed = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.armed or self.held:
                self.since_armed += 1
            if self.armed:
                self.armed = False
                self.held.append(conn)  # kept open, never answered
                continue
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        upstream = socket.create_connection(self.upstream)

        def pipe(src, dst):
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pipe, args=(conn, upstream), daemon=True).start()
        pipe(upstream, conn)

    def close(self):
        self.listener.close()
        for conn in self.held:
            conn.close()


def test_a_cancel_request_the_server_never_answers_is_sent_again(start_server):
    """The cancel of an abandoned statement goes over a connection of its
    own. One that hangs (the server takes it and never answers) is given up
    after a while and sent again, so the statement still ends; before, the
    first one waited for good, holding the abandoned connection while its
    statement ran to the end."""
    url = urlsplit(DATABASE_URL)
    proxy = HangingOnceProxy(url.hostname, url.port or 5432)
    tag = f"hangar-held-cancel-{os.getpid()}"
    config = f"""
[connectors.held]
kind = "postgres"
url = "postgres://{url.username or 'postgres'}@127.0.0.1:{proxy.port}{url.path}"
pool_size = 2
statement_timeout_ms = 120000

[[tools]]
name = "held.sleep"
description = "Sleeps"
use = "held"
statement = "SELECT 1 AS slept, '{tag}' AS tag FROM pg_sleep({{{{ inputs.s }}}})"
inputs.s = {{ type = "number", required = true }}
"""

    def running():
        return int(psql(f"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%{tag}%' "
                        f"AND state = 'active' AND pid <> pg_backend_pid()"))

    try:
        def runs_then_arm():
            wait_for(lambda: running() == 1, 20, "the statement to run")
            # The one new connection Hangar opens from here is the cancel's.
            proxy.armed = True

        s = start_server(plugins=("echo",), config=config)
        hang_up(s, "held.sleep", {"s": 60}, until=runs_then_arm)
        wait_for(lambda: running() == 0, 20, "the statement whose first cancel hung to be cancelled")
        assert len(proxy.held) == 1 and proxy.since_armed >= 2, (len(proxy.held), proxy.since_armed)
    finally:
        proxy.close()


# --------------------------------------------------------------------- TLS

@pytest.fixture(scope="module")
def tls_postgres():
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    chain = b"".join(blob.bytes() for blob in cert.cert_chain_pems)
    pg = PrivatePostgres(
        settings={"ssl": "on", "ssl_cert_file": "{dir}/server.crt", "ssl_key_file": "{dir}/server.key"},
        files={"server.crt": (chain, 0o644), "server.key": (cert.private_key_pem.bytes(), 0o600)})
    pg.ctl("start")
    ca_file = pg.path("ca.pem")
    ca.cert_pem.write_to_path(str(ca_file))
    yield pg, ca_file
    pg.close()


def test_postgres_tls_modes(start_server, tls_postgres):
    pg, ca_file = tls_postgres
    ip = f"postgres://postgres@127.0.0.1:{pg.port}/postgres"
    # The certificate names 127.0.0.1 only: "localhost" is the wrong name.
    by_name = f"postgres://postgres@localhost:{pg.port}/postgres?hostaddr=127.0.0.1"
    connectors = {
        "plain": (f"{ip}?sslmode=disable", ""),
        "default": (ip, ""),
        "required": (f"{ip}?sslmode=require", ""),
        "verified": (ip, f'sslmode = "verify-full"\nca_file = "{ca_file}"'),
        "url_root": (f"{ip}?sslmode=verify-full&sslrootcert={ca_file}", ""),
        "unknown_ca": (f"{ip}?sslmode=verify-full", ""),
        "wrong_name": (by_name, f'sslmode = "verify-full"\nca_file = "{ca_file}"'),
        "ca_only": (by_name, f'sslmode = "verify-ca"\nca_file = "{ca_file}"'),
    }
    config = ""
    for name, (url, extra) in connectors.items():
        config += f"""
[connectors.{name}]
kind = "postgres"
url = "{url}"
wait_timeout_ms = 3000
{extra}

[[tools]]
name = "{name}.tls"
description = "Whether this session is encrypted"
use = "{name}"
statement = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
"""
    s = start_server(plugins=("echo",), config=config)
    c = Mcp(s.url)
    c.initialize()
    assert rows(c.call("plain.tls", {})) == [{"ssl": False}]
    for name in ("default", "required", "verified", "url_root", "ca_only"):
        assert rows(c.call(f"{name}.tls", {})) == [{"ssl": True}], name
    message = error(c.call("unknown_ca.tls", {}), "connector")
    assert "database unavailable" in message and "UnknownIssuer" in message, message
    message = error(c.call("wrong_name.tls", {}), "connector")
    assert "database unavailable" in message and "not valid for name" in message, message


def test_unknown_sslmode_stops_the_config(tmp_path):
    from conftest import run_hangar
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f"""
[server]
cache_dir = "{tmp_path / 'cache'}"
[connectors.main]
kind = "postgres"
url = "postgres://db/app?sslmode=allow"
""")
    (tmp_path / "plugins").mkdir()
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode != 0
    assert 'sslmode "allow" is not one of disable, prefer, require, verify-ca, verify-full' in out.stderr
