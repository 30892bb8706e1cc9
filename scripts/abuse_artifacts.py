"""A guest filling its artifact directory (issue 40): how much of the disk
guests that write without end into `/artifacts` take, and whether other
calls keep answering beside them.

  F  `[artifacts]` in a folder of its own with the default per-file and
     per-session quotas (max_file_bytes 10 MiB, max_session_bytes 50 MiB)
     and max_total_bytes 256 MiB. In rounds until the time is up, FLOODERS
     new sessions at once each call the `abuse` guest's `artifact_flood`:
     1 GiB in 1 MiB writes, a new file every 8 MiB, stopping at the first
     failed write and answering what it wrote and the error. A thread
     samples the disk use of the artifacts folder every few milliseconds.
     Echo calls (REST, 4 threads) run alone first, then beside the floods.

Run by scripts/abuse (which owns the plugins folder: echo and abuse), or
alone: `python3 scripts/abuse_artifacts.py [--seconds N]` prints its rows.
"""

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import abuse  # noqa: E402 - the path above
from abuse import Server, log  # noqa: E402

MIB = 1 << 20
MAX_FILE = 10 * MIB
MAX_SESSION = 50 * MIB
MAX_TOTAL = 256 * MIB
FLOODERS = 4
FLOOD_BYTES = 1 << 30
FILE_BYTES = 8 * MIB
ECHO_THREADS = 4


def config(work):
    return f"""
[artifacts]
dir = "{work / 'artifacts'}"
max_file_bytes = {MAX_FILE}
max_session_bytes = {MAX_SESSION}
max_total_bytes = {MAX_TOTAL}

[[tools]]
name = "artifact_flood"
limits = {{ deadline = "30s" }}
"""


def disk_use(path):
    """Bytes of the files under `path` (their sizes, as the quotas count)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


class DiskSampler(threading.Thread):
    """The largest disk use of a folder while it runs."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.peak = path, 0
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.wait(0.003):
            self.peak = max(self.peak, disk_use(self.path))

    def stop(self):
        self.stop_event.set()
        self.join()
        self.peak = max(self.peak, disk_use(self.path))


def rpc(port, body, session=None, timeout=60):
    """One JSON-RPC POST to /mcp: (answer, session id)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = dict(abuse.MCP_HEADERS)
    if session:
        headers["mcp-session-id"] = session
    try:
        conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        sid = r.getheader("mcp-session-id") or session
    finally:
        conn.close()
    if text.startswith("event:") or "\ndata: " in text or text.startswith("data: "):
        data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        text = data[-1] if data else "{}"
    return json.loads(text or "{}"), sid


def flood(port):
    """One flooder: a new session, one artifact_flood call. Answers what
    the guest said (or the error) and the session."""
    _, sid = rpc(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": abuse.PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "abuse-artifacts", "version": "0"}}})
    rpc(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    answer, _ = rpc(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "artifact_flood",
        "arguments": {"bytes": FLOOD_BYTES, "file_bytes": FILE_BYTES}}}, sid)
    if "result" in answer:
        return answer["result"]["content"][0]["text"], sid
    return f"error: {answer.get('error', {}).get('message', answer)}", sid


def echo_load(port, seconds):
    """ECHO_THREADS threads post echo for `seconds`: latencies (ms), failures."""
    body = json.dumps({"text": "hello"})
    stop = time.monotonic() + seconds
    lat, failed = [], [0]
    lock = threading.Lock()

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while time.monotonic() < stop:
            start = time.monotonic()
            try:
                conn.request("POST", "/tools/echo/call", body=body,
                             headers={"content-type": "application/json"})
                r = conn.getresponse()
                ok = r.status == 200 and b"hello" in r.read()
            except OSError:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            with lock:
                if ok:
                    lat.append((time.monotonic() - start) * 1000)
                else:
                    failed[0] += 1
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(ECHO_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, failed[0]


def p99(lat):
    return statistics.quantiles(lat, n=100)[98] if len(lat) >= 2 else float("nan")


def run(work_dir, plugins_dir, seconds):
    """Server G's figures: disk use under artifact floods, echo beside."""
    work = Path(work_dir)
    store = work / "artifacts"
    store.mkdir(exist_ok=True)
    out = {"rounds": 0, "calls": 0, "said": {}, "session_peaks": [], "written": 0}
    with Server("artifacts", work, Path(plugins_dir), config(work)) as f:
        alone, alone_failed = echo_load(f.port, seconds)
        out["alone"] = {"p99": p99(alone), "calls": len(alone), "failed": alone_failed}
        sampler = DiskSampler(store)
        sampler.start()
        beside = {}
        echo = threading.Thread(target=lambda: beside.update(zip(("lat", "failed"), echo_load(f.port, seconds))))
        echo.start()
        started = time.monotonic()
        with ThreadPoolExecutor(FLOODERS) as pool:
            while time.monotonic() - started < seconds:
                for said, sid in pool.map(lambda _: flood(f.port), range(FLOODERS)):
                    out["calls"] += 1
                    kind = said.split(", then ", 1)[-1] if ", then " in said else said
                    out["said"][kind] = out["said"].get(kind, 0) + 1
                    if said.startswith("wrote "):
                        out["written"] += int(said.split()[1])
                    out["session_peaks"].append(disk_use(store / sid) if sid else 0)
                out["rounds"] += 1
        echo.join()
        sampler.stop()
        out["peak"] = sampler.peak
        out["final"] = disk_use(store)
        out["beside"] = {"p99": p99(beside.get("lat", [])), "calls": len(beside.get("lat", [])),
                         "failed": beside.get("failed", 0)}
        out["alive"] = f.alive() and f.healthz()[0]
        out["panics"] = f.host_panics()
    log(f"artifacts: {out['calls']} floods in {out['rounds']} rounds, wrote {out['written'] / MIB:.0f} MiB; "
        f"disk peak {out['peak'] / MIB:.1f} MiB, final {out['final'] / MIB:.1f} MiB; echo p99 "
        f"{out['alone']['p99']:.2f} → {out['beside']['p99']:.2f} ms")
    return out


def yes(ok):
    return "yes" if ok else "**NO**"


def rows(r, seconds):
    """The artifact flood's rows of RELIABILITY.md (figure, goal, measured, met?)."""
    peak_goal = MAX_TOTAL
    session_peak = max(r["session_peaks"], default=0)
    tried = r["calls"] * FLOOD_BYTES
    reported = sum(n for kind, n in r["said"].items() if kind.startswith("write:") or kind.startswith("create:"))
    said = "; ".join(f"{n} × `{kind[:60]}`" for kind, n in sorted(r["said"].items()))
    echo_goal = 2 * r["alone"]["p99"] + 2
    echo_ok = r["beside"]["failed"] == 0 and r["beside"]["p99"] <= echo_goal
    out = [
        "", "## A guest filling its artifact directory (issue 40)", "",
        "| figure | goal | measured | met? |", "|---|---|---|---|",
        f"| disk use of the artifacts folder while {FLOODERS} sessions at a time each try to write 1 GiB, "
        f"{r['rounds']} rounds in {seconds} s ({tried / (1 << 30):.0f} GiB tried) | peak and at rest ≤ "
        f"max_total_bytes = {MAX_TOTAL / MIB:.0f} MiB | peak {r['peak'] / MIB:.1f} MiB, at rest {r['final'] / MIB:.1f} MiB, "
        f"{r['written'] / MIB:.0f} MiB written in all | {yes(r['peak'] <= peak_goal and r['final'] <= MAX_TOTAL)} |",
        f"| one session's folder after its flood | ≤ max_session_bytes = {MAX_SESSION / MIB:.0f} MiB | "
        f"largest {session_peak / MIB:.1f} MiB | {yes(session_peak <= MAX_SESSION)} |",
        f"| what each flooding guest saw | a write error it reports, and its call answers | {said} | "
        f"{yes(reported == r['calls'])} |",
        f"| echo calls beside the floods ({ECHO_THREADS} threads) | all answer; p99 ≤ 2 × alone + 2 ms = "
        f"{echo_goal:.2f} ms | {r['beside']['calls']:,} answered, {r['beside']['failed']} failed; p99 "
        f"{r['beside']['p99']:.2f} ms (alone {r['alone']['p99']:.2f} ms, {r['alone']['calls']:,} calls) | "
        f"{yes(echo_ok)} |",
        f"| crashes and host panics of server G | 0 | {'0' if r['alive'] else 'server gone'}, {r['panics']} panics | "
        f"{yes(r['alive'] and r['panics'] == 0)} |",
        "", "### How each figure was measured", "",
        f"**Server G** keeps artifacts in a folder of its own with `max_file_bytes = {MAX_FILE // MIB} MiB`, "
        f"`max_session_bytes = {MAX_SESSION // MIB} MiB` and `max_total_bytes = {MAX_TOTAL // MIB} MiB`. Each round, "
        f"{FLOODERS} new MCP sessions at once call `artifact_flood` (the `abuse` test guest): 1 GiB in 1 MiB "
        f"writes, a new file every {FILE_BYTES // MIB} MiB, until a write fails. A thread sums the sizes of the "
        "files under the artifacts folder every 3 ms (the peak) and once after the last round (at rest). Every "
        "write counts, as it happens, against live counters of the session's and the store's bytes (stored "
        "files and what running calls have written), so calls at the same time share the quotas; once the "
        "store is full, later floods write nothing and report the refusal. Through Rust's `std::fs` (wasi-libc "
        "streams) the guest sees a bare EIO; the host log names the quota. Echo is `POST /tools/echo/call` from "
        f"{ECHO_THREADS} Python threads for {seconds} s, alone and then beside the rounds. Before this issue "
        "the writes were measured only after the call: each guest filled the disk up to its deadline.",
    ]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the measurements as JSON too")
    args = ap.parse_args()
    sources = [abuse.ROOT / "plugins/echo.wasm", abuse.TEST_PLUGINS / "abuse.wasm"]
    missing = [str(p) for p in [abuse.HANGAR, *sources] if not p.exists()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: run scripts/abuse, which builds them")
    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-artifacts-"))
    try:
        plugins = work / "plugins"
        plugins.mkdir()
        for p in sources:
            shutil.copy(p, plugins / p.name)
        abuse.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        result = run(work, plugins, args.seconds)
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        print("\n".join(rows(result, args.seconds)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
