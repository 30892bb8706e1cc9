"""Oversized values of a plain component (issue 61): what a `list<u8>` or a
`list<string>` argument or result costs Hangar's memory, and what a result
past `max_output_bytes` costs before it is refused.

  J  `typed-kitchen` (tests/plugins), a plain component whose interface
     `bulk` takes and makes byte lists and string lists of any size, served
     with room for 48 MB values (`max_body_bytes` 160 MiB, the plugin's
     `memory_mib` 256, `max_output_bytes` 256 MiB) or, for the refusals,
     with the default `max_output_bytes` (8 MiB). Each case runs on a fresh
     server: one small call warms it, its RSS is read and its peak (VmHWM)
     reset, then one call (or four at once) and the peak again. Each case
     runs RUNS times; the median growth is reported with its range.

The goal: the growth of Hangar's peak RSS stays within 16 × the data the
call moves (the byte list's or the strings' bytes, in or out) + 64 MiB; a
result over `max_output_bytes` is refused with the limit named, growing
the peak by no more than the guest's own copy of it + 16 × the limit (the
most JSON that may be built before the refusal). Before
issue 61 each byte was a 32-byte `Val` both ways: a 3 MB echo took 459 MiB,
four at once 910 MiB, and a 48 MB result could not be lifted at all.

Run by scripts/abuse (`--only values`), or alone: `python3
scripts/abuse_values.py` prints its rows.
"""

import argparse
import base64
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import abuse  # noqa: E402 - the path above
from abuse import Server, log, reset_peak_rss, rss_kib  # noqa: E402

MB = 1 << 20
KITCHEN = "typed-kitchen"
B = KITCHEN + ".bulk."
RUNS = 3
FACTOR = 16
CONSTANT_MIB = 64
LIMIT = 8 * MB

ROOMY = f"""
max_body_bytes = {160 * MB}
[plugins.{KITCHEN}]
limits = {{ memory_mib = 256, max_output_bytes = {256 * MB}, deadline = "60s", fuel = 100_000_000_000 }}
"""
STRICT = f"""
[plugins.{KITCHEN}]
limits = {{ memory_mib = 256, deadline = "60s", fuel = 100_000_000_000 }}
"""


def byte_arg(mib):
    return base64.b64encode(bytes(range(256)) * (mib * MB // 256)).decode()


def strings(mib):
    one = ("abcdefghijklmnopqrstuvwxyz" * 40)[:1024]
    return [one] * (mib * 1024)


# name: (what, config, calls at once, tool, arguments (a function: built
# only when the case runs), MiB of data moved per call, whether it must be
# refused).
CASES = {
    "bytes-in-3": ("a 3 MB `list<u8>` argument", ROOMY, 1, "count-bytes", lambda: {"v": byte_arg(3)}, 3, False),
    "bytes-in-48": ("a 48 MB `list<u8>` argument", ROOMY, 1, "count-bytes", lambda: {"v": byte_arg(48)}, 48, False),
    "bytes-out-3": ("a 3 MB `list<u8>` result", ROOMY, 1, "make-bytes", lambda: {"n": 3 * MB}, 3, False),
    "bytes-out-48": ("a 48 MB `list<u8>` result", ROOMY, 1, "make-bytes", lambda: {"n": 48 * MB}, 48, False),
    "strings-in-3": ("a 3 MB `list<string>` argument (1 KiB strings)", ROOMY, 1, "count-strings",
                     lambda: {"v": strings(3)}, 3, False),
    "strings-in-48": ("a 48 MB `list<string>` argument (1 KiB strings)", ROOMY, 1, "count-strings",
                      lambda: {"v": strings(48)}, 48, False),
    "strings-out-3": ("a 3 MB `list<string>` result (1 KiB strings)", ROOMY, 1, "make-strings",
                      lambda: {"n": 3 * 1024, "size": 1024}, 3, False),
    "strings-out-48": ("a 48 MB `list<string>` result (1 KiB strings)", ROOMY, 1, "make-strings",
                       lambda: {"n": 48 * 1024, "size": 1024}, 48, False),
    "echo-3": ("a 3 MB `list<u8>` echo (in and out)", ROOMY, 1, "../types.echo-bytes",
               lambda: {"v": byte_arg(3)}, 6, False),
    "echo-3-x4": ("four 3 MB `list<u8>` echoes at once", ROOMY, 4, "../types.echo-bytes",
                  lambda: {"v": byte_arg(3)}, 24, False),
    "refuse-bytes": ("a 48 MB `list<u8>` result over the 8 MiB limit", STRICT, 1, "make-bytes",
                     lambda: {"n": 48 * MB}, 48, True),
    "refuse-strings": ("a 48 MB `list<string>` result over the 8 MiB limit", STRICT, 1, "make-strings",
                       lambda: {"n": 48 * 1024, "size": 1024}, 48, True),
    "refuse-nested": ("a 48 MB `list<u8>` in a record in an option in a result, over the limit", STRICT, 1,
                      "make-blob", lambda: {"n": 48 * MB}, 48, True),
    "refuse-bools": ("48 M `bool`s (one value per guest byte), over the limit", STRICT, 1, "make-bools",
                     lambda: {"n": 48 * MB}, 48, True),
}


def tool_name(tool):
    return KITCHEN + ".types." + tool[len("../types."):] if tool.startswith("../") else B + tool


def call(url, tool, body):
    """One MCP tools/call: the JSON-RPC answer (parsed)."""
    req = urllib.request.Request(url + "/mcp", data=body, headers=abuse.MCP_HEADERS)
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"http": e.code, "body": e.read()[:300].decode("utf-8", "replace")}


def request(tool, args):
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool_name(tool), "arguments": args}}).encode()


def measure_once(work, plugins, name, case):
    _, config, parallel, tool, args, _, _ = case
    body = request(tool, args())
    with Server(f"values-{name}", work, plugins, config) as j:
        call(j.url, "count-bytes", request("count-bytes", {"v": ""}))
        time.sleep(0.3)
        rest = rss_kib(j.pid)
        reset_peak_rss(j.pid)
        answers = [None] * parallel

        def one(i):
            answers[i] = call(j.url, tool, body)

        started = time.monotonic()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(parallel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        peak = rss_kib(j.pid, "VmHWM")
        alive = j.alive()
    return {"rest_kib": rest, "peak_kib": peak, "seconds": took, "answers": answers, "alive": alive}


def summary(answer):
    """`ok`, or the error's message."""
    if "result" in answer and not answer["result"].get("isError"):
        return "ok"
    if "error" in answer:
        return answer["error"]["message"]
    return json.dumps(answer)[:200]


def run(work, plugins, seconds):
    del seconds  # each case is a fixed amount, not a time
    own = work / "values-plugins"
    own.mkdir(exist_ok=True)
    shutil.copy(abuse.TEST_PLUGINS / f"{KITCHEN}.wasm", own / f"{KITCHEN}.wasm")
    out = {}
    for name, case in CASES.items():
        runs = []
        for i in range(RUNS):
            log(f"server J: {case[0]} (run {i + 1} of {RUNS})")
            m = measure_once(work, own, f"{name}-{i}", case)
            runs.append({"grew_mib": (m["peak_kib"] - m["rest_kib"]) / 1024, "rest_mib": m["rest_kib"] / 1024,
                         "seconds": m["seconds"], "answers": [summary(a) for a in m["answers"]],
                         "alive": m["alive"]})
        out[name] = runs
    return out


def yes(ok):
    return "yes" if ok else "**NO**"


def rows(r, seconds):
    """The oversized values' rows of RELIABILITY.md (figure, goal, measured, met?)."""
    del seconds
    out = ["", "## Oversized values of a plain component (issue 61)", "",
           "| figure | goal | measured | met? |", "|---|---|---|---|"]
    for name, (what, _, _, _, _, data_mib, refuse) in CASES.items():
        runs = r[name]
        grew = [m["grew_mib"] for m in runs]
        med = statistics.median(grew)
        answers = {a for m in runs for a in m["answers"]}
        alive = all(m["alive"] for m in runs)
        spread = f"{min(grew):.0f}–{max(grew):.0f}"
        rest = statistics.median(m["rest_mib"] for m in runs)
        if refuse:
            goal_mib = data_mib + FACTOR * LIMIT // MB
            named = all(a.startswith("handler: output of at least ") and a.endswith(f"the limit of {LIMIT} bytes")
                        for a in answers)
            said = "; ".join(sorted(answers))
            out.append(
                f"| peak RSS growth for {what} | refused naming the limit; ≤ the guest's {data_mib} MB + "
                f"{FACTOR} × the {LIMIT // MB} MiB limit = {goal_mib} MiB | "
                f"+{med:.0f} MiB (runs {spread}; at rest {rest:.0f} MiB); "
                f"`{said}` | {yes(named and alive and max(grew) <= goal_mib)} |")
        else:
            goal_mib = FACTOR * data_mib + CONSTANT_MIB
            answered = answers == {"ok"}
            took = statistics.median(m["seconds"] for m in runs)
            out.append(
                f"| peak RSS growth for {what} | ≤ {FACTOR} × {data_mib} MB + {CONSTANT_MIB} MiB = "
                f"{goal_mib} MiB, answered | +{med:.0f} MiB (runs {spread}; {med / data_mib:.1f} × the data; "
                f"at rest {rest:.0f} MiB; {took:.1f} s) | {yes(answered and alive and max(grew) <= goal_mib)} |")
    out += [
        "", "### How each figure was measured", "",
        f"**Server J** serves `{KITCHEN}` (tests/plugins), a plain component whose interface `bulk` takes and "
        "makes byte lists and string lists of any size (`count-bytes`, `count-strings`, `make-bytes`, "
        "`make-strings`, `make-blob`, `make-bools`; the echo is `types.echo-bytes`). Each case runs on a fresh "
        "server: one small call, then its RSS at rest is read and its peak (VmHWM) reset, then the case's "
        f"call (or four at once, over MCP) and the peak again; {RUNS} runs, the median growth and the range. "
        "The data a call moves is the bytes of its byte list or strings (the JSON carries a third more as "
        "base64); the growth includes the guest's own copy in its linear memory, the request body and its "
        "parsed JSON, and the answer's JSON (text and structured content). The roomy server has "
        f"`max_body_bytes` 160 MiB and the plugin's `memory_mib` 256 and `max_output_bytes` 256 MiB; the "
        "strict one the default `max_output_bytes` (8 MiB). A plain component's arguments are lowered from "
        "the call's JSON straight into guest memory (base64 decoded into the guest's allocation) and its "
        "result lifted straight into JSON, each string and byte list in one piece, the JSON counted against "
        "`max_output_bytes` before it is built. Before issue 61 every value went through wasmtime's `Val`, "
        "32 bytes an element: a 3 MB byte list echo took 459 MiB, four at once 910 MiB, and a 48 MB result "
        "ran out of wasmtime's host-call fuel instead of being refused by the limit.",
    ]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the measurements as JSON too")
    ap.add_argument("--only", nargs="*", choices=list(CASES), help="run only these cases")
    args = ap.parse_args()
    if not abuse.HANGAR.exists():
        raise SystemExit(f"missing {abuse.HANGAR}: run scripts/abuse, which builds it")
    if args.only:
        for name in list(CASES):
            if name not in args.only:
                del CASES[name]
    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-values-"))
    try:
        plugins = work / "plugins"
        plugins.mkdir()
        abuse.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        log("server J (plain components' bulk values)")
        result = run(work, plugins, 0)
        if args.json:
            print(json.dumps(result, indent=2))
        print("\n".join(rows(result, 0)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
