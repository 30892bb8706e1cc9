"""DB abuse drivers for scripts/abuse: hostile numeric strings, SQL injection
payloads, clients hanging up mid-query (SQLite and PostgreSQL), and a
canary table on each database whose rows must come out unchanged.

    run(target=None) -> list[dict]

`target` is what to drive:
  None         start `hangar serve` (HANGAR_BIN) with CONFIG, stop it after;
  "http://…"   a running Hangar that serves config(init, with_pg) with
               DATABASE_URL set (its SQLite init script written by the caller);
  a callable   factory(config_text, env) -> base URL, for the caller's own
               server handling (abuse.py's); the caller stops it.

Each row is one driver on one database:
  {"driver", "database", "inputs", "answered", "clear_errors", "unclear",
   "crashes", "rows_lost_or_altered", "detail"}
inputs = calls tried; answered = results; clear_errors = JSON-RPC -32000
errors whose message names the stage and stays short; unclear = anything
else (5xx, no JSON-RPC answer, a dropped connection, an error of another
code) — goal 0, as for crashes (server gone, /healthz not answering, or a
`panicked at` line in its log when this script owns it) and for
rows_lost_or_altered (canary rows whose text changed or that vanished).

PostgreSQL comes from DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test)
and is set up with psql; without one, only SQLite rows are given.

Standalone: `python3 scripts/abuse_db.py [--json]` prints the rows.
"""

import argparse
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
PAYLOADS = (ROOT / "tests/sql_injection_payloads.txt").read_text().splitlines()
SCHEMA = "hangar_abuse_db"
CANARY_ROWS = [f"canary-{i}: {'x' * i}" for i in range(1, 21)]
# A statement that counts for minutes unless stopped.
COUNT_TO = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
            "WHERE x < {{ inputs.n }}) SELECT count(*) AS n FROM c")
HANGUPS = 12
SLEEP_TAG = "hangar-abuse-db-sleep"
MAX_CLEAR_MESSAGE = 600

SQLITE_INIT = ("CREATE TABLE canary (id INTEGER PRIMARY KEY, v TEXT NOT NULL);\n"
               "CREATE TABLE notes (id INTEGER PRIMARY KEY, v TEXT NOT NULL);\n") + "".join(
    f"INSERT INTO canary (v) VALUES ('{v}');\n" for v in CANARY_ROWS)

PG_SETUP = f"""
DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;
CREATE SCHEMA {SCHEMA};
CREATE TABLE {SCHEMA}.canary (id serial PRIMARY KEY, v text NOT NULL);
CREATE TABLE {SCHEMA}.notes (id serial PRIMARY KEY, v text NOT NULL);
INSERT INTO {SCHEMA}.canary (v) VALUES {", ".join(f"('{v}')" for v in CANARY_ROWS)};
"""


def config(sqlite_init: Path, with_pg: bool) -> str:
    text = f"""
[connectors.lite]
kind = "sqlite"
path = "abuse-db.sqlite3"
init = "{sqlite_init}"
pool_size = 2
statement_timeout_ms = 60000

[[tools]]
name = "lite.find"
description = "Canary rows by exact text"
use = "lite"
statement = "SELECT id, v FROM canary WHERE v = {{{{ inputs.v }}}}"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "lite.search"
description = "Canary rows containing a text"
use = "lite"
statement = "SELECT id, v FROM canary WHERE v LIKE '%' || {{{{ inputs.v }}}} || '%' ORDER BY id"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "lite.canary"
description = "Every canary row"
use = "lite"
statement = "SELECT id, v FROM canary ORDER BY id"

[[tools]]
name = "lite.note"
description = "Stores a text"
use = "lite"
read_only = false
statement = "INSERT INTO notes (v) VALUES ({{{{ inputs.v }}}}) RETURNING id, v"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "lite.note_get"
description = "A stored text"
use = "lite"
statement = "SELECT id, v FROM notes WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}

[[tools]]
name = "lite.count"
description = "Counts to n, slowly"
use = "lite"
statement = "{COUNT_TO}"
inputs.n = {{ type = "integer", required = true }}
"""
    if with_pg:
        text += f"""
[connectors.pg]
kind = "postgres"
url = "{{{{ env.DATABASE_URL }}}}"
pool_size = 2
statement_timeout_ms = 60000

[[tools]]
name = "pg.find"
description = "Canary rows by exact text"
use = "pg"
statement = "SELECT id, v FROM {SCHEMA}.canary WHERE v = {{{{ inputs.v }}}}"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "pg.search"
description = "Canary rows containing a text"
use = "pg"
statement = "SELECT id, v FROM {SCHEMA}.canary WHERE v LIKE '%' || {{{{ inputs.v }}}} || '%' ORDER BY id"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "pg.canary"
description = "Every canary row"
use = "pg"
statement = "SELECT id, v FROM {SCHEMA}.canary ORDER BY id"

[[tools]]
name = "pg.note"
description = "Stores a text"
use = "pg"
read_only = false
statement = "INSERT INTO {SCHEMA}.notes (v) VALUES ({{{{ inputs.v }}}}) RETURNING id, v"
inputs.v = {{ type = "string", required = true }}

[[tools]]
name = "pg.note_get"
description = "A stored text"
use = "pg"
statement = "SELECT id, v FROM {SCHEMA}.notes WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}

[[tools]]
name = "pg.num"
description = "Binds a numeric"
use = "pg"
statement = "SELECT {{{{ inputs.n }}}}::numeric AS n"
inputs.n = {{ type = "string", required = true }}

[[tools]]
name = "pg.sleep"
description = "Sleeps"
use = "pg"
statement = "SELECT 1 AS slept, '{SLEEP_TAG}' AS tag FROM pg_sleep({{{{ inputs.s }}}})"
inputs.s = {{ type = "number", required = true }}
"""
    return text


def hostile_numerics() -> list[str]:
    return [
        "0." + "0" * 131_070 + "1", "0." + "0" * 16_382 + "1", "1" + "0" * 131_072,
        "1" + "0" * 131_071, "9" * 12_001, "9" * 12_000, "7" * 500_000, "0" * 200_000 + "1",
        "1e131072", "1e131071", "1e-16384", "1e-16383", "1e999999999", "1e-999999999", "1e99999999999",
        "-0", "+0.000", "NaN", "Infinity", "-Infinity", "nan", "inf", "", " ", "-", "+", ".", "..", "1.2.3",
        "--1", "1e", "e1", "1e+", "0x1F", "1_000", "١٢٣", "１２３", "12\u00a0", "1,5", "1;DROP TABLE x",
        "' OR 1=1 --", "\x00", "1\x00", "9" * 64 + "." + "9" * 64, "-" + "9" * 1000 + "e-500",
    ]


# ------------------------------------------------------------------- HTTP

class Target:
    def __init__(self, url: str, log: Path | None = None, proc=None):
        parts = urllib.parse.urlsplit(url)
        self.url = url.rstrip("/")
        self.host, self.port = parts.hostname, parts.port or 80
        self.log, self.proc = log, proc
        self.next_id = 0

    def mcp(self, tool: str, args: dict, timeout: float = 60):
        """(kind, message): kind is result, clear, unclear."""
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": tool, "arguments": args}})
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            conn.request("POST", "/mcp", body, {"content-type": "application/json",
                                                "accept": "application/json, text/event-stream"})
            resp = conn.getresponse()
            raw = resp.read().decode("utf-8", "replace")
            conn.close()
        except OSError as e:
            return "unclear", f"connection: {e}"
        if resp.status >= 500:
            return "unclear", f"HTTP {resp.status}"
        if raw.startswith("event:") or raw.startswith("data:"):
            raw = [line[6:] for line in raw.splitlines() if line.startswith("data: ")][-1]
        try:
            msg = json.loads(raw)
        except ValueError:
            return "unclear", f"not JSON: {raw[:80]!r}"
        if "result" in msg:
            if msg["result"].get("isError"):
                return "unclear", "isError result"
            return "result", msg["result"].get("structuredContent", {}).get("rows")
        err = msg.get("error", {})
        message = err.get("message", "")
        stage = err.get("data", {}).get("stage")
        if err.get("code") == -32000 and stage and len(message) <= MAX_CLEAR_MESSAGE:
            return "clear", message
        return "unclear", f"{err.get('code')}: {message[:120]}"

    def hang_up(self, tool: str, args: dict, after: float = 0.3):
        body = json.dumps(args)
        with socket.create_connection((self.host, self.port)) as s:
            s.sendall((f"POST /tools/{tool}/call HTTP/1.1\r\nHost: {self.host}\r\n"
                       f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
            time.sleep(after)

    def healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            return False
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
            conn.request("GET", "/healthz")
            ok = conn.getresponse().status < 500
            conn.close()
            return ok
        except OSError:
            return False

    def panics(self) -> int:
        if not self.log or not self.log.exists():
            return 0
        return sum("panicked at" in line for line in self.log.read_text(errors="replace").splitlines())


def digest(rows) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def canary_damage(before, after) -> int:
    """Canary rows gone or changed (new rows count too)."""
    if before is None or after is None:
        return len(CANARY_ROWS)
    old = {r["id"]: r["v"] for r in before}
    new = {r["id"]: r["v"] for r in after}
    changed = sum(1 for k, v in old.items() if new.get(k) != v)
    return changed + len(set(new) - set(old))


# ---------------------------------------------------------------- drivers

def tally(target: Target, calls) -> dict:
    counts = {"inputs": 0, "answered": 0, "clear_errors": 0, "unclear": 0}
    examples = []
    for tool, args in calls:
        kind, what = target.mcp(tool, args)
        counts["inputs"] += 1
        counts[{"result": "answered", "clear": "clear_errors", "unclear": "unclear"}[kind]] += 1
        if kind == "unclear" and len(examples) < 3:
            examples.append(str(what)[:100])
    return counts, examples


def row(driver, database, counts, crashes, lost, detail) -> dict:
    return {"driver": driver, "database": database, **counts, "crashes": crashes,
            "rows_lost_or_altered": lost, "detail": detail}


def drive(target: Target, with_pg: bool) -> list[dict]:
    rows = []
    dbs = ["lite"] + (["pg"] if with_pg else [])
    canary_before = {db: target.mcp(f"{db}.canary", {})[1] for db in dbs}
    panics_before = target.panics()

    def crashed():
        return int(not target.healthy()) + max(0, target.panics() - panics_before)

    if with_pg:
        counts, bad = tally(target, [("pg.num", {"n": n}) for n in hostile_numerics()])
        rows.append(row("hostile numeric strings", "postgres", counts, crashed(), 0,
                        "; ".join(bad) or "each answered exactly or with a validate error"))
    for db, name in (("lite", "sqlite"), ("pg", "postgres")):
        if db not in dbs:
            continue
        calls = [(f"{db}.find", {"v": p}) for p in PAYLOADS] + [(f"{db}.search", {"v": p}) for p in PAYLOADS]
        counts, bad = tally(target, calls)
        # Stored by a writer, then read back: the text must come out as sent.
        altered = 0
        for p in PAYLOADS:
            counts["inputs"] += 1
            kind, stored = target.mcp(f"{db}.note", {"v": p})
            if kind != "result":
                counts["clear_errors" if kind == "clear" else "unclear"] += 1
                continue
            counts["answered"] += 1
            [note] = stored
            kind, read = target.mcp(f"{db}.note_get", {"id": note["id"]})
            altered += int(note["v"] != p or kind != "result" or read != [{"id": note["id"], "v": p}])
        after = target.mcp(f"{db}.canary", {})[1]
        rows.append(row("SQL injection payloads", name, counts, crashed(),
                        canary_damage(canary_before[db], after) + altered,
                        "; ".join(bad) or f"{len(PAYLOADS)} payloads as exact and LIKE values, "
                        "and stored by a writer and read back"))
    hangups = [("lite", "sqlite", "lite.count", {"n": 10_000_000_000}, "lite.canary")]
    if with_pg:
        hangups.append(("pg", "postgres", "pg.sleep", {"s": 60}, "pg.canary"))
    for db, name, tool, args, probe in hangups:
        threads = [threading.Thread(target=target.hang_up, args=(tool, args)) for _ in range(HANGUPS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Later callers must be served: every hung-up statement stopped and
        # its connection back (or replaced).
        counts, bad = tally(target, [(probe, {})] * 6)
        counts["inputs"] += HANGUPS
        after = target.mcp(f"{db}.canary", {})[1]
        detail = "; ".join(bad) or f"{HANGUPS} hang-ups, then 6 calls answered"
        if db == "pg":
            lingering = still_sleeping()
            counts["unclear"] += lingering
            detail += f"; {lingering} abandoned statements still running after 15 s"
        rows.append(row("clients hanging up mid-query", name, counts, crashed(),
                        canary_damage(canary_before[db], after), detail))
    return rows


# ----------------------------------------------------------------- set-up

def pg_available() -> bool:
    if not shutil.which("psql"):
        return False
    out = subprocess.run(["psql", DATABASE_URL, "-qAt", "-c", "SELECT 1"], capture_output=True, text=True,
                         timeout=30)
    return out.returncode == 0


def psql(sql: str):
    out = subprocess.run(["psql", DATABASE_URL, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)


def still_sleeping(wait: float = 15) -> int:
    """Abandoned pg_sleep statements still running once `wait` s have passed."""
    query = (f"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%{SLEEP_TAG}%' "
             "AND pid <> pg_backend_pid()")
    deadline = time.monotonic() + wait
    while True:
        out = subprocess.run(["psql", DATABASE_URL, "-qAt", "-c", query], capture_output=True, text=True,
                             timeout=60)
        n = int(out.stdout.strip() or 0)
        if n == 0 or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_own(config_text: str, env: dict, workdir: Path) -> Target:
    (workdir / "plugins").mkdir(exist_ok=True)
    cfg = workdir / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{workdir / "cache"}"\n' + config_text)
    port = free_port()
    log = workdir / "hangar.log"
    proc = subprocess.Popen([str(HANGAR), "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}",
                             "--plugins", str(workdir / "plugins")],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=workdir,
                            env={**os.environ, "NO_COLOR": "1", **env})
    target = Target(f"http://127.0.0.1:{port}", log, proc)
    deadline = time.monotonic() + 60
    while not target.healthy():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("hangar did not start:\n" + log.read_text())
        time.sleep(0.1)
    return target


def run(target=None) -> list[dict]:
    with_pg = pg_available()
    if with_pg:
        psql(PG_SETUP)
    workdir = Path(tempfile.mkdtemp(prefix="hangar-abuse-db-"))
    init = workdir / "init.sql"
    init.write_text(SQLITE_INIT)
    text, env = config(init, with_pg), {"DATABASE_URL": DATABASE_URL}
    own = None
    try:
        if target is None:
            own = start_own(text, env, workdir)
            t = own
        elif callable(target):
            t = Target(target(text, env))
        else:
            t = Target(target)
        return drive(t, with_pg)
    finally:
        if own is not None:
            own.proc.terminate()
            try:
                own.proc.wait(10)
            except subprocess.TimeoutExpired:
                own.proc.kill()
        if with_pg:
            psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        shutil.rmtree(workdir, ignore_errors=True)


COLUMNS = ["driver", "database", "inputs", "answered", "clear_errors", "unclear", "crashes",
           "rows_lost_or_altered", "detail"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    rows = run()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        for r in rows:
            print("| " + " | ".join(str(r[c]) for c in COLUMNS) + " |")
    bad = sum(r["crashes"] + r["rows_lost_or_altered"] + r["unclear"] for r in rows)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
