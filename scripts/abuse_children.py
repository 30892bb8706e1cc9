"""A stdio upstream's child flooding its stderr (issue 61): what a child
process can make Hangar hold by what it writes to the one pipe Hangar reads
without a protocol.

  H  `[upstreams.noisy]` is a child of this script's own: a shell that
     first writes to its stderr, then execs a small MCP server over stdio
     (plain Python, no SDK: it answers `initialize`, `tools/list` and one
     tool, `add`). `start = "first-use"`, so Hangar is measured at rest
     before the child starts; the first `tools/list` starts it, and is
     answered once the shell has written everything and the server is up.
     Two children, one server each:
       - one line of 300 MB with no newline (`head -c … /dev/zero | tr`);
       - 1,000,000 short lines (`seq`) as fast as the pipe takes them.
     For each: Hangar's peak RSS (VmHWM, reset just before) and its RSS
     after, against the RSS at rest; the stderr lines in Hangar's log; and
     a call of the child's tool after the flood.

Run by scripts/abuse, or alone: `python3 scripts/abuse_children.py` prints
its rows.
"""

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import abuse  # noqa: E402 - the path above
from abuse import Server, log, reset_peak_rss, rss_kib  # noqa: E402

MIB = 1 << 20
LINE_BYTES = 300_000_000
SHORT_LINES = 1_000_000
PEAK_GOAL_MIB = 64
KEPT_GOAL_MIB = 16

# A minimal MCP server over stdio: newline-delimited JSON-RPC.
CHILD_SERVER = r'''
import json, sys
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "noisy", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "add", "description": "Adds a and b",
                             "inputSchema": {"type": "object", "properties": {
                                 "a": {"type": "integer"}, "b": {"type": "integer"}}}}]}
    elif method == "tools/call":
        args = msg["params"].get("arguments") or {}
        result = {"content": [{"type": "text", "text": str(args.get("a", 0) + args.get("b", 0))}]}
    elif method == "ping":
        result = {}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''

FLOODS = {
    "line": (f"one {LINE_BYTES // 1_000_000} MB stderr line with no newline",
             f"head -c {LINE_BYTES} /dev/zero | tr '\\0' x >&2; echo >&2"),
    "lines": (f"{SHORT_LINES:,} short stderr lines", f"seq 1 {SHORT_LINES} >&2"),
}


def config(work, flood):
    server = work / "noisy_child.py"
    server.write_text(CHILD_SERVER)
    script = f"{flood}; exec {shlex.quote(sys.executable)} {shlex.quote(str(server))}"
    return f"""
[upstreams.noisy]
command = ["sh", "-c", {json.dumps(script)}]
start = "first-use"
prefix = "noisy."
timeout = "120s"
"""


def post(url, path, body, timeout=300):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json",
                                          "accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def measure(work, plugins, name, flood):
    # At `info`, so the child's stderr lines reach the log and can be counted.
    with Server(f"children-{name}", work, plugins, config(work, flood), env={"RUST_LOG": "info"}) as h:
        time.sleep(0.5)
        rest = rss_kib(h.pid)
        reset_peak_rss(h.pid)
        started = time.monotonic()
        # The first listing starts the child and waits for its tools: the
        # flood has been read by then.
        status, body = post(h.url, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        listed = status == 200 and b"noisy.add" in body
        took = time.monotonic() - started
        peak = rss_kib(h.pid, "VmHWM")
        time.sleep(1.5)  # the allocator's delayed purge (1 s), then the RSS kept
        after = rss_kib(h.pid)
        status, body = post(h.url, "/tools/noisy.add/call", {"a": 2, "b": 40})
        answered = status == 200 and b'"42"' in body
        text = h.log_path.read_text(errors="replace")
        return {
            "rest_kib": rest, "peak_kib": peak, "after_kib": after, "seconds": took,
            "listed": listed, "answered": answered,
            "stderr_lines_logged": sum(1 for line in text.splitlines() if "stderr: " in line),
            "cut_said": "more bytes cut" in text,
            "rate_said": "lines a second" in text,
            "alive": h.proc.poll() is None,
        }


def run(work, plugins, seconds):
    del seconds  # each flood is a fixed amount, not a time
    return {name: measure(work, plugins, name, flood) for name, (_, flood) in FLOODS.items()}


def yes(ok):
    return "yes" if ok else "**NO**"


def rows(r, seconds):
    """The noisy child's rows of RELIABILITY.md (figure, goal, measured, met?)."""
    del seconds
    out = ["", "## A stdio upstream's child flooding its stderr (issue 61)", "",
           "| figure | goal | measured | met? |", "|---|---|---|---|"]
    for name, (what, _) in FLOODS.items():
        m = r[name]
        grew = (m["peak_kib"] - m["rest_kib"]) / 1024
        kept = (m["after_kib"] - m["rest_kib"]) / 1024
        out += [
            f"| Hangar's peak RSS while reading {what} | at rest + < {PEAK_GOAL_MIB} MiB | "
            f"+{grew:.1f} MiB ({m['rest_kib'] / 1024:.0f} → {m['peak_kib'] / 1024:.0f} MiB; read in "
            f"{m['seconds']:.1f} s) | {yes(grew < PEAK_GOAL_MIB)} |",
            f"| Hangar's RSS after it | at rest + ≤ {KEPT_GOAL_MIB} MiB | +{kept:.1f} MiB | "
            f"{yes(kept <= KEPT_GOAL_MIB)} |",
            f"| the child's tools after it | listed and answering | "
            f"{'listed' if m['listed'] else 'NOT listed'}, {'answered' if m['answered'] else 'NOT answered'} | "
            f"{yes(m['listed'] and m['answered'] and m['alive'])} |",
        ]
    lines = r["lines"]
    # 100 a second over the time the flood took to read, and the burst.
    allowed = int(100 * (lines["seconds"] + 1.5)) + 2
    out += [
        f"| stderr lines in Hangar's log for {SHORT_LINES:,} lines | ≤ 100 a second: {allowed:,} in the "
        f"{lines['seconds'] + 1.5:.1f} s measured, and the rate said | "
        f"{lines['stderr_lines_logged']:,} lines; the rate {'said' if lines['rate_said'] else 'NOT said'} | "
        f"{yes(lines['rate_said'] and lines['stderr_lines_logged'] <= allowed)} |",
        f"| the 300 MB line in Hangar's log | its head, the cut said | "
        f"{'cut said' if r['line']['cut_said'] else 'cut NOT said'} | {yes(r['line']['cut_said'])} |",
        "", "### How each figure was measured", "",
        "**Server H** has one `[upstreams.noisy]`, started on first use: a shell that writes to its stderr, "
        "then execs a small stdio MCP server (one tool, `add`). Hangar's RSS at rest is read, its peak "
        "(VmHWM) reset, and one `tools/list` starts the child and waits for its tools, so the whole flood has "
        "been read when it answers; then the peak, the RSS 1.5 s later (after the allocator's delayed purge), "
        "one call of `noisy.add`, and the server's log (at `info`, where the stderr lines go). Each stderr line is cut at 4 KiB while it is read "
        "(the rest counted, not kept), and at most 100 lines a second are logged per child. Before issue 61 "
        "stderr was read with `lines()`: a 300 MB line without end took Hangar from 34 to 547 MiB and it "
        "kept 334.",
    ]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the measurements as JSON too")
    args = ap.parse_args()
    if not abuse.HANGAR.exists():
        raise SystemExit(f"missing {abuse.HANGAR}: run scripts/abuse, which builds it")
    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-children-"))
    try:
        plugins = work / "plugins"
        plugins.mkdir()
        abuse.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        log("server H (a stdio upstream's child flooding its stderr)")
        result = run(work, plugins, 0)
        if args.json:
            print(json.dumps(result, indent=2))
        print("\n".join(rows(result, 0)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
