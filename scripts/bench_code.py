#!/usr/bin/env python3
"""Code mode (`run`) measured: the figures of issue 62 for BENCHMARKS.md.

1. A task that needs 50 calls (read 50 rows by id, sum a field): A, the
   client makes 50 `tools/call`s of the SQL tool one after another and sums
   in the client; B, one `run` whose program makes the 50 calls (under
   `Promise.all`) and returns the sum. Per task: bytes of response bodies
   the client received, wall time, and the server's CPU time (utime +
   stime from /proc). A and B alternate, `--rounds` each, on one keep-alive
   connection each.
2. A trivial `run` (one echo call) on one connection, fresh sandbox
   instance each, the compiled component cached: p50 and p99 in TypeScript
   and in JavaScript, beside a plain `tools/call` of echo.

    tests/.venv/bin/python scripts/bench_code.py [--rounds 20] [--calls 300]

Needs target/release/hangar, target/sandbox/code-js.wasm and code-py.wasm,
and plugins/echo.wasm (scripts/test builds them).
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
ROWS = 50

PROGRAM = f"""
interface Row {{ id: number; price: number }}
const ids = Array.from({{ length: {ROWS} }}, (_, i) => i + 1);
const answers = await Promise.all(ids.map((id) => tools.db.price({{ id }}))) as {{ rows: Row[] }}[];
return {{ total: answers.reduce((sum, a) => sum + a.rows[0].price, 0) }};
"""


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    """A raw MCP session on one keep-alive connection; counts response bytes."""

    def __init__(self, url):
        self.http = httpx.Client(base_url=url, timeout=60, headers={
            "accept": "application/json, text/event-stream", "content-type": "application/json"})
        self.bytes = 0
        self.id = 0
        r = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "bench-code", "version": "0"}})
        assert "result" in r, r

    def request(self, method, params):
        self.id += 1
        r = self.http.post("/mcp", json={"jsonrpc": "2.0", "id": self.id, "method": method, "params": params},
                           headers={"mcp-session-id": self.session} if self.id > 1 else {})
        if self.id == 1:
            self.session = r.headers["mcp-session-id"]
            self.http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers={"mcp-session-id": self.session})
        self.bytes += len(r.content)
        return r.json()

    def call(self, name, arguments):
        r = self.request("tools/call", {"name": name, "arguments": arguments})
        assert "result" in r and not r["result"].get("isError"), r
        return r["result"]


def by_client(c):
    total = 0
    for i in range(1, ROWS + 1):
        total += c.call("db.price", {"id": i})["structuredContent"]["rows"][0]["price"]
    return total


def by_run(c):
    return c.call("run", {"code": PROGRAM})["structuredContent"]["total"]


def task(c, how, pid):
    c.bytes = 0
    cpu, start = cpu_seconds(pid), time.perf_counter()
    total = how(c)
    wall, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu
    assert total == sum(i * 10 for i in range(1, ROWS + 1)), total
    return c.bytes, wall * 1000, cpu * 1000


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def latencies(c, name, args, calls):
    took = []
    for _ in range(calls):
        start = time.perf_counter()
        c.call(name, args)
        took.append((time.perf_counter() - start) * 1e6)
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hangar-bench-code-"))
    (work / "plugins").mkdir()
    (work / "plugins/echo.wasm").write_bytes((ROOT / "plugins/echo.wasm").read_bytes())
    db = sqlite3.connect(work / "bench.db")
    db.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, price INTEGER)")
    db.executemany("INSERT INTO products VALUES (?, ?)", [(i, i * 10) for i in range(1, ROWS + 1)])
    db.commit()
    db.close()
    (work / "hangar.toml").write_text(f"""
[server]
cache_dir = "{work}/cache"
catalog = "both"
[code]
enabled = true
[connectors.lite]
kind = "sqlite"
path = "bench.db"
pool_size = 4
[[tools]]
name = "db.price"
description = "The price of one product"
use = "lite"
statement = "SELECT id, price FROM products WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}
""")
    port = 18000 + os.getpid() % 1000
    log = open(work / "hangar.log", "w")
    proc = subprocess.Popen([str(HANGAR), "serve", "--config", str(work / "hangar.toml"), "--listen",
                             f"127.0.0.1:{port}", "--plugins", str(work / "plugins")],
                            stdout=log, stderr=subprocess.STDOUT, cwd=work,
                            env={**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        a, b = Client(url), Client(url)
        task(a, by_client, proc.pid)  # warm-up
        task(b, by_run, proc.pid)
        rows = {"client": [], "run": []}
        for _ in range(args.rounds):
            rows["client"].append(task(a, by_client, proc.pid))
            rows["run"].append(task(b, by_run, proc.pid))
        # /proc counts CPU in clock ticks (10 ms): per task, the mean over
        # every round, not a median of ticks.
        print(f"| {ROWS} calls | bytes to the client | wall ms, median (min–max) | server CPU ms per task, mean |")
        print("|---|---|---|---|")
        for how, label in (("client", f"{ROWS} tools/call from the client"), ("run", "one run (Promise.all)")):
            r = rows[how]
            walls = [x[1] for x in r]
            print(f"| {label} | {statistics.median(x[0] for x in r):.0f} | "
                  f"{statistics.median(walls):.1f} ({min(walls):.1f}–{max(walls):.1f}) | "
                  f"{statistics.mean(x[2] for x in r):.1f} |")
        ratio_bytes = statistics.median(x[0] for x in rows["client"]) / statistics.median(x[0] for x in rows["run"])
        ratio_wall = [c[1] / r[1] for c, r in zip(rows["client"], rows["run"])]
        print(f"\nbytes: {ratio_bytes:.1f}x fewer with run; wall: run faster by "
              f"{statistics.median(ratio_wall):.2f}x (per round {min(ratio_wall):.2f}–{max(ratio_wall):.2f})\n")

        c = Client(url)
        trivial = {
            "run, TypeScript": ("run", {"code": "return await tools.echo({ text: 'hi' });"}),
            "run, JavaScript": ("run", {"code": "return await tools.echo({ text: 'hi' });",
                                        "language": "javascript"}),
            "run, Python": ("run", {"code": "return await tools.echo(text='hi')", "language": "python"}),
            "echo tools/call (no run)": ("echo", {"text": "hi"}),
        }
        for name, call in trivial.items():
            latencies(c, *call, 30)  # warm-up
        print("| one connection | p50 µs | p99 µs |")
        print("|---|---|---|")
        for name, call in trivial.items():
            took = latencies(c, *call, args.calls)
            print(f"| {name} | {pct(took, 50):.0f} | {pct(took, 99):.0f} |")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
