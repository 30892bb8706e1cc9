"""Scale-out measurements (issue 21), printed as BENCHMARKS.md rows:

1. the cost of Redis-backed sessions: one replica, the echo tool over MCP
   with a session (`Mcp-Session-Id` on every request), with and without
   `[cluster]`, alternating in the same run;
2. calls/s of one session's echo calls through nginx (`scripts/cluster`) with
   1 and with 3 replicas.

    python3 scripts/bench_cluster.py [--runs N] [--seconds S] [--connections C]

Needs Redis at 127.0.0.1:6379 (scripts/cluster starts one if none answers),
wrk (installed with apt-get when missing) and a built target/release/hangar.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import lua_script, wrk  # noqa: E402  (the same wrk driver and parser)

ROOT = Path(__file__).resolve().parent.parent
HANGAR = ROOT / "target/release/hangar"
WORK = Path(tempfile.mkdtemp(prefix="hangar-bench-cluster-"))
PREFIX = f"hangar-bench:{uuid.uuid4().hex[:8]}"
ECHO = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(url, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not answer")


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **(headers or {})})
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(r.headers), r.read()


def open_session(url):
    """An initialized session at `url` (.../mcp); its id."""
    headers, _ = post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}})
    sid = headers.get("mcp-session-id") or headers.get("Mcp-Session-Id")
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"mcp-session-id": sid})
    return sid


def config(name, cluster):
    path = WORK / f"{name}.toml"
    text = f'[server]\ncache_dir = "{WORK}/cache"\nplugins = "{WORK}/plugins"\n'
    if cluster:
        text += (f'[cluster]\nredis = "redis://127.0.0.1:6379"\nprefix = "{PREFIX}"\n'
                 '[artifacts]\nsigning_key = "hangar-bench-cluster-signing-key"\n')
    path.write_text(text)
    return path


def replica(cfg):
    port = free_port()
    log = open(WORK / f"{cfg.stem}-{port}.log", "w")
    p = subprocess.Popen([str(HANGAR), "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}"],
                         stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
    url = f"http://127.0.0.1:{port}"
    wait(url + "/healthz")
    return p, url


def cluster(cfg, replicas):
    """scripts/cluster with `replicas` replicas; (process, url)."""
    addr = f"127.0.0.1:{free_port()}"
    d = WORK / f"cluster-{replicas}"
    log = open(WORK / f"cluster-{replicas}.log", "w")
    p = subprocess.Popen(["bash", str(ROOT / "scripts/cluster"), "--replicas", str(replicas),
                          "--listen", addr, "--config", str(cfg), "--dir", str(d)],
                         stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + 300
    while not (d / "ready").exists():
        if p.poll() is not None or time.monotonic() > end:
            raise SystemExit(f"scripts/cluster did not start: {(WORK / f'cluster-{replicas}.log').read_text()}")
        time.sleep(0.1)
    return p, f"http://{addr}"


def med(xs, k):
    return statistics.median(x[k] for x in xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args()
    if not shutil.which("wrk"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True)
    (WORK / "plugins").mkdir()
    shutil.copy(ROOT / "plugins/echo.wasm", WORK / "plugins/echo.wasm")
    plain, shared = config("plain", False), config("shared", True)
    procs = []
    try:
        # 1. One replica, with and without [cluster], alternating.
        a, a_url = replica(shared)
        b, b_url = replica(plain)
        procs += [a, b]
        a_script = lua_script("cluster-on", ECHO, headers={"Mcp-Session-Id": open_session(a_url + "/mcp")})
        b_script = lua_script("cluster-off", ECHO, headers={"Mcp-Session-Id": open_session(b_url + "/mcp")})
        on, off = [], []
        for _ in range(args.runs):
            on.append(wrk(a_url + "/mcp", a_script, args.seconds, args.connections))
            off.append(wrk(b_url + "/mcp", b_script, args.seconds, args.connections))
        ratios = [x["rps"] / y["rps"] for x, y in zip(on, off)]
        print("| scenario | with [cluster] req/s | p50 / p99 ms | without req/s | p50 / p99 ms | ratio (min–max) |")
        print("|---|---|---|---|---|---|")
        print(f"| echo over MCP with a session, one replica, {args.connections} connections | "
              f"{med(on, 'rps'):.0f} | {med(on, 'p50'):.2f} / {med(on, 'p99'):.2f} | {med(off, 'rps'):.0f} | "
              f"{med(off, 'p50'):.2f} / {med(off, 'p99'):.2f} | **{statistics.median(ratios):.3f}** "
              f"({min(ratios):.2f}–{max(ratios):.2f}) |", flush=True)
        for p in (a, b):
            p.terminate()
            p.wait(10)
        procs.clear()
        # 2. Through nginx: 1 and 3 replicas.
        print()
        print("| replicas behind nginx | calls/s (runs) | p50 / p99 ms |")
        print("|---|---|---|")
        for n in (1, 3):
            p, url = cluster(shared, n)
            procs.append(p)
            script = lua_script(f"nginx-{n}", ECHO, headers={"Mcp-Session-Id": open_session(url + "/mcp")})
            runs = [wrk(url + "/mcp", script, args.seconds, args.connections) for _ in range(args.runs)]
            each = ", ".join(f"{r['rps']:.0f}" for r in runs)
            print(f"| {n} | {med(runs, 'rps'):.0f} ({each}) | "
                  f"{med(runs, 'p50'):.2f} / {med(runs, 'p99'):.2f} |", flush=True)
            p.send_signal(signal.SIGTERM)
            p.wait(60)
            procs.clear()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(60)
        keys = subprocess.run(["redis-cli", "--scan", "--pattern", f"{PREFIX}:*"], capture_output=True,
                              text=True).stdout.split()
        for i in range(0, len(keys), 500):
            subprocess.run(["redis-cli", "DEL", *keys[i:i + 500]], capture_output=True)


if __name__ == "__main__":
    main()
