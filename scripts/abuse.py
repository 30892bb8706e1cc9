"""Drives scripts/abuse: starts `hangar serve` with echo, misbehave and abuse
loaded, measures each isolation figure (issue 11) and each figure of the
HTTP front against hostile clients (issue 14) against its goal and prints
a table; with --write, also RELIABILITY.md.

Three servers, one after the other, because the figures need different limits:
  A  runaways: `[limits] fuel = 1e12, deadline = "5s"`, so only the deadline
     stops a spin; echo latency alone and beside 40 spins (figure 1).
  B  defaults, except sleep_once has a 1 s deadline: the stop of a guest
     blocked in a host call (2), RSS over floods (3).
  C  clients (issue 14): short HTTP timeouts, caps on connections and
     sessions; slowloris, a connection flood, slow bodies, clients that
     never read, an initialize flood, huge search queries and hang-ups
     mid-call (REST, MCP, a SQLite write).
Each must be alive and answer /healthz at the end of its phase (4).
Then scripts/abuse_db.py's drivers (SQL injection, hostile numerics, DB
hang-ups; a server of its own) add their rows to the inputs table.

Self-contained on purpose: scripts/bench.py makes a temp dir at import time.
"""

import argparse
import http.client
import importlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
TEST_PLUGINS = Path(os.environ.get("TEST_PLUGINS", ROOT / "target/test-plugins"))
# Kept between runs: compiling the three components again each time would
# only add start-up time, which no figure measures.
CACHE_DIR = ROOT / "target/abuse-cache"
PROTOCOL = "2025-11-25"
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
ECHO_CALL = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'

RUNAWAY_CONFIG = """
[limits]
fuel = 1_000_000_000_000
deadline = "5s"
"""
RUNAWAY_DEADLINE_S = 5
# Server B keeps the default limits, as a user would run it; only the
# blocked-call tool gets a short deadline so figure 2 is quick to measure.
FLOOD_CONFIG = """
[[tools]]
name = "sleep_once"
limits = { deadline = "1s" }
"""
SLEEP_DEADLINE_S = 1.0

# Goals (issue 11, and the isolation spec for the event cap).
P99_FACTOR, P99_SLACK_MS = 2.0, 2.0
STOP_SLACK_S = 0.5
PEAK_GROWTH_MIB = 64
# Output floods: each guest may use up to the default memory_mib itself, and
# the floods run this many calls at once (see measure_floods).
GUEST_MEMORY_MIB = 64
FLOODS_AT_ONCE = 2
SPAM_FLOODS = {"log_flood", "progress_flood", "stderr_flood"}
OUTPUT_FLOODS = {"big_output", "many_blocks", "random_flood", "table_flood"}
AFTER_GROWTH_MIB = 16
MAX_EVENTS = 1000  # host default `max_events`; the answer may carry one more (the "dropped" warning)

# The floods, by tool, with the `_meta` their call carries. Every one runs
# with its default size, which is far past Hangar's default limits.
FLOODS = [
    ("log_flood", None),
    ("progress_flood", {"progressToken": "abuse"}),
    ("stderr_flood", None),
    ("big_output", None),
    ("many_blocks", None),
    ("random_flood", None),
    ("table_flood", None),
]
REQUIRED_TOOLS = {"echo", "spin", "sleep_once", *(name for name, _ in FLOODS)}


def log(msg):
    print(f"--> {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid, field="VmRSS"):
    """A field of /proc/PID/status in KiB; 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def reset_peak_rss(pid):
    """Resets VmHWM (the kernel's own peak RSS), so a later read is the true
    peak since now rather than a 50 ms sample of it. False where not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class Server:
    """One `hangar serve` with its own config; stopped on leaving the `with`."""

    def __init__(self, name, work, plugins, config, env=None):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = work / f"{name}.toml"
        cfg.write_text(f'[server]\ncache_dir = "{CACHE_DIR}"\n{config}')
        self.log_path = work / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(HANGAR), "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{self.port}",
             "--plugins", str(plugins)],
            stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1", **(env or {})})
        self.pid = self.proc.pid

    def __enter__(self):
        try:
            self.wait_up()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def wait_up(self, timeout=120):
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"server {self.name} exited with {self.proc.returncode} at start-up:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=1)
                return
            except Exception:  # noqa: BLE001 - anything means not up yet
                time.sleep(0.05)
        raise SystemExit(f"server {self.name}: /healthz did not answer within {timeout} s:\n{self.log_tail()}")

    def alive(self):
        return self.proc.poll() is None

    def healthz(self):
        """(answered?, what it said)."""
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=5) as r:
                return r.status == 200, json.loads(r.read()).get("status", "?")
        except Exception as e:  # noqa: BLE001 - a failed health check is a finding, not a crash of this script
            return False, f"{type(e).__name__}: {e}"

    def log_size(self):
        self.log.flush()
        return self.log_path.stat().st_size

    def log_tail(self, lines=30):
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def host_panics(self):
        """Rust panics of the host itself. A guest panic is logged too, but as
        guest stderr tagged with its plugin, so those lines are left out."""
        self.log.flush()
        return sum(1 for l in self.log_path.read_text(errors="replace").splitlines()
                   if "panicked at" in l and "plugin=" not in l)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


# ---------------------------------------------------------------- HTTP / MCP

class Reply:
    """One HTTP exchange. `error` is set when there was no complete HTTP
    answer (refused, reset, timed out); `final` is the JSON-RPC response, and
    notifications that came before it on an SSE answer are only counted, as a
    flood on a host without caps can send millions of them."""

    def __init__(self):
        self.status, self.headers, self.body, self.error = None, {}, b"", None
        self.elapsed = 0.0
        self.final = None
        self.notifications = Counter()
        self.hangar_warnings = []


def post(url, message, headers=None, timeout=30.0):
    """POSTs one JSON-RPC message and reads the whole answer; `timeout` bounds
    the whole exchange, not only each socket read."""
    u = urllib.parse.urlsplit(url)
    body = message.encode() if isinstance(message, str) else json.dumps(message).encode()
    r = Reply()
    start = time.monotonic()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", u.path, body=body, headers={**MCP_HEADERS, **(headers or {})})
        resp = conn.getresponse()
        r.status = resp.status
        r.headers = {k.lower(): v for k, v in resp.getheaders()}
        chunks = []
        while chunk := resp.read(1 << 16):
            chunks.append(chunk)
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"answer still streaming after {timeout:.0f} s")
        r.body = b"".join(chunks)
    except (OSError, http.client.HTTPException) as e:
        r.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    finally:
        conn.close()
        r.elapsed = time.monotonic() - start
    if r.error is None and r.status == 200:
        parse_reply(r)
    return r


def parse_reply(r):
    try:
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            for line in r.body.split(b"\n"):
                if line.startswith(b"data: "):
                    note(r, json.loads(line[6:]))
        elif r.body:
            note(r, json.loads(r.body))
    except ValueError as e:
        r.error = f"unparsable answer: {e}"


def note(r, msg):
    if "method" in msg:
        r.notifications[msg["method"]] += 1
        p = msg.get("params", {})
        if p.get("logger") == "hangar" and len(r.hangar_warnings) < 3:
            r.hangar_warnings.append(str(p.get("data"))[:120])
    elif "result" in msg or "error" in msg:
        r.final = msg


def tool_call(name, arguments=None, meta=None, id=1):
    params = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def outcome(r):
    """("result" | "error" | "failure", short text). An `error` is the JSON-RPC
    -32000 a limit answers with, which is expected; a `failure` is anything
    that is no proper answer: transport errors, non-200, other error codes."""
    if r.error:
        return "failure", r.error
    if r.status != 200:
        return "failure", f"HTTP {r.status}"
    if r.final is None:
        return "failure", "no JSON-RPC response in the answer"
    if "error" in r.final:
        e = r.final["error"]
        if e.get("code") == -32000:
            return "error", str(e.get("message"))[:100]
        return "failure", f"JSON-RPC {e.get('code')}: {str(e.get('message'))[:100]}"
    result = r.final["result"]
    blocks = result.get("content", [])
    first = blocks[0].get("text", "") if blocks else ""
    text = first if len(first) <= 60 and len(blocks) == 1 else f"{len(blocks)} blocks, first {len(first)} chars"
    return "result", ("isError: " if result.get("isError") else "") + text


class Failures:
    """Answers that were no proper answer, by phase, across every thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_phase = Counter()
        self.examples = []

    def check(self, phase, r):
        kind, text = outcome(r)
        if kind == "failure":
            with self.lock:
                self.by_phase[phase] += 1
                if len(self.examples) < 8:
                    self.examples.append(f"{phase}: {text}")
        return kind, text

    def total(self):
        return sum(self.by_phase.values())


class Session:
    """An MCP session at debug log level: only then does Hangar forward a
    guest's log events, which is what makes log_flood a flood."""

    def __init__(self, url):
        r = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                                  "clientInfo": {"name": "hangar-abuse", "version": "0"}}}, timeout=10)
        sid = r.headers.get("mcp-session-id")
        if r.error or r.final is None or "result" not in r.final or not sid:
            raise SystemExit(f"initialize failed: {r.error or r.status} {r.body[:300]!r}")
        self.headers = {"mcp-session-id": sid}
        r = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers, timeout=10)
        if r.status != 202:
            raise SystemExit(f"notifications/initialized: {r.error or r.status}")
        r = post(url, {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}},
                 self.headers, timeout=10)
        if r.final is None or "result" not in r.final:
            raise SystemExit(f"logging/setLevel: {r.error or r.status} {r.body[:300]!r}")


def check_tools(url):
    """Fails early and clearly when the plugins are stale (say an abuse.wasm
    from before a tool was added), instead of measuring "tool not found"."""
    names, cursor = set(), None
    while True:
        r = post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                       "params": {"cursor": cursor} if cursor else {}}, timeout=10)
        if r.final is None or "result" not in r.final:
            raise SystemExit(f"tools/list failed: {r.error or r.status} {r.body[:300]!r}")
        names |= {t["name"] for t in r.final["result"]["tools"]}
        cursor = r.final["result"].get("nextCursor")
        if not cursor:
            break
    if missing := REQUIRED_TOOLS - names:
        raise SystemExit(f"the server lacks tools {sorted(missing)}: rebuild the plugins (scripts/abuse does)")


def echo_calls(url, n, failures, phase):
    for _ in range(n):
        failures.check(phase, post(url, ECHO_CALL, timeout=10))


# ---------------------------------------------------------------- wrk

def echo_script(work):
    """wrk posts the echo call. A JSON-RPC error comes with HTTP 200, so wrk
    alone would count e.g. a busy error as a fast success: the script counts
    answers without a result and prints the total for wrk() to read."""
    path = work / "echo.lua"
    path.write_text(f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.body = '{ECHO_CALL}'
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function init(args) rpc_errors = 0 end
function response(status, headers, body)
  if status == 200 and not string.find(body, '"result"', 1, true) then rpc_errors = rpc_errors + 1 end
end
function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do n = n + (t:get("rpc_errors") or 0) end
  io.write(string.format("rpc_errors: %d\\n", n))
end
""")
    return path


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def wrk(url, script, seconds, connections):
    # --timeout 10s: wrk's default (2 s) drops slower answers from the
    # latency figures altogether, which would hide exactly what we look for.
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "--latency", "-s", str(script), url]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"wrk did not finish: {' '.join(args)}") from None
    if p.returncode != 0 or "Requests/sec" not in p.stdout:
        raise SystemExit(f"wrk failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    out = p.stdout
    lat = {q: float(v) * UNITS[u] for q, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)}
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    rpc = re.search(r"rpc_errors: (\d+)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50": lat.get("50"), "p99": lat.get("99"),
            "total": int(re.search(r"(\d+) requests in", out).group(1)),
            "errors": (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)
            + (int(rpc.group(1)) if rpc else 0)}


# ---------------------------------------------------------------- samplers

class RssSampler(threading.Thread):
    """Samples VmRSS every 50 ms: the fallback peak where VmHWM cannot be
    reset, and a cross-check where it can."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.window_peak = 0

    def run(self):
        while not self.stop_event.wait(0.05):
            v = rss_kib(self.pid)
            with self.lock:
                self.window_peak = max(self.window_peak, v)

    def window(self):
        """The peak since the last call, and starts a new window."""
        now = rss_kib(self.pid)
        with self.lock:
            peak, self.window_peak = max(self.window_peak, now), now
        return peak

    def stop(self):
        self.stop_event.set()
        self.join(1)


class Runaways:
    """Keeps `n` spin calls in flight: each thread re-issues its call as soon
    as the last one answered, until stopped. Spins never finish by themselves,
    so each holds a guest busy until the deadline."""

    def __init__(self, url, n, failures):
        self.url, self.failures = url, failures
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.answers = Counter()
        # Starts are spread over one deadline, so the n calls stay in flight
        # at staggered ages the way independent clients' calls would, instead
        # of all ending and restarting in the same millisecond (a burst of
        # client-side work on these same two cores, every deadline).
        spacing = RUNAWAY_DEADLINE_S / max(n, 1)
        self.threads = [threading.Thread(target=self.loop, args=(i * spacing,), daemon=True)
                        for i in range(n)]

    def loop(self, delay):
        if self.stop_event.wait(delay):
            return
        while not self.stop_event.is_set():
            r = post(self.url, tool_call("spin"), timeout=RUNAWAY_DEADLINE_S + 30)
            kind, text = self.failures.check("runaway spin", r)
            with self.lock:
                self.answers["deadline error" if "deadline of" in text else f"{kind}: {text}"] += 1
            if kind == "failure":
                time.sleep(0.1)  # no hot loop against a server that is down

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, exc_type, *exc):
        self.stop_event.set()
        self.stuck = 0
        if exc_type is not None:
            return  # interrupted: daemon threads, the server is about to be killed
        # The calls in flight are left to run into their deadline (not
        # cancelled), so the next "alone" run starts with no runaway left.
        end = time.monotonic() + RUNAWAY_DEADLINE_S + 35
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        self.stuck = sum(t.is_alive() for t in self.threads)


# ---------------------------------------------------------------- figures

def measure_runaways(server, args, work, failures):
    """Figure 1: echo under wrk alone, then beside `--runaways` spins,
    alternating, `--runs` times."""
    url = server.url + "/mcp"
    check_tools(url)
    echo_calls(url, 20, failures, "echo check")
    if failures.total():
        raise SystemExit(f"echo does not answer: {failures.examples}")
    script = echo_script(work)
    wrk(url, script, 1, args.connections)  # warm-up, not counted
    alone, beside, answers, stuck = [], [], Counter(), 0
    for run in range(args.runs):
        alone.append(wrk(url, script, args.seconds, args.connections))
        with Runaways(url, args.runaways, failures) as ra:
            # Wait until every spin is in flight (the last starts one
            # deadline in), so wrk measures echo against all of them.
            time.sleep(RUNAWAY_DEADLINE_S + 0.5)
            beside.append(wrk(url, script, args.seconds, args.connections))
        answers += ra.answers
        stuck += ra.stuck
        ensure_alive(server, f"echo run {run + 1} beside the runaways")
        a, b = alone[-1], beside[-1]
        log(f"run {run + 1}/{args.runs}: echo p99 alone {a['p99']} ms ({a['rps']:.0f}/s), "
            f"beside {args.runaways} runaways {b['p99']} ms ({b['rps']:.0f}/s)")

    def med(samples, key):
        vals = [s[key] for s in samples if s[key] is not None]
        return statistics.median(vals) if vals else None

    return {"alone": alone, "beside": beside, "answers": answers, "stuck": stuck,
            "p99_alone": med(alone, "p99"), "p99_beside": med(beside, "p99"),
            "rps_alone": med(alone, "rps"), "rps_beside": med(beside, "rps"),
            "echo_errors": sum(s["errors"] for s in alone + beside)}


def measure_blocked_stop(server, repeats, failures):
    """Figure 2: wall time from sending sleep_once (30 s in one host call) to
    its answer, with a 1 s deadline."""
    url = server.url + "/mcp"
    # A host that cannot stop the guest answers after 30 s: give up well
    # before, and do not repeat, to keep the run short.
    give_up = SLEEP_DEADLINE_S + 9
    times, messages, gave_up = [], [], False
    for i in range(repeats):
        r = post(url, tool_call("sleep_once", {"seconds": 30}), timeout=give_up)
        times.append(r.elapsed)
        # Our own giving up is this figure's finding, not a failed call.
        if r.error and r.error.startswith("TimeoutError"):
            gave_up = True
            messages.append(f"no answer within {give_up:.0f} s")
            log(f"sleep_once {i + 1}/{repeats}: no answer within {give_up:.0f} s; not repeated")
            break
        kind, text = failures.check("sleep_once", r)
        messages.append(text)
        log(f"sleep_once {i + 1}/{repeats}: {r.elapsed:.2f} s, {kind}: {text}")
    expected = f"deadline of {int(SLEEP_DEADLINE_S * 1000)} ms exceeded"
    return {"times": times, "max": max(times), "messages": messages, "gave_up": gave_up,
            "message_ok": not gave_up and all(expected in m for m in messages), "expected": expected}


def flood(url, session, name, meta, failures):
    r = post(url, tool_call(name, meta=meta), session.headers, timeout=60)
    failures.check(name, r)
    return r


def measure_floods(server, session, calls, failures):
    """Figure 3: RSS at start, peak during the floods, and after a settle."""
    url = server.url + "/mcp"
    sampler = RssSampler(server.pid)
    sampler.start()
    try:
        echo_calls(url, 200, failures, "warm-up")
        start = rss_kib(server.pid)
        hwm = reset_peak_rss(server.pid)
        sampler.window()
        rows = []
        for name, meta in FLOODS:
            log_before = server.log_size()
            if hwm:
                reset_peak_rss(server.pid)
            sampler.window()
            # The first call alone, so its answer shows what one flood
            # gets; the rest two at a time, as clients do not wait in line.
            replies = [flood(url, session, name, meta, failures)]
            with ThreadPoolExecutor(2) as pool:
                replies += pool.map(lambda _: flood(url, session, name, meta, failures), range(calls - 1))
            peak = max(sampler.window(), rss_kib(server.pid, "VmHWM") if hwm else 0)
            outcomes = Counter("%s: %s" % outcome(r) for r in replies)
            rows.append({"name": name, "calls": len(replies), "peak": peak, "outcomes": outcomes,
                         "bytes": max(len(r.body) for r in replies),
                         "events": max(sum(r.notifications.values()) for r in replies),
                         "warning": next((r.hangar_warnings[0] for r in replies if r.hangar_warnings), None),
                         "seconds": max(r.elapsed for r in replies),
                         "log_bytes": server.log_size() - log_before})
            log(f"{name}: peak RSS {(peak - start) / 1024:+.1f} MiB, {rows[-1]['events']} events, "
                f"{rows[-1]['bytes']:,} bytes; {dict(outcomes)}")
            if not server.alive():
                log(f"server died during {name}; skipping the remaining floods")
                break
        # Let freed memory go back and the runtime's pools settle, then make
        # sure the server still serves, before the "after" figure.
        if server.alive():
            time.sleep(2)
            echo_calls(url, 200, failures, "after floods")
        after = rss_kib(server.pid)
    finally:
        sampler.stop()
    return {"start": start, "after": after, "rows": rows, "hwm": hwm,
            "peak": max((r["peak"] for r in rows), default=start)}


def ensure_alive(server, during):
    """A crash in the middle of figures 1-2 leaves nothing sound to report on:
    stop there and say so. (Floods go on to the report, which counts it.)"""
    if not server.alive():
        raise SystemExit(f"CRASH: server {server.name} exited with {server.proc.returncode} during {during}:\n"
                         f"{server.log_tail()}")


def check_survival(server):
    alive = server.alive()
    answered, status = server.healthz() if alive else (False, f"exited with {server.proc.returncode}")
    return {"name": server.name, "alive": alive, "healthz": answered, "status": status,
            "panics": server.host_panics()}


# ---------------------------------------------------------------- clients (issue 14)
#
# Server C: the HTTP front against clients rather than guests. Its timeouts
# are set short so the phase takes about a minute; the defaults are longer
# (docs/configuration.md, "Connections and sessions"), the behaviour the same.

NET_HEADER_S, NET_BODY_S, NET_IDLE_S, NET_WRITE_S = 2, 2, 4, 2
NET_MAX_CONNECTIONS = 400
NET_MAX_SESSIONS = 2000
SLOW_HALF_LINES, SLOW_TRICKLED, SLOW_SILENT = 150, 150, 50
CAP_EXTRA = 50
SLOW_BODIES = 50
NEVER_READ_REST, NEVER_READ_MCP = 3, 2
BIG_ANSWER = 24_000_000  # bytes of result text: far more than the socket buffers hold
SEARCHES = 20
HANGUPS = 10  # per surface
DB_HANGUPS = 20
LEDGER_ROWS, LEDGER_QTY, LEDGER_UNITS = 20, 1000, 7
MAX_QUERY_CHARS = 1000
SESSION_FLOOD_GROWTH_MIB = 32
SLOWLORIS_GROWTH_MIB = 32

NET_CONFIG = f"""
header_timeout = "{NET_HEADER_S}s"
body_timeout = "{NET_BODY_S}s"
idle_timeout = "{NET_IDLE_S}s"
write_timeout = "{NET_WRITE_S}s"
max_connections = {NET_MAX_CONNECTIONS}
max_sessions = {NET_MAX_SESSIONS}
# The initialize flood comes from one client: lift the per-client cap so it
# still measures max_sessions' eviction (the door's phase measures the cap).
max_sessions_per_client = 1000000
catalog = "both"

[[tools]]
name = "big_output"
limits = {{ memory_mib = 128, max_output_bytes = 67108864 }}

[[tools]]
name = "spin"
limits = {{ fuel = 1_000_000_000_000, deadline = "10s" }}

[connectors.ledger]
kind = "sqlite"
path = "LEDGER_DB"
init = "LEDGER_SQL"
pool_size = 4

# A write that takes a while (it counts to 2 million first), so a client
# can hang up while it runs.
[[tools]]
name = "ledger.add"
use = "ledger"
read_only = false
statement = \"\"\"
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000)
UPDATE items SET qty = qty + {{{{ inputs.units }}}}
WHERE id = {{{{ inputs.id }}}} AND (SELECT count(*) FROM c) > 0
RETURNING id, qty
\"\"\"
inputs.id = {{ type = "integer", required = true }}
inputs.units = {{ type = "integer", required = true }}

[[tools]]
name = "ledger.all"
use = "ledger"
statement = "SELECT id, qty FROM items ORDER BY id"
"""
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "flood", "version": "0"}}})


def net_config(work):
    db, sql = work / "ledger.db", work / "ledger.sql"
    sql.write_text("CREATE TABLE items (id INTEGER PRIMARY KEY, qty INTEGER NOT NULL);\n" + "".join(
        f"INSERT INTO items VALUES ({i}, {LEDGER_QTY});\n" for i in range(1, LEDGER_ROWS + 1)))
    return NET_CONFIG.replace("LEDGER_DB", str(db)).replace("LEDGER_SQL", str(sql)), db


def connect(port, data=b"", rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    if data:
        s.sendall(data)
    return s


def peek(s):
    """"open" (nothing to read yet), "data" (an answer is waiting) or "closed",
    without waiting (a socket with a timeout would wait for data first)."""
    timeout = s.gettimeout()
    s.setblocking(False)
    try:
        return "data" if s.recv(1, socket.MSG_PEEK) else "closed"
    except BlockingIOError:
        return "open"
    except OSError:
        return "closed"
    finally:
        s.settimeout(timeout)


def read_all(s, timeout=5.0):
    """What the server sent until it closed the connection (or `timeout` passed)."""
    s.settimeout(timeout)
    got = bytearray()
    try:
        while chunk := s.recv(1 << 16):
            got += chunk
    except OSError:
        pass
    return bytes(got)


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def http_report(server):
    """/healthz's `http` and `sessions`, or None when it does not answer."""
    try:
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as r:
            body = json.loads(r.read())
            return body.get("http", {}), body.get("sessions", {})
    except Exception:  # noqa: BLE001 - a missing answer is reported, not fatal
        return None, None


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Slowloris(threading.Thread):
    """Keeps connections that never finish their request head: half request
    lines, heads trickled one byte every 0.25 s, and silent ones. While
    `reopen` is set, one the server closes is opened again at once, as an
    attacker would."""

    HALF_LINE = b"GET /healthz HTT"
    TRICKLE_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.reopen = threading.Event()
        self.reopen.set()
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.socks = []  # (kind, socket)
        self.opened = Counter()
        self.closed = 0
        for kind, n in (("half", SLOW_HALF_LINES), ("trickle", SLOW_TRICKLED), ("silent", SLOW_SILENT)):
            for _ in range(n):
                self.socks.append((kind, self.open(kind)))

    def open(self, kind):
        data = {"half": self.HALF_LINE, "trickle": self.TRICKLE_HEAD, "silent": b""}[kind]
        s = connect(self.port, data)
        self.opened[kind] += 1
        return s

    def run(self):
        while not self.stop_event.wait(0.25):
            with self.lock:
                for i, (kind, s) in enumerate(self.socks):
                    if s is None:
                        continue
                    state = peek(s)
                    if state == "open" and kind == "trickle":
                        try:
                            s.send(b"a")
                        except OSError:
                            state = "closed"
                    if state != "open":
                        self.closed += 1
                        s.close()
                        try:
                            self.socks[i] = (kind, self.open(kind) if self.reopen.is_set() else None)
                        except OSError:
                            self.socks[i] = (kind, None)

    def still_open(self):
        with self.lock:
            return sum(s is not None and peek(s) == "open" for _, s in self.socks)

    def stop(self):
        self.stop_event.set()
        self.join(2)
        close_all(s for _, s in self.socks if s is not None)


def measure_slowloris(server, args, work, failures):
    url = server.url + "/mcp"
    script = echo_script(work)
    wrk(url, script, 1, args.connections)  # warm-up
    alone = wrk(url, script, args.seconds, args.connections)
    start = rss_kib(server.pid)
    loris = Slowloris(server.port)
    loris.start()
    try:
        time.sleep(0.5)
        held = loris.still_open()
        holding = rss_kib(server.pid)
        beside = wrk(url, script, args.seconds, args.connections)
        loris.reopen.clear()
        time.sleep(NET_HEADER_S + 1.5)
        left = loris.still_open()
    finally:
        loris.stop()
    echo_calls(url, 20, failures, "echo after slowloris")
    kept = SLOW_HALF_LINES + SLOW_TRICKLED + SLOW_SILENT
    log(f"slowloris: {held} of {kept} held at the start; echo p99 alone {alone['p99']} ms, beside "
        f"{beside['p99']} ms; {sum(loris.opened.values())} opened, {left} still open "
        f"{NET_HEADER_S + 1.5:.1f} s after the last")
    return {"alone": alone, "beside": beside, "kept": kept, "held": held, "start": start, "holding": holding,
            "opened": sum(loris.opened.values()), "left": left}


def measure_cap(server):
    """More silent connections than max_connections: the extra ones get 503."""
    n = NET_MAX_CONNECTIONS + CAP_EXTRA
    before, _ = http_report(server)
    socks = []
    try:
        for _ in range(n):
            socks.append(connect(server.port))
        time.sleep(1.0)
        answers = [read_all(s, 2) for s in socks if peek(s) == "data"]
    finally:
        close_all(socks)
    time.sleep(0.5)
    after, _ = http_report(server)
    refused = (after or {}).get("refused", 0) - (before or {}).get("refused", 0)
    clear = sum(a.startswith(b"HTTP/1.1 503") and b"max_connections" in a and b"retry-after: 1" in a.lower()
                for a in answers)
    example = next((a.split(b"\r\n\r\n", 1)[-1].decode(errors="replace") for a in answers), "")
    log(f"connection cap: {n} opened, {len(answers)} answered, {clear} with a clear 503, {refused} refused")
    return {"opened": n, "over": CAP_EXTRA, "answered": len(answers), "clear": clear, "refused": refused,
            "example": example}


def measure_slow_bodies(server):
    head = (b"POST /tools/echo/call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{\"text\": ")
    socks = [connect(server.port, head) for _ in range(SLOW_BODIES)]
    try:
        time.sleep(NET_BODY_S + 1.5)
        answers = [read_all(s, 2) for s in socks]
        still = sum(peek(s) == "open" for s in socks)
    finally:
        close_all(socks)
    clear = sum(a.startswith(b"HTTP/1.1 408") and b"body_timeout" in a for a in answers)
    example = next((a.split(b"\r\n\r\n", 1)[-1].decode(errors="replace") for a in answers if a), "")
    log(f"slow bodies: {clear} of {SLOW_BODIES} answered 408; {still} open after")
    return {"tried": SLOW_BODIES, "clear": clear, "still": still, "example": example}


def measure_never_read(server, failures):
    """Clients that ask for a 24 MB answer and read none of it."""
    before_http, _ = http_report(server)
    start = rss_kib(server.pid)
    hwm = reset_peak_rss(server.pid)
    body_rest = json.dumps({"bytes": BIG_ANSWER}).encode()
    body_mcp = json.dumps(tool_call("big_output", {"bytes": BIG_ANSWER})).encode()
    requests = ([b"POST /tools/big_output/call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body_rest), body_rest)] * NEVER_READ_REST
                + [b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                   % (len(body_mcp), body_mcp)] * NEVER_READ_MCP)
    socks = [connect(server.port, req, rcvbuf=4096) for req in requests]
    try:
        time.sleep(1.0)
        stuck_http, _ = http_report(server)
        stuck_rss = rss_kib(server.pid)
        time.sleep(NET_WRITE_S + 2.0)
        after_http, _ = http_report(server)
        peak = max(rss_kib(server.pid, "VmHWM") if hwm else 0, stuck_rss)
        got = [len(read_all(s, 2)) for s in socks]
    finally:
        close_all(socks)
    time.sleep(1.0)
    echo_calls(server.url + "/mcp", 20, failures, "echo after clients that never read")
    after = rss_kib(server.pid)
    n = len(requests)
    # Our own /healthz request is one of the connections counted.
    held = (stuck_http or {}).get("connections", 1) - 1
    left = (after_http or {}).get("connections", 1) - 1
    cut = (after_http or {}).get("write_timeouts", 0) - (before_http or {}).get("write_timeouts", 0)
    log(f"never-reading clients: {held} of {n} held while stuck, {left} left after the write timeout, "
        f"{cut} cut by it; RSS {mib(start):.1f} → peak {mib(peak):.1f} → {mib(after):.1f} MiB")
    return {"tried": n, "held": held, "left": left, "cut": cut, "start": start, "peak": peak, "after": after,
            "largest_read": max(got)}


def session_flood_script(work):
    path = work / "initialize.lua"
    path.write_text(f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.body = '{INITIALIZE}'
""")
    return path


def measure_session_flood(server, args, work, failures):
    url = server.url + "/mcp"
    kept = Session(url)
    start = rss_kib(server.pid)
    latencies, stop = [], threading.Event()

    def use_kept():
        while not stop.wait(0.02):
            r = post(url, ECHO_CALL, kept.headers, timeout=10)
            failures.check("echo in a session during the initialize flood", r)
            latencies.append(r.elapsed * 1000)

    user = threading.Thread(target=use_kept, daemon=True)
    user.start()
    try:
        flood = wrk(url, session_flood_script(work), args.seconds, args.connections)
    finally:
        stop.set()
        user.join(15)
    _, sessions = http_report(server)
    kept_ok = outcome(post(url, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, kept.headers, timeout=10))[0] == "result"
    after = rss_kib(server.pid)
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 2 else None
    log(f"initialize flood: {flood['total']} sessions asked for, {sessions}; kept session works: {kept_ok}; "
        f"RSS {mib(start):.1f} → {mib(after):.1f} MiB; echo p99 beside {p99}")
    return {"asked": flood["total"], "rate": flood["rps"], "errors": flood["errors"], "sessions": sessions or {},
            "kept_ok": kept_ok, "start": start, "after": after, "p99": p99, "calls": len(latencies)}


def measure_search(server, failures):
    url = server.url + "/mcp"
    huge = " ".join(f"invoicez{i:06d}" for i in range(70_000))[:1 << 20]  # 1 MiB of distinct misspelt words
    longest = " ".join(f"echoz{i:03d}" for i in range(200))[:MAX_QUERY_CHARS]
    huge_times, clear = [], 0
    for _ in range(SEARCHES):
        r = post(url, tool_call("search_tools", {"query": huge}), timeout=60)
        huge_times.append(r.elapsed)
        kind, text = failures.check("1 MB search_tools query", r)
        clear += kind == "error" and f"at most {MAX_QUERY_CHARS}" in text
    long_times, answered = [], 0
    for _ in range(SEARCHES):
        r = post(url, tool_call("search_tools", {"query": longest}), timeout=60)
        long_times.append(r.elapsed)
        answered += failures.check("1,000-character search_tools query", r)[0] == "result"
    message = outcome(post(url, tool_call("search_tools", {"query": huge}), timeout=60))[1]
    log(f"search: 1 MiB queries {clear}/{SEARCHES} refused, slowest {max(huge_times) * 1000:.1f} ms; "
        f"1,000-character queries {answered}/{SEARCHES} answered, slowest {max(long_times) * 1000:.1f} ms")
    return {"tried": SEARCHES, "clear": clear, "huge_max": max(huge_times), "long_max": max(long_times),
            "answered": answered, "message": message}


def hang_up(port, request, after):
    s = connect(port, request)
    time.sleep(after)
    s.close()


def measure_hangups(server, db, failures):
    """Clients that send a call and close the socket while it runs."""
    spin_rest = b"POST /tools/spin/call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    body = json.dumps(tool_call("spin")).encode()
    spin_mcp = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with ThreadPoolExecutor(2 * HANGUPS) as pool:
        list(pool.map(lambda req: hang_up(server.port, req, 0.3), [spin_rest] * HANGUPS + [spin_mcp] * HANGUPS))
    # Each spin would run to its 10 s deadline if nothing stopped it.
    time.sleep(1.0)
    c0, t0 = cpu_seconds(server.pid), time.monotonic()
    time.sleep(2.0)
    cpu = (cpu_seconds(server.pid) - c0) / (time.monotonic() - t0)

    body = json.dumps({"id": 1, "units": LEDGER_UNITS}).encode()
    add = (b"POST /tools/ledger.add/call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: hang_up(server.port, add, 0.1), range(DB_HANGUPS)))
    time.sleep(2.0)  # the writes that were running finish
    # The pool must still serve: more calls at once than it has connections.
    after = []
    with ThreadPoolExecutor(8) as pool:
        after = list(pool.map(lambda _: post(server.url + "/mcp", tool_call("ledger.all"), timeout=30), range(32)))
    db_failures = Counter(text for kind, text in map(outcome, after)
                          if kind != "result" or text.startswith("isError"))
    for r in after:
        failures.check("DB calls after hang-ups", r)
    rows = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        rows = dict(conn.execute("SELECT id, qty FROM items"))
    added = rows.get(1, LEDGER_QTY) - LEDGER_QTY
    whole = added % LEDGER_UNITS == 0 and 0 <= added <= LEDGER_UNITS * DB_HANGUPS
    altered = sum(rows.get(i) != LEDGER_QTY for i in range(2, LEDGER_ROWS + 1)) + (LEDGER_ROWS - len(rows)) \
        + (0 if whole else 1)
    log(f"hang-ups: server CPU {cpu:.2f} cores 1-3 s after {2 * HANGUPS} spin hang-ups; "
        f"{DB_HANGUPS} DB write hang-ups: {added // LEDGER_UNITS if whole else '?'} writes done, "
        f"integrity {integrity}, {altered} rows lost or altered; after: {dict(db_failures) or 'all answered'}")
    return {"cpu": cpu, "db_tried": DB_HANGUPS, "done": added // LEDGER_UNITS if whole else None,
            "integrity": integrity, "altered": altered, "after_total": len(after),
            "after_failed": sum(db_failures.values()), "after_failures": db_failures}


def measure_clients(server, db, args, work, failures):
    """Figures 5-11, one after the other on server C; a crash stops the rest."""
    check_tools(server.url + "/mcp")
    echo_calls(server.url + "/mcp", 20, failures, "echo check (server C)")
    out = {"start": rss_kib(server.pid)}
    phases = [
        ("slow", lambda: measure_slowloris(server, args, work, failures)),
        ("cap", lambda: measure_cap(server)),
        ("bodies", lambda: measure_slow_bodies(server)),
        ("never", lambda: measure_never_read(server, failures)),
        ("sessions", lambda: measure_session_flood(server, args, work, failures)),
        ("search", lambda: measure_search(server, failures)),
        ("hangups", lambda: measure_hangups(server, db, failures)),
    ]
    for name, run in phases:
        out[name] = run()
        if not server.alive():
            log(f"server C died during {name}; the remaining client phases are skipped")
            break
    out["end"] = rss_kib(server.pid)
    return out


# ---------------------------------------------------------------- report

HEADER = """# Hangar reliability

How Hangar holds up when guests misbehave (runaway loops beside a healthy
tool, a guest blocked in one long host call, floods of logs, progress,
stderr, output and WASI requests; issue 11) and when clients do (slow,
silent and greedy connections, floods of sessions, huge queries, hang-ups
mid-call; issue 14). Written by `scripts/abuse --write RELIABILITY.md`;
every run replaces this file. The numbers are from one run on one machine:
read them as goal met or not, not to the digit.
"""


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor() or "?")
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    return f"{os.cpu_count()} cores ({cpu}), {mem} GiB, {platform.system()} {platform.release()}"


def git_commit():
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return sha + (" with uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ms(v):
    return "n/a" if v is None else f"{v:.2f} ms"


def mib(kib):
    return kib / 1024


def yes(ok):
    return "yes" if ok else "**NO**"


def guest_inputs(args, f1, f2, f3, survival):
    """Rows of the inputs table for the guests' phases (servers A and B)."""
    crashed = {s["name"]: int(not (s["alive"] and s["healthz"])) for s in survival}
    runaway_total = sum(f1["answers"].values())
    deadline = sum(n for k, n in f1["answers"].items() if k == "deadline error")
    rows = [("runaway guest loops (`spin`) beside echo under wrk", f"{runaway_total} calls",
             f"{deadline} × -32000 `deadline of 5000 ms exceeded`", crashed.get("runaways", 1), "n/a"),
            ("a guest blocked in one long host call (`sleep_once`)", f"{len(f2['times'])} calls",
             f"{sum(f2['expected'] in m for m in f2['messages'])} × -32000 `{f2['expected']}`",
             crashed.get("floods", 1), "n/a")]
    for r in f3["rows"]:
        errors = sum(n for k, n in r["outcomes"].items() if k.startswith("error: "))
        results = r["calls"] - errors
        answer = f"{errors} × -32000 limit error" if errors else ""
        if results:
            answer += ("; " if answer else "") + f"{results} × result" + (
                " (events capped, with a warning)" if r["warning"] else "")
        rows.append((f"guest flood `{r['name']}`", f"{r['calls']} calls", answer, crashed.get("floods", 1), "n/a"))
    return rows


def client_inputs(c):
    """Rows of the inputs table for the clients' phase (server C)."""
    crash = int(not c["survival"]["alive"] or not c["survival"]["healthz"])
    rows = []
    if s := c.get("slow"):
        rows.append(("half request lines, heads trickled a byte at a time, silent connections (slowloris)",
                     f"{s['opened']} connections",
                     f"none owed (no complete request); closed by `header_timeout`: {s['left']} of "
                     f"{s['kept']} still open {NET_HEADER_S + 1.5:.1f} s after the last was opened", crash, "n/a"))
    if s := c.get("cap"):
        rows.append(("connections over `max_connections`", f"{s['refused']} connections",
                     f"{s['clear']} × 503 `too many connections … (max_connections)`", crash, "n/a"))
    if s := c.get("bodies"):
        rows.append(("request bodies that stop coming", f"{s['tried']} requests",
                     f"{s['clear']} × 408 `… (body_timeout)`", crash, "n/a"))
    if s := c.get("never"):
        rows.append(("clients that never read a 24 MB answer (REST and MCP)", f"{s['tried']} requests",
                     f"none owed; {s['cut']} cut off by `write_timeout`", crash, "n/a"))
    if s := c.get("sessions"):
        rows.append(("`initialize` flood", f"{s['asked']:,} initializes",
                     f"none owed; sessions capped: {s['sessions'].get('open', '?')} open of "
                     f"{s['sessions'].get('max', '?')}", crash, "n/a"))
    if s := c.get("search"):
        rows.append(("1 MiB `search_tools` queries", f"{s['tried']} calls",
                     f"{s['clear']} × -32000 `validate: … at most {MAX_QUERY_CHARS}`", crash, "n/a"))
    if s := c.get("hangups"):
        rows.append(("hang-ups mid-call: runaway `spin` over REST and MCP", f"{2 * HANGUPS} calls",
                     "none owed (client gone); the calls are cancelled", crash, "n/a"))
        rows.append(("hang-ups mid-call: a SQLite write over REST", f"{s['db_tried']} calls",
                     "none owed (client gone)", crash,
                     f"{s['altered']} (integrity {s['integrity']}; "
                     f"{s['done'] if s['done'] is not None else '?'} writes done whole)"))
    return rows


def db_inputs(rows):
    """Rows of the inputs table from scripts/abuse_db.py (one per driver and database)."""
    out = []
    for r in rows:
        answer = f"{r['clear_errors']} × clear -32000 error, {r['answered']} results"
        if r["unclear"]:
            answer += f", **{r['unclear']} unclear**"
        out.append((f"{r['driver']} ({r['database']})", f"{r['inputs']} calls",
                    f"{answer}; {r['detail']}".replace("|", "\\|"), r["crashes"], r["rows_lost_or_altered"]))
    return out


def render_inputs(rows):
    out = ["", "## Inputs tried", "",
           "One row per kind of hostile input. A clear error is an answer that says what was wrong; "
           "crashes count the server exiting or /healthz not answering after that input; rows lost or "
           "altered are checked on a database the input could reach (n/a: it reaches none).", "",
           "| input | tried | answered with a clear error | crashes (goal 0) | rows lost or altered (goal 0) |",
           "|---|---|---|---|---|"]
    out += [f"| {i} | {t} | {a} | {c} | {r} |" for i, t, a, c, r in rows]
    return out


def render_clients(args, c):
    rows = []  # (figure, goal, measured, met or None)
    s = c.get("slow")
    if s:
        goal_ms = P99_FACTOR * (s["alone"]["p99"] or 0) + P99_SLACK_MS
        ok = s["beside"]["p99"] is not None and s["beside"]["p99"] <= goal_ms and not s["beside"]["errors"]
        rows += [
            ("echo p99 latency, alone (server C)", "(reference)", ms(s["alone"]["p99"]), None),
            (f"echo p99 latency beside {s['kept']} slowloris connections (re-opened as they close)",
             f"≤ 2 × alone + 2 ms = {goal_ms:.2f} ms, no failed echo",
             ms(s["beside"]["p99"]) + (f", {s['beside']['errors']} failed echo" if s["beside"]["errors"] else ""), ok),
            (f"RSS growth with {s['held']} slowloris connections held", f"< {SLOWLORIS_GROWTH_MIB} MiB",
             f"{mib(s['holding'] - s['start']):+.1f} MiB", mib(s["holding"] - s["start"]) < SLOWLORIS_GROWTH_MIB),
            (f"slowloris connections still open {NET_HEADER_S + 1.5:.1f} s after the last was opened "
             f"(header_timeout {NET_HEADER_S} s)", "0", f"{s['left']} of {s['kept']}", s["left"] == 0),
        ]
    if s := c.get("cap"):
        rows.append((f"{s['opened']} connections at once, max_connections = {NET_MAX_CONNECTIONS}: refused ones "
                     "answered 503 with a clear error", f"all {s['over']} over the cap, each with a clear 503",
                     f"{s['clear']} clear 503s, {s['answered']} answers on {s['refused']} refused",
                     s["clear"] == s["answered"] == s["refused"] == s["over"]))
    if s := c.get("bodies"):
        rows.append((f"bodies that stop coming answered 408 and closed (body_timeout {NET_BODY_S} s)",
                     f"all {s['tried']}, 0 left open", f"{s['clear']} answered, {s['still']} left open",
                     s["clear"] == s["tried"] and s["still"] == 0))
    if s := c.get("never"):
        growth_after = mib(s["after"] - s["start"])
        rows += [
            (f"connections of clients that never read, left {NET_WRITE_S + 3} s after they stopped "
             f"(write_timeout {NET_WRITE_S} s)", "0", f"{s['left']} of {s['tried']} ({s['cut']} cut by write_timeout)",
             s["left"] == 0 and s["cut"] == s["tried"]),
            (f"peak RSS growth while {s['tried']} answers of 24 MB wait for their readers", "(reported)",
             f"{mib(s['peak'] - s['start']):+.1f} MiB", None),
            ("RSS once they were cut off", f"within {AFTER_GROWTH_MIB} MiB of before",
             f"{growth_after:+.1f} MiB ({mib(s['start']):.1f} → {mib(s['after']):.1f} MiB)",
             abs(growth_after) <= AFTER_GROWTH_MIB),
        ]
    if s := c.get("sessions"):
        growth = mib(s["after"] - s["start"])
        opened = s["sessions"].get("open")
        rows += [
            (f"sessions open after {s['asked']:,} initializes in {args.seconds} s", f"≤ max_sessions = {NET_MAX_SESSIONS}",
             f"{opened} ({s['sessions'].get('evicted', '?'):,} evicted)" if opened is not None else "no /healthz",
             opened is not None and opened <= NET_MAX_SESSIONS),
            ("a session used every 20 ms during the flood still works after it", "yes", "yes" if s["kept_ok"] else "no",
             s["kept_ok"]),
            ("echo p99 latency in that session during the flood (a new connection per call)", "(reported)",
             f"{ms(s['p99'])} over {s['calls']} calls", None),
            ("RSS growth over the flood", f"< {SESSION_FLOOD_GROWTH_MIB} MiB",
             f"{growth:+.1f} MiB", growth < SESSION_FLOOD_GROWTH_MIB),
        ]
    if s := c.get("search"):
        rows += [
            ("1 MiB search_tools query: slowest answer (a clear error), HTTP included", "< 0.5 s",
             f"{s['huge_max'] * 1000:.1f} ms; {s['clear']} of {s['tried']} refused",
             s["huge_max"] < 0.5 and s["clear"] == s["tried"]),
            (f"{MAX_QUERY_CHARS}-character query of misspelt words: slowest answer", "< 0.1 s",
             f"{s['long_max'] * 1000:.1f} ms; {s['answered']} of {s['tried']} answered",
             s["long_max"] < 0.1 and s["answered"] == s["tried"]),
        ]
    if s := c.get("hangups"):
        rows += [
            (f"server CPU 1–3 s after {2 * HANGUPS} clients hung up on runaway calls (each would spin 10 s)",
             "< 0.2 cores", f"{s['cpu']:.2f} cores", s["cpu"] < 0.2),
            (f"DB calls answered after {s['db_tried']} hang-ups during SQLite writes (pool of 4, 8 at once)",
             f"all {s['after_total']}", f"{s['after_total'] - s['after_failed']} of {s['after_total']}"
             + (f" ({'; '.join(f'{n}× {k}' for k, n in s['after_failures'].items())})" if s["after_failed"] else ""),
             s["after_failed"] == 0),
            ("rows lost or altered by those hang-ups", "0",
             f"{s['altered']} (integrity_check {s['integrity']})", s["altered"] == 0 and s["integrity"] == "ok"),
        ]
    sv = c["survival"]
    rows += [
        ("crashes of server C (gone or /healthz not answering)", "0",
         "0" if sv["alive"] and sv["healthz"] else f"1 ({sv['status']})", sv["alive"] and sv["healthz"]),
        ("failed calls by this script's normal clients (5xx, connection errors, errors other than -32000) "
         "and host panics", "0", f"{c['failures'].total()} calls, {sv['panics']} panics",
         c["failures"].total() == 0 and sv["panics"] == 0),
    ]
    out = ["", "## Clients: slow, silent, greedy and vanishing (issue 14)", "",
           "| figure | goal | measured | met? |", "|---|---|---|---|"]
    out += [f"| {f} | {g} | {m} | {'—' if ok is None else yes(ok)} |" for f, g, m, ok in rows]
    cap, bodies = c.get("cap", {}), c.get("bodies", {})
    out += [
        "", "### How each figure was measured", "",
        f"**Server C** keeps the guests' default limits but sets `header_timeout = \"{NET_HEADER_S}s\"`, "
        f"`body_timeout = \"{NET_BODY_S}s\"`, `idle_timeout = \"{NET_IDLE_S}s\"`, `write_timeout = \"{NET_WRITE_S}s\"`, "
        f"`max_connections = {NET_MAX_CONNECTIONS}`, `max_sessions = {NET_MAX_SESSIONS}` so the phase is short "
        "(the defaults are 10 s, 30 s, 60 s, 30 s, 512 and 10,000; the behaviour is the same), "
        "`max_sessions_per_client = 1000000` (the initialize flood is one client; the per-client cap is measured "
        "in the door's section), `catalog = \"both\"`, "
        "`spin` with a 10 s deadline and effectively no fuel cap, and a SQLite `ledger` of "
        f"{LEDGER_ROWS} rows with a write that counts to 2 million before it updates a row.",
        "",
        f"**Slowloris.** {SLOW_HALF_LINES} connections send half a request line (`GET /healthz HTT`), "
        f"{SLOW_TRICKLED} a head that never ends, one more byte every 0.25 s, and {SLOW_SILENT} say nothing. "
        "A thread re-opens each one the server closes while wrk (-t1 "
        f"-c{args.connections}, {args.seconds} s) posts echo beside them; then it stops re-opening and counts the "
        "connections still open. Before this issue, 300 such connections were all still open 65 s later.",
        "",
        f"**Connection cap.** {NET_MAX_CONNECTIONS + CAP_EXTRA} silent connections opened at once; the answers on "
        f"them after 1 s are read. Answer: `{cap.get('example', '')}`.",
        "",
        f"**Slow bodies.** {SLOW_BODIES} requests send their head with `Content-Length: 1000` and 9 bytes of body, "
        f"then nothing. Answer: `{bodies.get('example', '')}`.",
        "",
        f"**Clients that never read.** {NEVER_READ_REST} REST and {NEVER_READ_MCP} MCP calls of `big_output` "
        f"({BIG_ANSWER:,} bytes) from sockets with a 4 KiB receive buffer that read nothing. Connections are "
        "/healthz's `http.connections` (less its own); peak is VmHWM. Before this issue each would have held "
        "its answer until the client went away.",
        "",
        f"**Initialize flood.** wrk (-t1 -c{args.connections}) posts `initialize` for {args.seconds} s while one "
        "session, made before, calls echo every 20 ms on a fresh connection. Sessions are /healthz's `sessions`.",
        "",
        f"**Huge queries.** {SEARCHES} `search_tools` calls with 1 MiB of distinct misspelt words (before this "
        f"issue such a query took ~4 s of host time over a 500-tool catalog), then {SEARCHES} with "
        f"{MAX_QUERY_CHARS} characters of them, the most a query may have.",
        "",
        f"**Hang-ups.** {HANGUPS} REST and {HANGUPS} MCP calls of `spin` are sent and their sockets closed after "
        f"0.3 s; the server's CPU time is read 1 to 3 s later. Then {DB_HANGUPS} REST calls of the slow SQLite "
        "write are sent and closed after 0.1 s, 2 s pass, and 32 reads of the ledger run 8 at once. The file is "
        "then checked with `PRAGMA integrity_check`, every other row must be unchanged and the written row "
        "changed by whole writes only.",
        "",
        "**Crashes and failures** as for the guests; the attacks themselves are not counted as failed calls."
        + (f" Failures seen: {'; '.join(c['failures'].examples)}." if c["failures"].examples else ""),
    ]
    return out


def render(args, guests, clients, db=None, topics=None):
    """The report: what ran of the guests' phases (servers A, B), the clients'
    (C) and the DB drivers of scripts/abuse_db.py."""
    out = [HEADER,
           f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  ",
           f"Machine: {machine()}; Hangar, wrk and this script share the cores.  ",
           f"Hangar: commit {git_commit()}  ",
           f"Command: `scripts/abuse --runs {args.runs} --seconds {args.seconds}` "
           f"(wrk -t1 -c{args.connections}, {args.runaways} runaways, {args.flood_calls} calls per flood)"]
    inputs = ((guest_inputs(args, *guests[:3], guests[3]) if guests else [])
              + (client_inputs(clients) if clients else []) + (db_inputs(db) if db else []))
    out += render_inputs(inputs)
    if db:
        out += ["", "DB rows: `scripts/abuse_db.py` against a server of its own (SQLite, and PostgreSQL "
                "when DATABASE_URL answers); see its header for what each driver sends."]
    if guests:
        out += render_guests(args, *guests)
    if clients:
        out += render_clients(args, clients)
    for name, result in (topics or {}).items():
        module = importlib.import_module(TOPICS[name][0])
        out += module.rows(result, args.seconds)
    return "\n".join(out + [""])


def render_guests(args, f1, f2, f3, survival, failures):
    rows = []  # (figure, goal, measured, met or None)
    goal_ms = P99_FACTOR * (f1["p99_alone"] or 0) + P99_SLACK_MS
    p99_ok = f1["p99_beside"] is not None and f1["p99_beside"] <= goal_ms and f1["echo_errors"] == 0
    share = f" ({f1['rps_beside'] / f1['rps_alone']:.0%} of alone)" if f1["rps_alone"] else ""
    rows += [
        ("echo p99 latency, alone", "(reference)", ms(f1["p99_alone"]), None),
        (f"echo p99 latency beside {args.runaways} runaway calls",
         f"≤ 2 × alone + 2 ms = {goal_ms:.2f} ms, no failed echo",
         ms(f1["p99_beside"]) + (f", {f1['echo_errors']} failed echo" if f1["echo_errors"] else ""), p99_ok),
        ("echo throughput, alone", "(reference)", f"{f1['rps_alone']:.0f} calls/s", None),
        (f"echo throughput beside {args.runaways} runaway calls", "(reported)",
         f"{f1['rps_beside']:.0f} calls/s{share}", None),
    ]
    stop_goal = SLEEP_DEADLINE_S + STOP_SLACK_S
    stop_ok = not f2["gave_up"] and f2["max"] <= stop_goal and f2["message_ok"]
    rows.append(("stop of a guest blocked in one host call (sleep_once, deadline 1 s)",
                 f"≤ {stop_goal:.1f} s, error says \"{f2['expected']}\"",
                 (f"> {f2['max']:.1f} s (no answer)" if f2["gave_up"] else f"{f2['max']:.2f} s (max of {len(f2['times'])})")
                 + ("" if f2["message_ok"] or f2["gave_up"] else ", other message"), stop_ok))
    after_growth = mib(f3["after"] - f3["start"])
    gone = " (server gone)" if not f3["after"] else ""
    for label, names, allowance in (
            ("log/progress/stderr floods", SPAM_FLOODS, 0),
            # A guest may itself hold up to memory_mib of linear memory while
            # it builds a huge answer; that is its limit working, not the host
            # growing, so it is added to the goal for these floods.
            ("output and WASI floods, guests' own memory included", OUTPUT_FLOODS,
             GUEST_MEMORY_MIB * FLOODS_AT_ONCE)):
        group = [r for r in f3["rows"] if r["name"] in names]
        worst = max(group, key=lambda r: r["peak"], default=None)
        growth = mib((worst["peak"] if worst else f3["start"]) - f3["start"])
        goal = PEAK_GROWTH_MIB + allowance
        goal_text = (f"< {goal} MiB" if not allowance else
                     f"< {PEAK_GROWTH_MIB} MiB + {FLOODS_AT_ONCE} guests × {GUEST_MEMORY_MIB} MiB = {goal} MiB")
        rows.append((f"peak RSS growth during {label}", goal_text,
                     f"{growth:+.1f} MiB" + (f" (during {worst['name']})" if worst else ""), growth < goal))
    rows += [
        ("RSS after the floods, a 2 s settle and 200 echo calls", f"within {AFTER_GROWTH_MIB} MiB of start",
         f"{after_growth:+.1f} MiB ({mib(f3['start']):.1f} → {mib(f3['after']):.1f} MiB){gone}",
         bool(f3["after"]) and abs(after_growth) <= AFTER_GROWTH_MIB),
    ]
    for r in f3["rows"]:
        if r["name"] in ("log_flood", "progress_flood"):
            rows.append((f"notifications in one {r['name']} answer", f"≤ {MAX_EVENTS + 1} (max_events + 1)",
                         f"{r['events']:,} ({r['bytes']:,} bytes)", r["events"] <= MAX_EVENTS + 1))
    crashes = sum(not (s["alive"] and s["healthz"]) for s in survival)
    rows += [
        ("crashes (server gone or /healthz not answering)", "0",
         str(crashes) + "".join(f"; {s['name']}: {s['status']}" for s in survival), crashes == 0),
        ("failed calls (5xx, connection errors, no JSON-RPC answer, errors other than -32000) "
         "and host panics", "0",
         f"{failures.total()} calls, {sum(s['panics'] for s in survival)} panics",
         failures.total() == 0 and not any(s["panics"] for s in survival)),
    ]

    out = ["", "## Guests: runaways, blocked calls and floods (issue 11)", "",
           "| figure | goal | measured | met? |", "|---|---|---|---|"]
    out += [f"| {f} | {g} | {m} | {'—' if ok is None else yes(ok)} |" for f, g, m, ok in rows]

    per_run = "; ".join(f"{ms(a['p99'])} / {ms(b['p99'])}" for a, b in zip(f1["alone"], f1["beside"]))
    out += [
        "", "### How each figure was measured", "",
        f"**Echo beside runaways.** Server with `[limits] fuel = 1_000_000_000_000, deadline = \"5s\"`, so only the "
        f"deadline stops a runaway. wrk -t1 -c{args.connections} --latency posts the MCP `tools/call` of echo for "
        f"{args.seconds} s, alone, then while {args.runaways} Python threads each keep one `spin` call in flight "
        f"(re-issued as soon as it answers; the {args.runaways} starts spread evenly over one deadline, wrk started once all are in flight). Alone and beside alternate, {args.runs} runs each; "
        f"the table has the medians. p99 per run, alone / beside: {per_run}. Runaway answers: "
        f"{', '.join(f'{k} × {n}' for k, n in f1['answers'].most_common())}"
        + (f"; {f1['stuck']} runaway threads still waiting after the deadline + 35 s." if f1["stuck"] else ".")
        + " A JSON-RPC error to echo counts as a failed echo, not as a fast answer.",
        "",
        f"**Blocked guest.** `sleep_once {{\"seconds\": 30}}` sleeps in one WASI host call; its tool has "
        f"`limits = {{ deadline = \"1s\" }}`. Wall time from sending the call to the complete answer, on a fresh "
        f"connection ({len(f2['times'])} calls): {', '.join(f'{t:.2f} s' for t in f2['times'])}. "
        f"Answers: {'; '.join(dict.fromkeys(f2['messages']))}.",
        "",
        f"**Memory.** Server with default limits. VmRSS of the server after 200 echo calls is the start. Each flood "
        f"runs {args.flood_calls} times with its default size, the first alone and the rest two at a time, over one "
        f"MCP session at log level debug (so log events are forwarded); progress_flood carries a progressToken. "
        f"Answers are read in full. Peak is "
        + ("the kernel's VmHWM, reset before each flood (also sampled every 50 ms)" if f3["hwm"]
           else "VmRSS sampled every 50 ms (VmHWM could not be reset), so a shorter spike can be missed")
        + ". Guest linear memory counts too: a guest may use up to its `memory_mib` (64 MiB by default) while it runs.",
        "", "| flood | calls | answers | peak RSS vs start | largest answer | notifications | slowest | host log |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in f3["rows"]:
        answers = "; ".join(f"{n}× {k}" for k, n in r["outcomes"].most_common()).replace("|", "\\|")
        out.append(f"| {r['name']} | {r['calls']} | {answers} | {mib(r['peak'] - f3['start']):+.1f} MiB | "
                   f"{r['bytes']:,} B | {r['events']:,} | {r['seconds']:.1f} s | +{r['log_bytes']:,} B |")
    warnings = [f"{r['name']}: `{r['warning']}`" for r in f3["rows"] if r["warning"]]
    if warnings:
        out += ["", "Hangar's warning in flooded answers: " + "; ".join(warnings) + "."]
    out += [
        "",
        "**Crashes and failures.** Each server must still run at the end of its phase and answer /healthz. "
        "A failed call is any answer but a result or the JSON-RPC -32000 error that limits answer with "
        "(from the runaways, sleep_once, the floods and the echo calls made by this script; wrk's own "
        "errors are in the echo figure). Host panics are `panicked at` lines in the server log that are "
        "not a guest's stderr."
        + (f" Failures seen: {'; '.join(failures.examples)}." if failures.examples else ""),
    ]
    return out


# ---------------------------------------------------------------- main

# The phases of a module of their own: `--only NAME` runs one; each module
# has `run(work, plugins, seconds)` and `rows(result, seconds)` (its section
# of the report). In the order they run and are written.
TOPICS = {
    "door": ("abuse_door", "servers D and E (the door: pre-auth floods, guessing, streams, a slow issuer)"),
    "outbound": ("abuse_outbound", "server F (a hostile upstream: huge and endless answers, redirects, many events)"),
    "artifacts": ("abuse_artifacts", "server G (a guest filling its artifact directory)"),
    "children": ("abuse_children", "server H (a stdio upstream's child flooding its stderr)"),
    "registry": ("abuse_registry", "server I (a hostile registry: floods while a plugin is pulled)"),
    "values": ("abuse_values", "server J (a plain component's oversized values: byte and string lists in and out)"),
    "code": ("abuse_code", "server K (code mode: runaway programs, memory bombs, console floods beside echo)"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="alone/beside pairs for the echo figure (median taken)")
    ap.add_argument("--seconds", type=int, default=5, help="length of each wrk run")
    ap.add_argument("--connections", type=int, default=8, help="wrk connections for echo")
    ap.add_argument("--runaways", type=int, default=40, help="spin calls kept in flight beside echo")
    ap.add_argument("--flood-calls", type=int, default=5, help="calls of each flood tool")
    ap.add_argument("--only", choices=("guests", "clients", "db", *TOPICS),
                    help="run only the guests' phases (servers A, B), the clients' (server C), "
                         "the DB drivers (scripts/abuse_db.py), or one module's phase "
                         "(NAME: scripts/abuse_NAME.py)")
    ap.add_argument("--write", type=Path, metavar="FILE", help="also write the report as Markdown to FILE")
    args = ap.parse_args()
    if args.write and args.only:
        raise SystemExit("--write needs every phase: leave out --only")
    # A plain SIGTERM would skip the `finally`s and leave a server running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    if args.runs < 1 or args.seconds < 1 or args.flood_calls < 1:
        raise SystemExit("--runs, --seconds and --flood-calls must be at least 1")

    sources = [ROOT / "plugins/echo.wasm", ROOT / "plugins/api-key.wasm", TEST_PLUGINS / "misbehave.wasm",
               TEST_PLUGINS / "abuse.wasm"]
    missing = [str(p) for p in [HANGAR, *sources] if not p.exists()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: run scripts/abuse, which builds them")
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (scripts/abuse installs it)")

    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-"))
    plugins = work / "plugins"
    plugins.mkdir()
    for p in sources:
        shutil.copy(p, plugins / p.name)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    failures = Failures()
    survival = []
    guests = clients = db = None
    topics = {}
    ok = False
    try:
        if args.only in (None, "guests"):
            log("server A (runaways stopped by the deadline only)")
            with Server("runaways", work, plugins, RUNAWAY_CONFIG) as a:
                f1 = measure_runaways(a, args, work, failures)
                survival.append(check_survival(a))
            log("server B (default limits, sleep_once deadline 1 s)")
            with Server("floods", work, plugins, FLOOD_CONFIG) as b:
                check_tools(b.url + "/mcp")
                f2 = measure_blocked_stop(b, 3, failures)
                ensure_alive(b, "sleep_once")
                f3 = measure_floods(b, Session(b.url + "/mcp"), args.flood_calls, failures)
                survival.append(check_survival(b))
            guests = (f1, f2, f3, survival, failures)
        if args.only in (None, "clients"):
            log("server C (clients: short HTTP timeouts, connection and session caps)")
            config, db = net_config(work)
            client_failures = Failures()
            with Server("clients", work, plugins, config) as c:
                clients = measure_clients(c, db, args, work, client_failures)
                clients["survival"] = check_survival(c)
                clients["failures"] = client_failures
        if args.only in (None, "db"):
            log("DB drivers (scripts/abuse_db.py)")
            import abuse_db  # noqa: PLC0415 - reads its payload file on import
            db = abuse_db.run()
        for name, (module, what) in TOPICS.items():
            if args.only in (None, name):
                log(what)
                # Imported late: each module imports this one.
                topics[name] = importlib.import_module(module).run(work, plugins, args.seconds)
        ok = True
    finally:
        # Logs stay for a look when something went wrong.
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"server logs kept in {work}")

    report = render(args, guests, clients, db, topics)
    print(report)
    if args.write:
        args.write.write_text(report)
        log(f"written to {args.write}")


if __name__ == "__main__":
    main()
