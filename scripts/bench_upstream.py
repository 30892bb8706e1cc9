#!/usr/bin/env python3
"""An upstream MCP tool call through Hangar vs the same call straight to the upstream.

The upstream is the Python SDK's FastMCP (tests/clients/upstream_server.py, tool
`add`); Hangar serves it as `up.add` through its whole pipeline. Both sides are
driven by wrk with the same tools/call body, A and B alternating, in one run.

    PYTHON=tests/.venv/bin/python scripts/bench_upstream.py [--runs 3] [--seconds 5]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
PYTHON = os.environ.get("PYTHON", sys.executable)
WORK = Path(tempfile.mkdtemp(prefix="hangar-bench-upstream-"))
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **(headers or {})})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
        data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        if not (data or text.strip()):
            return r.headers, None
        return r.headers, json.loads(data[-1] if data else text)


def wait(url):
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def lua(name, body, headers):
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"',
             'wrk.headers["Accept"] = "application/json, text/event-stream"',
             *[f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()],
             f"wrk.body = '{json.dumps(body)}'"]
    path = WORK / f"{name}.lua"
    path.write_text("\n".join(lines) + "\n")
    return path


def wrk(url, script, seconds, connections):
    out = subprocess.run(["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{seconds}s",
                          "--latency", "-s", str(script), url],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise SystemExit(out)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {p: float(v) * UNITS[u] for p, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    return {"rps": rps, "p50": lat.get("50"), "p99": lat.get("99")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()

    up_port, hangar_port = free_port(), free_port()
    upstream = subprocess.Popen([PYTHON, str(ROOT / "tests/clients/upstream_server.py"), str(up_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait(f"http://127.0.0.1:{up_port}/")
    up_url = f"http://127.0.0.1:{up_port}/mcp"
    (WORK / "plugins").mkdir()
    config = WORK / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{WORK}/cache"\n[upstreams.up]\nurl = "{up_url}"\n')
    log = open(WORK / "hangar.log", "w")
    hangar = subprocess.Popen([str(HANGAR), "serve", "--config", str(config), "--listen",
                               f"127.0.0.1:{hangar_port}", "--plugins", str(WORK / "plugins")],
                              stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
    hangar_url = f"http://127.0.0.1:{hangar_port}"
    wait(hangar_url + "/healthz")
    try:
        # Straight to the upstream: one session, opened by hand.
        headers, reply = post(up_url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
        sid = headers["mcp-session-id"]
        session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        post(up_url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        direct = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}
        via = {**direct, "params": {"name": "up.add", "arguments": {"a": 2, "b": 3}}}
        for url, body, h in ((up_url, direct, session), (hangar_url + "/mcp", via, {})):
            _, reply = post(url, body, h)
            assert reply["result"]["content"][0]["text"] == "5", reply
        a_script, b_script = lua("via", via, {}), lua("direct", direct, session)
        for connections in (1, 8):
            a_s, b_s = [], []
            for _ in range(args.runs):
                a_s.append(wrk(hangar_url + "/mcp", a_script, args.seconds, connections))
                b_s.append(wrk(up_url, b_script, args.seconds, connections))
            ratios = [a["rps"] / b["rps"] for a, b in zip(a_s, b_s)]
            med = lambda xs, k: statistics.median(x[k] for x in xs)
            print(f"| upstream add, {connections} connection(s) | {med(a_s, 'rps'):.0f} | "
                  f"{med(a_s, 'p50'):.2f} / {med(a_s, 'p99'):.2f} | {med(b_s, 'rps'):.0f} | "
                  f"{med(b_s, 'p50'):.2f} / {med(b_s, 'p99'):.2f} | **{statistics.median(ratios):.3f}** "
                  f"({min(ratios):.2f}–{max(ratios):.2f}) |", flush=True)
    finally:
        hangar.terminate()
        upstream.terminate()
        hangar.wait(10)
        upstream.wait(10)


if __name__ == "__main__":
    main()
