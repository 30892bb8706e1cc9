"""Drives scripts/bench: Hangar and the baseline under wrk, alternating,
and reports ratios measured in the same run (these machines are noisy)."""

import argparse
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = ROOT / "target/release/hangar"
BASELINE = ROOT / "target/release/hangar-baseline"
DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
WORK = Path(tempfile.mkdtemp(prefix="hangar-bench-"))

ECHO_MCP = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
ECHO_REST = '{"text":"hello"}'
PIPE_MCP = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p4.echo","arguments":{"text":" Hello "}}}'
# The same pipeline with every stage's plugin opted into warm instances.
PIPE_WARM_MCP = PIPE_MCP.replace("p4.echo", "p4w.echo")
# The echo tool of a plugin opted into warm instances.
ECHO_WARM_MCP = ECHO_MCP.replace('"echo"', '"w.echo"')
API_KEY = "bench-key"
PY_FRESH = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"py.greet","arguments":{"name":"Ada"}}}'
PY_WARM = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"warm.py.greet","arguments":{"name":"Ada"}}}'
DB_MCP = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench.item","arguments":{"id":%d}}}'
DB_BASE = '{"id":%d}'
# The outbound-call scenario: the guest (tests' http-fetch plugin) fetches
# the baseline's GET /hello; the baseline's POST /fetch makes the same request.
FETCH_MCP = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fetch",'
             '"arguments":{"url":"http://127.0.0.1:%d/hello"}}}')
TEST_PLUGINS = ROOT / "target/test-plugins"
# The same echo as a plain component's typed export (`echo: func(text: string)
# -> string`, tests' typed-echo, built slim like the echo plugin).
TYPED_MCP = ECHO_MCP.replace('"echo"', '"typed-echo.echo"')
# search_tools over the 500-tool catalog, with a typo to correct.
SEARCH_MCP = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools",'
              '"arguments":{"query":"delte a warehouse","limit":3}}}')
SEARCH_DOMAINS = {
    "billing": ["invoice", "payment", "refund", "subscription", "coupon"],
    "crm": ["contact", "company", "deal", "lead", "note"],
    "inventory": ["product", "warehouse", "stock_level", "supplier", "purchase_order"],
    "shipping": ["shipment", "carrier", "label", "return", "pickup"],
    "support": ["ticket", "agent", "macro", "satisfaction_survey", "knowledge_article"],
    "hr": ["employee", "payroll", "vacation", "review", "candidate"],
    "marketing": ["campaign", "email", "segment", "landing_page", "ab_test"],
    "analytics": ["dashboard", "report", "metric", "funnel", "cohort"],
    "identity": ["user", "role", "session", "api_token", "group"],
    "storage": ["file", "bucket", "folder", "backup", "quota"],
}
SEARCH_ACTIONS = {
    "list": "List all {many}", "get": "Fetch one {one} by its id", "create": "Create a new {one}",
    "update": "Update the fields of an existing {one}", "delete": "Delete a {one} permanently",
    "search": "Search {many} by a text query", "export": "Export {many} to a CSV file",
    "archive": "Archive an old {one}", "restore": "Restore an archived {one}",
    "count": "Count how many {many} there are",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout, what):
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def wait_http(url, proc, timeout=120):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.args}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return time.monotonic() - start
        except Exception as e:  # noqa: BLE001 - any failure means not up yet
            if getattr(e, "code", None):  # an HTTP error status means it is up
                return time.monotonic() - start
            time.sleep(0.005)
    raise SystemExit(f"{url} did not come up")


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def lua_script(name, body, unique=False, headers=None):
    """A wrk script posting `body`; with `unique`, each request a new id."""
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"',
             'wrk.headers["Accept"] = "application/json, text/event-stream"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in (headers or {}).items()]
    if unique:
        lines += ["local n = 0", "local tid = 0",
                  "function setup(thread) thread:set('tid', tid); tid = tid + 1 end",
                  "local base = tonumber(os.getenv('BENCH_BASE') or '0')",
                  "function request() n = n + 1; "
                  f"return wrk.format(nil, nil, nil, string.format('{body}', base + tid * 50000000 + n)) end"]
    else:
        lines.append(f"wrk.body = '{body}'")
    path = WORK / f"{name}.lua"
    path.write_text("\n".join(lines) + "\n")
    return path


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def wrk(url, script, seconds, connections, threads=2, env=None):
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "-s", str(script), url], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {p: float(v) * UNITS[u] for p, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    total = int(re.search(r"(\d+) requests in", out).group(1))
    if non2xx:
        raise SystemExit(f"{url}: {non2xx.group(0)}\n{out}")
    return {"rps": rps, "p50": lat.get("50"), "p99": lat.get("99"), "total": total,
            "errors": errors.group(1) if errors else ""}


def drive(url, script, calls, connections):
    """Sends at least `calls` requests (wrk runs by time, so in chunks); returns how many."""
    sent = 0
    while sent < calls:
        probe = wrk(url, script, 2, connections)
        sent += probe["total"]
        if sent >= calls:
            break
        seconds = max(1, min(30, int((calls - sent) / max(probe["rps"], 1)) + 1))
        sent += wrk(url, script, seconds, connections)["total"]
    return sent


def warn_dropped_spans(*servers):
    """Says so when a stopped traced server threw spans away (its batch
    queue was full: the exporter thread got too little of the cores): its
    figure then leaves out part of the cost of exporting them. The SDK
    logs the count when the server shuts down."""
    for server in servers:
        text = Path(server.log.name).read_text(errors="replace")
        dropped = sum(int(n) for n in re.findall(r"dropped_span_count\W*(\d+)", text))
        if dropped:
            print(f"warning: {server.log.name} dropped {dropped} spans (batch queue full); "
                  "the traced figure is optimistic", flush=True)


def check_once(url, body, headers=None):
    """One request by hand first: a scenario must measure successes, and a
    JSON-RPC error also comes with HTTP 200."""
    import json
    req = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream", **(headers or {})})
    reply = json.loads(urllib.request.urlopen(req).read())
    result = reply.get("result", reply)
    if "error" in reply or result.get("isError"):
        raise SystemExit(f"{url} answered an error: {reply}")


# Every process the bench started, so that a run that stops early (a failed
# check, Ctrl-C) does not leave servers behind, idle but ticking, to weigh on
# the next run.
STARTED = []


class Proc:
    def __init__(self, args, health, env=None, cwd=None):
        self.log = open(WORK / f"{Path(args[0]).name}-{time.monotonic_ns()}.log", "w")
        # A variable given as None is left out of the environment.
        env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env, cwd=cwd)
        STARTED.append(self)
        self.startup = wait_http(health, self.proc)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def hangar_config(cache_dir, extra="", server_extra=""):
    cfg = WORK / f"hangar-{time.monotonic_ns()}.toml"
    cfg.write_text(f"""
[server]
cache_dir = "{cache_dir}"
max_instances = 512
{server_extra}

[connectors.bench]
kind = "postgres"
url = "{DATABASE_URL}"
pool_size = 16
# Plain TCP, as the baseline's pool (NoTls): with the default `prefer`, a
# server with ssl = on would make this side alone pay for TLS on both ends.
sslmode = "disable"

[[tools]]
name = "bench.item"
description = "One bench item by id"
use = "bench"
statement = "SELECT id, name FROM bench_items WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}
cache = {{ ttl = "600s" }}

# The 4-stage pipeline: auth + input mapper + echo + output mapper.
[plugins.api-key]
config = {{ keys = "bench={API_KEY}" }}
[plugins.echo4]
prefix = "p4."
[plugins.py-greet-warm]
prefix = "warm."
instances = {{ reuse = true, max_calls = 100000, max_idle = "60s" }}

[[tools]]
name = "p4.echo"
auth = {{ plugin = "api-key" }}
mappers = {{ input = "normalize", output = "redact" }}

# The 4-stage pipeline again, every plugin opted into warm instances.
[plugins.api-key-warm]
config = {{ keys = "bench={API_KEY}" }}
instances = {{ reuse = true, max_calls = 100000 }}
[plugins.normalize-warm]
instances = {{ reuse = true, max_calls = 100000 }}
[plugins.redact-warm]
instances = {{ reuse = true, max_calls = 100000 }}
[plugins.echo4w]
prefix = "p4w."
instances = {{ reuse = true, max_calls = 100000 }}
[plugins.echow]
prefix = "w."
instances = {{ reuse = true, max_calls = 100000 }}

[[tools]]
name = "p4w.echo"
auth = {{ plugin = "api-key-warm" }}
mappers = {{ input = "normalize-warm", output = "redact-warm" }}
{extra}
""")
    return cfg


def start_hangar(plugins_dir, cache_dir, extra="", server_extra="", env=None):
    port = free_port()
    cfg = hangar_config(cache_dir, extra, server_extra)
    p = Proc([str(HANGAR), "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}",
              "--plugins", str(plugins_dir)], f"http://127.0.0.1:{port}/healthz",
             env={"RUST_LOG": "warn", **(env or {})})
    p.url = f"http://127.0.0.1:{port}"
    return p


def search_catalog_config(cache_dir):
    """500 SQLite tools (as tests/test_catalog.py builds them) behind the meta-tools."""
    parts = [f'[server]\ncache_dir = "{cache_dir}"\ncatalog = "meta"\n',
             f'[connectors.lite]\nkind = "sqlite"\npath = "{WORK / "search.db"}"\n']
    for domain, entities in SEARCH_DOMAINS.items():
        for one in entities:
            many = one + ("es" if one.endswith(("s", "x", "ch")) else "s")
            for action, text in SEARCH_ACTIONS.items():
                description = text.format(one=one.replace("_", " "), many=many.replace("_", " "))
                parts.append(f'[[tools]]\nname = "{domain}.{many}.{action}"\ndescription = "{description}"\n'
                             f'use = "lite"\nstatement = "SELECT 1 AS one"\n')
    cfg = WORK / "search.toml"
    cfg.write_text("\n".join(parts))
    return cfg


def search_over_mcp(seconds):
    """One search_tools query after another over MCP on one connection, HTTP
    included (the host-only figure is search_host_time's)."""
    port = free_port()
    empty = WORK / "plugins-none"
    empty.mkdir(exist_ok=True)
    p = Proc([str(HANGAR), "serve", "--config", str(search_catalog_config(WORK / "search-cache")),
              "--listen", f"127.0.0.1:{port}", "--plugins", str(empty)],
             f"http://127.0.0.1:{port}/healthz", env={"RUST_LOG": "warn"})
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        check_once(url, SEARCH_MCP)
        return wrk(url, lua_script("search-mcp", SEARCH_MCP), seconds, 1, threads=1)
    finally:
        p.stop()


def psql(sql):
    subprocess.run(["psql", DATABASE_URL, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], check=True,
                   capture_output=True)


def plugin_copies(n):
    """`n` distinct components (echo with a unique custom section each) and the
    prefixes that keep their tool names apart."""
    d = WORK / f"plugins-{n}"
    d.mkdir()
    echo = (ROOT / "plugins/echo.wasm").read_bytes()
    extra = ""
    for i in range(n):
        name = f"bench-{i:02}".encode()
        payload = bytes([len(name)]) + name + b"x" * 8
        section = b"\x00" + bytes([len(payload)]) + payload
        (d / f"echo{i:02}.wasm").write_bytes(echo + section)
        extra += f'[plugins.echo{i:02}]\nprefix = "p{i:02}."\n'
    return d, extra


def summarize(samples):
    vals = [s["rps"] for s in samples]
    return {"rps": statistics.median(vals), "min": min(vals), "max": max(vals),
            "p50": statistics.median(s["p50"] for s in samples),
            "p99": statistics.median(s["p99"] for s in samples)}


def main():
    ap = argparse.ArgumentParser()
    # Many short A/B pairs rather than a few long ones: this shared machine's
    # speed shifts by a third for tens of seconds at a time, and a pair that
    # straddles a shift is off by that much. The median of nine 2 s pairs
    # is steadier than the median of three 5 s pairs (one 3x5 s row of the
    # previous BENCHMARKS.md had pair ratios from 0.67 to 1.12).
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--rss-calls", type=int, default=1_000_000)
    ap.add_argument("--write", type=Path, help="also write the results as Markdown to this file")
    ap.add_argument("--only", help="run only the throughput scenarios whose name contains this text "
                    "(a quick look; prints the rows, writes nothing)")
    args = ap.parse_args()

    psql("CREATE TABLE IF NOT EXISTS bench_items (id int PRIMARY KEY, name text NOT NULL);"
         "INSERT INTO bench_items SELECT g, 'item ' || g FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING")
    plugins = WORK / "plugins"
    plugins.mkdir()
    for name in ("echo", "api-key", "normalize", "redact"):
        shutil.copy(ROOT / f"plugins/{name}.wasm", plugins / f"{name}.wasm")
    shutil.copy(ROOT / "plugins/echo.wasm", plugins / "echo4.wasm")
    for name in ("api-key", "normalize", "redact"):
        shutil.copy(ROOT / f"plugins/{name}.wasm", plugins / f"{name}-warm.wasm")
    shutil.copy(ROOT / "plugins/echo.wasm", plugins / "echo4w.wasm")
    shutil.copy(ROOT / "plugins/echo.wasm", plugins / "echow.wasm")
    shutil.copy(ROOT / "plugins/py-greet.wasm", plugins / "py-greet.wasm")
    shutil.copy(ROOT / "plugins/py-greet.wasm", plugins / "py-greet-warm.wasm")
    shutil.copy(TEST_PLUGINS / "http-fetch.wasm", plugins / "http-fetch.wasm")
    shutil.copy(TEST_PLUGINS / "typed-echo.wasm", plugins / "typed-echo.wasm")
    cache = WORK / "cache"

    base_port = free_port()
    fetch_grant = f'[plugins.http-fetch]\ngrants = {{ http = ["127.0.0.1:{base_port}"] }}\n'
    hangar = start_hangar(plugins, cache, fetch_grant)
    baseline = Proc([str(BASELINE), f"127.0.0.1:{base_port}", DATABASE_URL],
                    f"http://127.0.0.1:{base_port}/echo")
    base = f"http://127.0.0.1:{base_port}"

    # The rows that compare observability settings run against servers of
    # their own, started afresh for every round (see Observability).
    collector = {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                 "OTEL_SERVICE_NAME": "hangar-bench"}
    observability = Observability(plugins, cache, fetch_grant, collector)
    # As an operator runs it: no RUST_LOG, so an access line per call, into
    # a file (the other servers run at RUST_LOG=warn).
    logged = start_hangar(plugins, cache, fetch_grant, env={"RUST_LOG": None})
    check_once(logged.url + "/mcp", ECHO_MCP)

    first_id = DB_MCP % 1
    check_once(hangar.url + "/mcp", ECHO_MCP)
    check_once(hangar.url + "/tools/echo/call", ECHO_REST)
    check_once(hangar.url + "/mcp", PIPE_MCP, {"x-api-key": API_KEY})
    check_once(hangar.url + "/mcp", PIPE_WARM_MCP, {"x-api-key": API_KEY})
    check_once(hangar.url + "/mcp", ECHO_WARM_MCP)
    check_once(hangar.url + "/mcp", first_id)
    check_once(base + "/query", DB_BASE % 1)
    check_once(hangar.url + "/mcp", PY_FRESH)
    check_once(hangar.url + "/mcp", PY_WARM)
    check_once(hangar.url + "/mcp", FETCH_MCP % base_port)
    check_once(base + "/fetch", "{}")
    check_once(hangar.url + "/mcp", TYPED_MCP)
    scenarios = [
        ("Rust wasm echo, MCP tools/call", hangar.url + "/mcp", lua_script("echo-mcp", ECHO_MCP),
         "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("Rust wasm echo, instances reused (opt-in), MCP", hangar.url + "/mcp",
         lua_script("echo-warm-mcp", ECHO_WARM_MCP),
         "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("Rust wasm echo, REST POST /tools/echo/call", hangar.url + "/tools/echo/call",
         lua_script("echo-rest", ECHO_REST), "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("4-stage pipeline (api-key auth, normalize, echo, redact), MCP", hangar.url + "/mcp",
         lua_script("pipe-mcp", PIPE_MCP, headers={"x-api-key": API_KEY}),
         "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("4-stage pipeline, every stage's instances reused (opt-in), MCP", hangar.url + "/mcp",
         lua_script("pipe-warm-mcp", PIPE_WARM_MCP, headers={"x-api-key": API_KEY}),
         "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("Python tool (py.greet), fresh instance per call, MCP", hangar.url + "/mcp",
         lua_script("py-fresh", PY_FRESH), "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("Python tool (py.greet), reused instances, MCP", hangar.url + "/mcp",
         lua_script("py-warm", PY_WARM), "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("DB tool, cache hit, MCP", hangar.url + "/mcp", lua_script("db-hit", DB_MCP % 7),
         "bare echo", base + "/echo", lua_script("base-echo", ECHO_MCP), False),
        ("DB tool, cache miss (unique ids), MCP", hangar.url + "/mcp", lua_script("db-miss", DB_MCP, unique=True),
         "in-process query", base + "/query", lua_script("base-query", DB_BASE, unique=True), True),
        ("Rust wasm echo, MCP, default log level (an access line per call, to a file)", logged.url + "/mcp",
         lua_script("echo-logged", ECHO_MCP),
         "the same at RUST_LOG=warn", hangar.url + "/mcp", lua_script("echo-mcp", ECHO_MCP), False),
        ("Outbound HTTP from a guest (wasi:http GET, new connection), MCP", hangar.url + "/mcp",
         lua_script("fetch-mcp", FETCH_MCP % base_port), "same request made by the host", base + "/fetch",
         lua_script("base-fetch", "{}"), False),
        ("Plain component echo (typed export, schema-derived JSON ↔ values), MCP", hangar.url + "/mcp",
         lua_script("typed-echo-mcp", TYPED_MCP), "the same echo through the tool world", hangar.url + "/mcp",
         lua_script("echo-mcp", ECHO_MCP), False),
    ]
    if args.only:
        scenarios = [s for s in scenarios if args.only in s[0]]
    rows = []
    try:
        for name, a_url, a_script, b_name, b_url, b_script, unique in scenarios:
            a_samples, b_samples = [], []
            for run in range(args.runs):
                # Alternate A and B so drift on the machine hits both alike,
                # and which goes first, so neither always runs on the heels of
                # the other (whose server is still tearing down instances or
                # writing its log) or always first.
                env = {"BENCH_BASE": str(1_000_000_000 + run * 100_000_000)} if unique else None
                pair = [(a_samples, a_url, a_script), (b_samples, b_url, b_script)]
                for samples, url, script in pair[::-1] if run % 2 else pair:
                    samples.append(wrk(url, script, args.seconds, args.connections, env=env))
            rows.append(row(name, b_name, a_samples, b_samples))
        wanted = [r for r in OBSERVABILITY_ROWS if not args.only or args.only in r[0]]
        if wanted:
            rows += observability.rounds(wanted, observability_pairs(args.runs), args.seconds, args.connections)
        if args.only:
            return
        # The traced servers' spans did reach the collector (else the ratio measures nothing).
        wait_until(lambda: int(urllib.request.urlopen(base + "/v1/traces").read()) > 0, 10,
                   "spans at the OTLP route")
        logged.stop()

        # Per-call latency of the wasm echo on one connection (no queueing).
        echo_latency = wrk(hangar.url + "/mcp", lua_script("echo-1", ECHO_MCP), args.seconds, 1, threads=1)

        # Per-call latency of the Python tool on one connection (no queueing).
        py_latency = {
            label: wrk(hangar.url + "/mcp", lua_script(f"py-1-{label}", body), args.seconds, 1, threads=1)
            for label, body in (("fresh", PY_FRESH), ("reused", PY_WARM))
        }

        # RSS: idle, after the first 10k calls, and after --rss-calls calls.
        # A fresh server, so the scenarios above do not count.
        hangar.stop()
        hangar = start_hangar(plugins, cache)
        script = lua_script("rss", ECHO_MCP)
        rss_idle = rss_kib(hangar.proc.pid)
        first = drive(hangar.url + "/mcp", script, 10_000, 64)
        rss_10k = rss_kib(hangar.proc.pid)
        total = first + drive(hangar.url + "/mcp", script, args.rss_calls - first, 64)
        rss_1m = rss_kib(hangar.proc.pid)
        echo_ok = urllib.request.urlopen(urllib.request.Request(
            hangar.url + "/tools/echo/call", data=b'{"text":"still"}', method="POST")).status == 200
    finally:
        hangar.stop()
        baseline.stop()
        if args.only:
            logged.stop()
    if args.only:
        return

    # Start-up with 20 plugins: cold (empty compiled cache), then warm.
    many, extra = plugin_copies(20)
    cold_cache = WORK / "cold-cache"
    cold = start_hangar(many, cold_cache, extra)
    cold.stop()
    warm = start_hangar(many, cold_cache, extra)
    warm.stop()
    # And with the Python and JavaScript plugins (12-18 MB each).
    poly = WORK / "plugins-poly"
    poly.mkdir()
    for name in ("py-greet", "py-shout", "js-reverse"):
        shutil.copy(ROOT / f"plugins/{name}.wasm", poly / f"{name}.wasm")
    poly_cache = WORK / "poly-cache"
    poly_cold = start_hangar(poly, poly_cache)
    poly_cold.stop()
    poly_warm = start_hangar(poly, poly_cache)
    poly_warm.stop()

    search_us = search_host_time()
    search_mcp = search_over_mcp(args.seconds)
    report = render(rows, args, rss_idle, (first, rss_10k), (total, rss_1m), echo_ok, cold.startup, warm.startup,
                    (search_us, search_mcp), (poly_cold.startup, poly_warm.startup), py_latency,
                    echo_latency)
    print(report)
    if args.write:
        args.write.write_text(report)
        print(f"written to {args.write}")


def row(name, b_name, a_samples, b_samples):
    """A row of the table: both sides summarized, and the median pair ratio."""
    a, b = summarize(a_samples), summarize(b_samples)
    ratios = [x["rps"] / y["rps"] for x, y in zip(a_samples, b_samples)]
    # Three places: the observability rows' goal sits at 0.95, where two would round either way.
    print(f"{name}: {a['rps']:.0f} req/s vs {b_name} {b['rps']:.0f} → {statistics.median(ratios):.3f} "
          f"(mean of the pair ratios {statistics.mean(ratios):.3f}, {min(ratios):.2f}–{max(ratios):.2f}, "
          f"{len(ratios)} pairs)", flush=True)
    return (name, b_name, a, b, statistics.median(ratios), min(ratios), max(ratios))


# The rows that look for a 5 % difference between two Hangar servers: the
# server named first, against the one with metrics and traces off.
OBSERVABILITY_ROWS = [
    ("Rust wasm echo, MCP, metrics and traces on", "traced"),
    ("Rust wasm echo, MCP, metrics and traces on, 1 trace in 10 sampled", "sampled"),
    ("Rust wasm echo, MCP, metrics on (no traces)", "counted"),
    ("Rust wasm echo, MCP, metrics and traces off, a second server (no change: the noise floor)", "twin"),
]
UNOBSERVED = "the same, metrics and traces off"


class Observability:
    """The servers the observability rows compare: traced (spans of every
    call to the baseline's OTLP route, which counts and discards them),
    sampled (one trace in ten), counted (metrics only), off (neither) and
    its twin (a second server just like it: how far two identical servers
    read apart, the floor under the other rows).

    They are started afresh for every round, in an order that rotates. Two
    identical servers, measured against each other as long-running
    processes, read apart by more than the 5 % these rows look for: the
    twin read 1.058 against the off server over 33 pairs (the 0d3bfb2 run,
    the twin started after it); by hand, the one started first of two read
    0.975 and 0.978, and 1.093 with the order swapped, while servers started
    afresh for every pair, in alternating order, read 1.012. Whatever sets
    a process's speed for its lifetime, it lands whole in a ratio measured
    on one pair of processes; over fresh processes it averages out.
    """

    def __init__(self, plugins, cache, fetch_grant, collector):
        self.plugins, self.cache, self.fetch_grant = plugins, cache, fetch_grant
        self.settings = {
            "traced": {"env": collector},
            "sampled": {"env": {**collector, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                "OTEL_TRACES_SAMPLER_ARG": "0.1"}},
            "counted": {},
            "off": {"server_extra": "metrics = false"},
            "twin": {"server_extra": "metrics = false"},
        }

    def start(self, names, script):
        servers = {}
        for name in names:
            server = start_hangar(self.plugins, self.cache, self.fetch_grant, **self.settings[name])
            check_once(server.url + "/mcp", ECHO_MCP)
            servers[name] = server
        # Each server's first second (instance pool, allocator, first
        # export) is not measured.
        for server in servers.values():
            wrk(server.url + "/mcp", script, 1, 64)
        return servers

    def rounds(self, wanted, count, seconds, connections):
        """`count` rounds; in each, fresh servers and one pair per wanted row
        (which side goes first alternates from round to round)."""
        names = ["off"] + [key for _, key in wanted]
        samples = {key: ([], []) for _, key in wanted}
        script = lua_script("echo-observability", ECHO_MCP)
        for n in range(count):
            turn = n % len(names)
            servers = self.start(names[turn:] + names[:turn], script)
            try:
                for i, (_, key) in enumerate(wanted):
                    pair = [(samples[key][0], servers[key]), (samples[key][1], servers["off"])]
                    for side, server in pair[::-1] if (n + i) % 2 else pair:
                        side.append(wrk(server.url + "/mcp", script, seconds, connections))
            finally:
                for server in servers.values():
                    server.stop()
                warn_dropped_spans(*(servers[k] for k in ("traced", "sampled") if k in servers))
        return [row(name, UNOBSERVED, *samples[key]) for name, key in wanted]


def observability_pairs(runs):
    """Pairs (rounds) for the rows against the server with metrics and
    traces off: about four times as many, so an odd count (the median one
    pair's) stays odd. Two identical servers' pair ratios read from 0.70 to
    1.48 here (1 s runs, 32 pairs): with 17 pairs the median still moved by
    several percent from run to run, as much as the 5 % these rows look for."""
    return 4 * runs - 3


def search_host_time():
    """µs of host time per search_tools query over 500 tools (host/benches/search.rs)."""
    out = subprocess.run(["cargo", "bench", "--quiet", "-p", "hangar", "--bench", "search"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"search_tools_us_per_query ([\d.]+)", out).group(1))


# Goals: ratio to the baseline in the same run (the fast-path issue's for
# echo, the 4-stage pipeline and the DB miss; the operations issue's for
# metrics and traces).
GOALS = {
    "Rust wasm echo, MCP tools/call": 0.60,
    "Rust wasm echo, MCP, metrics and traces on": 0.95,
    "Rust wasm echo, MCP, metrics and traces on, 1 trace in 10 sampled": 0.95,
    "Rust wasm echo, MCP, metrics on (no traces)": 0.95,
    "4-stage pipeline (api-key auth, normalize, echo, redact), MCP": 0.30,
    "DB tool, cache hit, MCP": 0.60,
    "DB tool, cache miss (unique ids), MCP": 0.75,
}
# Goals of one-connection latency (p50, µs).
PY_FRESH_P50_GOAL_US = 1500
ECHO_P50_GOAL_US = 50


def render(rows, args, rss_idle, rss_10k, rss_1m, echo_ok, cold, warm, search, poly, py_latency, echo_latency):
    search_us, search_mcp = search
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    out = [
        "# Hangar benchmarks", "",
        f"Machine: {os.cpu_count()} cores ({cpu}), {mem} GiB, {platform.system()} {platform.release()}; "
        f"Hangar, the baseline and wrk share the cores.",
        f"Command: `scripts/bench --runs {args.runs} --seconds {args.seconds} --connections {args.connections}` "
        f"(wrk -t2 -c{args.connections}, {args.seconds} s per run, A and B alternating, each first in every other "
        f"pair, {args.runs} pairs per row; for the rows against the server with metrics and traces off, "
        f"{observability_pairs(args.runs)} rounds of one pair each, every round on freshly started servers).",
        "", "| scenario | Hangar req/s (min–max) | p50 / p99 ms | baseline | baseline req/s | p50 / p99 ms | ratio (min–max) | goal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, b_name, a, b, r, rmin, rmax in rows:
        goal = GOALS.get(name)
        verdict = "—" if goal is None else f"≥ {goal:.2f} {'met' if r >= goal else 'MISSED'}"
        out.append(f"| {name} | {a['rps']:.0f} ({a['min']:.0f}–{a['max']:.0f}) | {a['p50']:.2f} / {a['p99']:.2f} "
                   f"| {b_name} | {b['rps']:.0f} | {b['p50']:.2f} / {b['p99']:.2f} | **{r:.3f}** ({rmin:.2f}–{rmax:.2f}) | {verdict} |")
    (first, rss_10k), (total, rss_1m) = rss_10k, rss_1m
    fresh, reused = py_latency["fresh"], py_latency["reused"]
    growth = (rss_1m - rss_10k) / rss_10k * 100 if rss_10k else 0
    def met(p50_ms, goal_us):
        return "met" if p50_ms * 1000 <= goal_us else "MISSED"
    out += [
        "", "| one connection (wrk -t1 -c1) | calls/s | p50 | p99 |", "|---|---|---|---|",
        f"| Rust wasm echo, MCP (goal p50 ≤ {ECHO_P50_GOAL_US} µs: {met(echo_latency['p50'], ECHO_P50_GOAL_US)}) "
        f"| {echo_latency['rps']:.0f} | {echo_latency['p50'] * 1000:.0f} µs | {echo_latency['p99'] * 1000:.0f} µs |",
        f"| Python tool, fresh instance per call (goal p50 ≤ {PY_FRESH_P50_GOAL_US} µs: "
        f"{met(fresh['p50'], PY_FRESH_P50_GOAL_US)}) "
        f"| {fresh['rps']:.0f} | {fresh['p50'] * 1000:.0f} µs | {fresh['p99'] * 1000:.0f} µs |",
        f"| Python tool, reused instances (goal p50 ≤ 300 µs: {met(reused['p50'], 300)}) "
        f"| {reused['rps']:.0f} | {reused['p50'] * 1000:.0f} µs | {reused['p99'] * 1000:.0f} µs |",
        "", "| memory | RSS |", "|---|---|",
        f"| idle, after start-up | {rss_idle / 1024:.1f} MiB |",
        f"| after the first {first:,} echo calls | {rss_10k / 1024:.1f} MiB |",
        f"| after {total:,} echo calls | {rss_1m / 1024:.1f} MiB ({growth:+.1f}% vs the first; goal within 5%: "
        f"{'met' if abs(growth) <= 5 else 'MISSED'}) |",
        f"| still answering afterwards | {'yes' if echo_ok else 'NO'} |",
        "", "| start-up with 20 plugins | time to first /healthz answer |", "|---|---|",
        f"| cold (empty compiled cache) | {cold * 1000:.0f} ms |",
        f"| warm (compiled cache) | {warm * 1000:.0f} ms |",
        f"| Python and JS plugins (py-greet, py-shout, js-reverse), cold | {poly[0] * 1000:.0f} ms |",
        f"| Python and JS plugins, warm (goal under 1 s: {'met' if poly[1] < 1 else 'MISSED'}) | {poly[1] * 1000:.0f} ms |",
        "",
        f"search_tools over 500 tools: {search_us:.0f} µs of host time per query (`cargo bench -p hangar --bench search`); "
        f"over MCP on one connection, HTTP included: p50 {search_mcp['p50'] * 1000:.0f} µs, "
        f"p99 {search_mcp['p99'] * 1000:.0f} µs ({search_mcp['rps']:.0f} queries/s).",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    try:
        main()
    finally:
        for proc in STARTED:
            if proc.proc.poll() is None:
                proc.stop()
