"""What a hostile upstream can make Hangar do (issue 40): server F has
`[upstreams.hostile]` pointing at tests/clients/hostile_upstream.py (a raw
asyncio HTTP server that initializes and lists tools like any MCP server,
then answers `tools/call` in hostile ways), with a configured `x-api-key`
and the default `max_response_bytes` (8 MiB).

- a 4 GiB JSON answer, chunked with no length: peak RSS growth, time to the
  caller's error, bytes the upstream got to write before Hangar hung up;
- an SSE stream that never ends (4 KB log notifications, back to back):
  the same three figures;
- a `307` to a listener on a loopback port: what reached the listener;
- answers of 10,000 and 40,000 progress events before the result: CPU
  seconds Hangar spent on each (linear: 40k costs about 4 × 10k);
- an echo caller's p99 beside a client that keeps asking for 4 GiB answers.

Run by scripts/abuse (`--only outbound`); `rows()` gives its section of
RELIABILITY.md.
"""

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from abuse import ROOT, Server, cpu_seconds, free_port, log, reset_peak_rss, rss_kib, wrk

HOSTILE = ROOT / "tests" / "clients" / "hostile_upstream.py"
KEY = "outbound-secret-key-0123456789"
HUGE_MIB = 4096


class Listener(threading.Thread):
    """Records whatever reaches a loopback port (where the redirect points)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = 0
        self.start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                while data := conn.recv(65536):
                    self.received += len(data)
            except OSError:
                pass
            conn.close()


def call(url, tool, args=None, timeout=120):
    """A REST call: (status, first text, seconds)."""
    body = json.dumps(args or {}).encode()
    req = urllib.request.Request(f"{url}/tools/hostile.{tool}/call", data=body,
                                 headers={"content-type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    took = time.monotonic() - started
    try:
        text = json.loads(raw)["content"][0]["text"]
    except (ValueError, KeyError, IndexError):
        text = raw[:200].decode("utf-8", "replace")
    return status, text, took


def stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
        return json.loads(r.read())


def written(port, prefix):
    sent = [v for k, v in stats(port)["written"].items() if k.startswith(prefix + "#")]
    return sent[-1] if sent else 0


def bounded(server, port, tool, args):
    """One hostile answer: peak RSS growth, the caller's answer, and what
    the upstream wrote."""
    reset_peak_rss(server.pid)
    before = rss_kib(server.pid)
    status, text, took = call(server.url, tool, args)
    time.sleep(0.5)
    return {"status": status, "text": text, "seconds": took,
            "peak_mib": (rss_kib(server.pid, "VmHWM") - before) / 1024,
            "written_mib": written(port, tool) / (1 << 20)}


def events_cpu(server, n, repeats=5):
    """Hangar's CPU seconds for one answer of `n` events: the time of
    `repeats` answers over `repeats` (the clock ticks in 10 ms)."""
    before = cpu_seconds(server.pid)
    for _ in range(repeats):
        status, text, _ = call(server.url, "events", {"n": n})
        assert status == 200 and text == f"after {n} events", (status, text)
    return (cpu_seconds(server.pid) - before) / repeats


def echo_script(work):
    path = work / "outbound_echo.lua"
    path.write_text('wrk.method = "POST"\nwrk.body = \'{"text":"hi"}\'\n'
                    'wrk.headers["content-type"] = "application/json"\n')
    return path


def run(work, plugins, seconds):
    stolen = Listener()
    port = free_port()
    upstream = subprocess.Popen([sys.executable, str(HOSTILE), str(port),
                                 "--stolen", f"http://127.0.0.1:{stolen.port}/stolen"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                stats(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the hostile upstream did not start")
                time.sleep(0.1)
        config = f"""
[upstreams.hostile]
url = "http://127.0.0.1:{port}/mcp"
headers = {{ x-api-key = "{KEY}" }}
timeout = "60s"
breaker_failures = 1000
"""
        results = {}
        with Server("outbound", work, plugins, config) as f:
            deadline = time.monotonic() + 30
            while call(f.url, "echo", {"text": "up"})[0] != 200:
                if time.monotonic() > deadline:
                    raise SystemExit("server F never listed the hostile upstream's tools")
                time.sleep(0.2)
            log("hostile upstream: a 4 GiB answer")
            results["huge"] = bounded(f, port, "huge", {"mb": HUGE_MIB})
            log("hostile upstream: an endless SSE stream")
            results["endless"] = bounded(f, port, "endless", {})
            log("hostile upstream: a redirect to a loopback listener")
            status, text, _ = call(f.url, "redirect")
            time.sleep(0.5)
            results["redirect"] = {"status": status, "text": text, "received": stolen.received}
            log("hostile upstream: 10,000 and 40,000 events")
            events_cpu(f, 1000, repeats=1)  # warm-up
            small, large = events_cpu(f, 10_000), events_cpu(f, 40_000)
            results["events"] = {"small": small, "large": large}
            log("hostile upstream: an echo caller beside 4 GiB answers")
            script = echo_script(work)
            echo_url = f"{f.url}/tools/echo/call"
            alone = wrk(echo_url, script, seconds, 2)
            stop = threading.Event()
            hostile_calls = []

            def hammer():
                while not stop.is_set():
                    hostile_calls.append(call(f.url, "huge", {"mb": HUGE_MIB})[0])

            reset_peak_rss(f.pid)
            base = rss_kib(f.pid)
            threads = [threading.Thread(target=hammer) for _ in range(2)]
            for t in threads:
                t.start()
            beside = wrk(echo_url, script, seconds, 2)
            stop.set()
            for t in threads:
                t.join(60)
            results["beside"] = {"alone": alone, "beside": beside, "hostile_calls": len(hostile_calls),
                                 "statuses": sorted(set(hostile_calls)),
                                 "peak_mib": (rss_kib(f.pid, "VmHWM") - base) / 1024}
            results["alive"] = f.alive() and f.healthz()[0]
            results["panics"] = f.host_panics()
        return results
    finally:
        upstream.kill()
        upstream.wait(10)


def yes(ok):
    return "yes" if ok else "**NO**"


CAP = "upstream: hostile: answered more than 8 MiB (max_response_bytes)"


def rows(r, seconds):
    h, e, rd, ev, b = r["huge"], r["endless"], r["redirect"], r["events"], r["beside"]
    ratio = ev["large"] / ev["small"] if ev["small"] else float("inf")
    out = [
        "", "## A hostile upstream (issue 40)", "",
        "| figure | goal | measured | met? |", "|---|---|---|---|",
        f"| a {HUGE_MIB // 1024} GiB JSON answer (chunked, no length): the caller's answer | the cap's error | "
        f"{h['status']} `{h['text'][:80]}` in {h['seconds']:.2f} s | {yes(h['text'] == CAP)} |",
        f"| the same: peak RSS growth; what the upstream wrote before Hangar hung up | < 64 MiB; < 64 MiB | "
        f"+{h['peak_mib']:.1f} MiB; {h['written_mib']:.1f} MiB | "
        f"{yes(h['peak_mib'] < 64 and h['written_mib'] < 64)} |",
        f"| an SSE stream that never ends: the caller's answer | the cap's error | "
        f"{e['status']} `{e['text'][:80]}` in {e['seconds']:.2f} s | {yes(e['text'] == CAP)} |",
        f"| the same: peak RSS growth; what the upstream wrote | < 64 MiB; < 64 MiB | "
        f"+{e['peak_mib']:.1f} MiB; {e['written_mib']:.1f} MiB | "
        f"{yes(e['peak_mib'] < 64 and e['written_mib'] < 64)} |",
        f"| a `307` to a loopback listener: bytes that reached it; the caller's answer | 0; an error | "
        f"{rd['received']}; {rd['status']} `{rd['text'][:80]}` | "
        f"{yes(rd['received'] == 0 and rd['status'] == 500)} |",
        f"| Hangar's CPU for an answer after 40,000 events ÷ after 10,000 | ≤ 5 (linear: about 4) | "
        f"{ratio:.2f} ({ev['large'] * 1000:.0f} ms ÷ {ev['small'] * 1000:.0f} ms) | {yes(ratio <= 5)} |",
        f"| 2 clients asking for {HUGE_MIB // 1024} GiB answers back to back for {seconds} s beside an echo caller: "
        f"peak RSS growth | < 64 MiB | +{b['peak_mib']:.1f} MiB ({b['hostile_calls']} hostile calls, statuses "
        f"{b['statuses']}) | {yes(b['peak_mib'] < 64)} |",
        f"| the same: the echo caller's p99 (no goal: the hostile server's own writing takes most of a core "
        f"of the two) | — | {b['beside']['p99']:.2f} ms (alone {b['alone']['p99']:.2f} ms) | — |",
        f"| crashes and host panics of server F | 0 | {'0' if r['alive'] else 'server gone'}, "
        f"{r['panics']} panics | {yes(r['alive'] and r['panics'] == 0)} |",
        "", "### How each figure was measured", "",
        "**Server F** has `[upstreams.hostile]` with `headers = { x-api-key = … }`, `timeout = \"60s\"` and the "
        "default `max_response_bytes` (8 MiB), in front of `tests/clients/hostile_upstream.py`. Calls go over "
        "REST. Peak RSS is VmHWM, reset before each figure through `/proc/PID/clear_refs`; what the upstream "
        "wrote is counted by the upstream as its writes complete (the kernel's socket buffers hold a few MiB "
        "of it). CPU is Hangar's user + system time from `/proc/PID/stat` across 5 calls, divided by 5.",
    ]
    return out


if __name__ == "__main__":
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-outbound-"))
    print("\n".join(rows(run(work, ROOT / "plugins", 5), 5)))
