"""Drives scripts/abuse: starts `hangar serve` with echo, misbehave and abuse
loaded, measures each isolation figure against its goal (issue 11) and
prints a table; with --write, also RELIABILITY.md.

Two servers, one after the other, because the figures need different limits:
  A  runaways: `[limits] fuel = 1e12, deadline = "5s"`, so only the deadline
     stops a spin; echo latency alone and beside 40 spins (figure 1).
  B  defaults, except sleep_once has a 1 s deadline: the stop of a guest
     blocked in a host call (2), RSS over floods (3).
Both must be alive and answer /healthz at the end of their phase (4).

Self-contained on purpose: scripts/bench.py makes a temp dir at import time.
"""

import argparse
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
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

    def __init__(self, name, work, plugins, config):
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
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"})
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


# ---------------------------------------------------------------- report

HEADER = """# Hangar reliability

How Hangar holds up when guests misbehave: runaway loops beside a healthy
tool, a guest blocked in one long host call, and floods of logs, progress,
stderr, output and WASI requests. Written by `scripts/abuse --write
RELIABILITY.md` (issue 11); every run replaces this file. The numbers are
from one run on one machine: read them as goal met or not, not to the digit.
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


def render(args, f1, f2, f3, survival, failures):
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

    out = [HEADER,
           f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  ",
           f"Machine: {machine()}; Hangar, wrk and this script share the cores.  ",
           f"Hangar: commit {git_commit()}  ",
           f"Command: `scripts/abuse --runs {args.runs} --seconds {args.seconds}` "
           f"(wrk -t1 -c{args.connections}, {args.runaways} runaways, {args.flood_calls} calls per flood)",
           "", "| figure | goal | measured | met? |", "|---|---|---|---|"]
    out += [f"| {f} | {g} | {m} | {'—' if ok is None else yes(ok)} |" for f, g, m, ok in rows]

    per_run = "; ".join(f"{ms(a['p99'])} / {ms(b['p99'])}" for a, b in zip(f1["alone"], f1["beside"]))
    out += [
        "", "## How each figure was measured", "",
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
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="alone/beside pairs for the echo figure (median taken)")
    ap.add_argument("--seconds", type=int, default=5, help="length of each wrk run")
    ap.add_argument("--connections", type=int, default=8, help="wrk connections for echo")
    ap.add_argument("--runaways", type=int, default=40, help="spin calls kept in flight beside echo")
    ap.add_argument("--flood-calls", type=int, default=5, help="calls of each flood tool")
    ap.add_argument("--write", type=Path, metavar="FILE", help="also write the report as Markdown to FILE")
    args = ap.parse_args()
    # A plain SIGTERM would skip the `finally`s and leave a server running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    if args.runs < 1 or args.seconds < 1 or args.flood_calls < 1:
        raise SystemExit("--runs, --seconds and --flood-calls must be at least 1")

    sources = [ROOT / "plugins/echo.wasm", TEST_PLUGINS / "misbehave.wasm", TEST_PLUGINS / "abuse.wasm"]
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
    ok = False
    try:
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
        ok = True
    finally:
        # Logs stay for a look when something went wrong.
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"server logs kept in {work}")

    report = render(args, f1, f2, f3, survival, failures)
    print(report)
    if args.write:
        args.write.write_text(report)
        log(f"written to {args.write}")


if __name__ == "__main__":
    main()
