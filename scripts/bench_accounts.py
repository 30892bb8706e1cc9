#!/usr/bin/env python3
"""A guest call that resolves a per-user credential against one with a static
credential, same run (issue 63's figure for BENCHMARKS.md; goal: the
per-user call at ≥ 0.9 of the static one's rate).

One Hangar: the test plugin http-fetch (`credential {provider}` answers the
provider's value), `[auth]` by the api-key plugin, `[credentials.plain]`
static and `[credentials.paste]` user-key, the caller's own key connected
(each call resolves it: the connection as read from the embedded kv store
within the last 5 s, else read and opened again).
Rounds alternate: `--calls` calls of `credential {paste}`, then of
`credential {plain}`, each on its own keep-alive MCP session, one at a time;
per round, calls per second of each and their ratio.

    tests/.venv/bin/python scripts/bench_accounts.py [--rounds 10] [--calls 500]

Needs target/release/hangar and target/test-plugins/http-fetch.wasm,
plugins/api-key.wasm (scripts/test builds them).
"""

import argparse
import base64
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
TEST_PLUGINS = Path(os.environ.get("TEST_PLUGINS", ROOT / "target/test-plugins"))
KEY = "alice-key-0123456789abcdef"


class Session:
    """A raw MCP session as alice, on one keep-alive connection."""

    def __init__(self, url):
        self.http = httpx.Client(base_url=url, timeout=60, headers={
            "accept": "application/json, text/event-stream", "content-type": "application/json",
            "x-api-key": KEY})
        self.id = 0
        r = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "bench-accounts", "version": "0"}})
        assert "result" in r, r
        self.http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method, params):
        self.id += 1
        r = self.http.post("/mcp", json={"jsonrpc": "2.0", "id": self.id, "method": method,
                                         "params": params})
        if "mcp-session-id" in r.headers:
            self.http.headers["mcp-session-id"] = r.headers["mcp-session-id"]
        return r.json()

    def credential(self, provider):
        r = self.request("tools/call", {"name": "credential", "arguments": {"provider": provider}})
        result = r["result"]
        assert not result["isError"], result
        return result["content"][0]["text"]


def rate(s, provider, calls):
    started = time.perf_counter()
    for _ in range(calls):
        s.credential(provider)
    return calls / (time.perf_counter() - started)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hangar-bench-accounts-"))
    (work / "plugins").mkdir()
    for src in (TEST_PLUGINS / "http-fetch.wasm", ROOT / "plugins/api-key.wasm"):
        (work / "plugins" / src.name).write_bytes(src.read_bytes())
    port = 18000 + os.getpid() % 1000
    url = f"http://127.0.0.1:{port}"
    (work / "hangar.toml").write_text(f"""
[server]
cache_dir = "{work}/cache"
public_url = "{url}"
[auth]
plugin = "api-key"
[plugins.api-key]
config = {{ keys = "alice={KEY}" }}
[credentials]
encryption_key = "{base64.b64encode(os.urandom(32)).decode()}"
[credentials.plain]
kind = "static"
value = "server-wide-token"
[credentials.paste]
kind = "user-key"
[plugins.http-fetch]
grants = {{ credentials = ["plain", "paste"] }}
""")
    log = open(work / "hangar.log", "w")
    proc = subprocess.Popen([str(HANGAR), "serve", "--config", str(work / "hangar.toml"), "--listen",
                             f"127.0.0.1:{port}", "--plugins", str(work / "plugins")],
                            stdout=log, stderr=subprocess.STDOUT, cwd=work,
                            env={**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"})
    try:
        for _ in range(600):
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        r = httpx.post(url + "/connect/paste", json={"key": "alice-own-key"}, headers={"x-api-key": KEY})
        assert r.status_code == 200, r.text
        user, static = Session(url), Session(url)
        assert user.credential("paste") == "alice-own-key"
        assert static.credential("plain") == "server-wide-token"
        rate(user, "paste", args.calls // 5)  # warm-up
        rate(static, "plain", args.calls // 5)
        rows = []
        for _ in range(args.rounds):
            rows.append((rate(user, "paste", args.calls), rate(static, "plain", args.calls)))
        ratios = [u / s for u, s in rows]
        print("| calls/s, one at a time | median (min–max) |")
        print("|---|---|")
        for i, label in ((0, "per-user key (kv row opened per call)"), (1, "static credential")):
            xs = [r[i] for r in rows]
            print(f"| {label} | {statistics.median(xs):.0f} ({min(xs):.0f}–{max(xs):.0f}) |")
        print(f"\nratio per-user / static: median {statistics.median(ratios):.3f} "
              f"(per round {min(ratios):.3f}–{max(ratios):.3f}); goal ≥ 0.9")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
