#!/usr/bin/env python3
"""The echo tool called over stdio vs the same call over HTTP, one connection each.

One `hangar serve --stdio --listen ADDR` process serves both, so the host, its catalog and
its guest are the same; only the transport differs. One client in this script drives both in
turns (a round of stdio calls, then a round of HTTP calls on one keep-alive connection, and
so on): each call is sent, its answer read, then the next sent. The client's own cost is in
both numbers alike (Python, a line read vs an HTTP response parsed by http.client).

    scripts/bench_stdio.py [--rounds 6] [--calls 2000]
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
PLUGINS = ROOT / "plugins"
WORK = Path(tempfile.mkdtemp(prefix="hangar-bench-stdio-"))
PROTOCOL = "2025-11-25"
CALL = {"name": "echo", "arguments": {"text": "hello"}}


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stdio:
    def __init__(self, proc):
        self.proc = proc
        self.next_id = 0

    def request(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": params}).encode() + b"\n"
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert reply.get("id") == self.next_id and "result" in reply, reply
        return reply


class Http:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port)
        self.headers = {"content-type": "application/json",
                        "accept": "application/json, text/event-stream"}
        self.next_id = 0

    def request(self, method, params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": params})
        self.conn.request("POST", "/mcp", body, self.headers)
        r = self.conn.getresponse()
        reply = json.loads(r.read())
        if "mcp-session-id" in r.headers:
            self.headers["mcp-session-id"] = r.headers["mcp-session-id"]
        assert reply.get("id") == self.next_id and "result" in reply, reply
        return reply


def round_of(client, calls):
    """Microseconds per call, for `calls` echo calls in a row."""
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        client.request("tools/call", CALL)
        times.append((time.perf_counter_ns() - start) / 1000)
    return times


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    (WORK / "plugins").mkdir()
    (WORK / "plugins" / "echo.wasm").write_bytes((PLUGINS / "echo.wasm").read_bytes())
    config = WORK / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{WORK / "cache"}"\n')
    port = free_port()
    log = open(WORK / "hangar.log", "w")
    proc = subprocess.Popen([str(HANGAR), "serve", "--stdio", "--listen", f"127.0.0.1:{port}",
                             "--config", str(config), "--plugins", str(WORK / "plugins")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                            env={**os.environ, "RUST_LOG": "warn"})
    init = {"protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}
    try:
        stdio = Stdio(proc)
        stdio.request("initialize", init)
        for _ in range(300):
            try:
                http = Http(port)
                http.request("initialize", init)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("the HTTP side did not come up")
        # Warm both (the compiled guest, the allocator, the connection).
        round_of(stdio, 500)
        round_of(http, 500)
        rows = {"stdio": [], "http": []}
        for _ in range(a.rounds):
            rows["stdio"].append(round_of(stdio, a.calls))
            rows["http"].append(round_of(http, a.calls))
        print(f"{a.rounds} rounds of {a.calls} echo calls each, stdio and HTTP in turns")
        print("| transport | p50 µs (median of rounds; min–max) | p99 µs (median) | calls/s |")
        print("|---|---|---|---|")
        for name, rounds in rows.items():
            p50s = [pct(r, 0.5) for r in rounds]
            p99s = [pct(r, 0.99) for r in rounds]
            rate = 1e6 / statistics.mean(statistics.mean(r) for r in rounds)
            print(f"| {name} | {statistics.median(p50s):.0f} ({min(p50s):.0f}–{max(p50s):.0f}) "
                  f"| {statistics.median(p99s):.0f} | {rate:.0f} |")
        ratios = [pct(s, 0.5) / pct(h, 0.5) for s, h in zip(rows["stdio"], rows["http"])]
        print(f"stdio p50 / HTTP p50, per round: median {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}–{max(ratios):.2f})")
    finally:
        proc.stdin.close()
        proc.wait(30)
        log.close()


if __name__ == "__main__":
    main()
