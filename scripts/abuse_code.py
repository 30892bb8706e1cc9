"""Hostile programs in code mode (issue 62): `run` with programs that never
end, that grow until the memory cap, and that flood their console, beside a
healthy tool.

  K  echo and code mode (`catalog = "both"`, `[code] enabled`, runs limited
     to a 5 s deadline). Echo's p99 under wrk alone, then beside
     `--runaways` programs `while (true) {}` kept in flight (each re-sent as
     soon as it is stopped), alternating, `--runs` times; the goal is
     RELIABILITY.md's (2 × alone + 2 ms, no failed echo). Then programs that
     allocate until the memory cap, and programs that write to the console
     forever: each must be stopped with its limit named (or its console
     capped), and the server's RSS after them must stay within
     PEAK_GROWTH_MIB of where it was.

Run by scripts/abuse (`--only code`), or alone: `python3
scripts/abuse_code.py` prints its rows.
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import abuse  # noqa: E402 - the path above
from abuse import Failures, Server, ensure_alive, log, post, rss_kib, tool_call, wrk  # noqa: E402

DEADLINE_S = 5
CONFIG = f"""
catalog = "both"
[code]
enabled = true
[code.limits]
deadline = "{DEADLINE_S}s"
"""
RUNAWAY = "while (true) {}"
BOMB = "const keep: Float64Array[] = []; while (true) keep.push(new Float64Array(1 << 21));"
CHATTER = "let i = 0; while (true) console.log('line', i++, 'x'.repeat(200));"
BOMBS = 8
PEAK_GROWTH_MIB = abuse.PEAK_GROWTH_MIB


def run_call(code, id=1):
    return tool_call("run", {"code": code}, id=id)


class Runaways:
    """Keeps `n` runaway programs in flight, each re-sent when it is stopped;
    the starts spread over one deadline, as abuse.Runaways spreads its spins."""

    def __init__(self, url, n, failures):
        self.url, self.failures = url, failures
        self.stop_event = threading.Event()
        self.answers = Counter()
        self.lock = threading.Lock()
        spacing = DEADLINE_S / max(n, 1)
        self.threads = [threading.Thread(target=self.loop, args=(i * spacing,), daemon=True) for i in range(n)]

    def loop(self, delay):
        if self.stop_event.wait(delay):
            return
        while not self.stop_event.is_set():
            r = post(self.url, run_call(RUNAWAY), timeout=DEADLINE_S + 30)
            kind, text = self.failures.check("runaway program", r)
            with self.lock:
                self.answers["deadline error" if "deadline of" in text else f"{kind}: {text[:80]}"] += 1
            if kind == "failure":
                time.sleep(0.1)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        end = time.monotonic() + DEADLINE_S + 35
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))


def measure_runaways(server, work, runs, seconds, connections, runaways, failures):
    url = server.url + "/mcp"
    abuse.echo_calls(url, 20, failures, "echo check")
    script = abuse.echo_script(work)
    wrk(url, script, 1, connections)
    alone, beside, answers = [], [], Counter()
    for i in range(runs):
        alone.append(wrk(url, script, seconds, connections))
        with Runaways(url, runaways, failures) as ra:
            time.sleep(DEADLINE_S + 0.5)
            beside.append(wrk(url, script, seconds, connections))
        answers += ra.answers
        ensure_alive(server, f"echo run {i + 1} beside the runaway programs")
        log(f"run {i + 1}/{runs}: echo p99 alone {alone[-1]['p99']} ms, beside {runaways} runaway programs "
            f"{beside[-1]['p99']} ms")
    return {"p99_alone": [a["p99"] for a in alone], "p99_beside": [b["p99"] for b in beside],
            "rps_alone": [a["rps"] for a in alone], "rps_beside": [b["rps"] for b in beside],
            "echo_errors": sum(s["errors"] for s in alone + beside), "answers": dict(answers)}


def answers_of(url, code, n, at_once=2):
    """Sends `code` as `run` `n` times, `at_once` in flight; their answers'
    texts (an error's message, or the result's first text)."""
    out = []

    def one(i):
        r = post(url, run_call(code, id=i), timeout=DEADLINE_S + 30)
        final = r.final or {}
        if "error" in final:
            return "error: " + final["error"]["message"]
        content = (final.get("result") or {}).get("content") or [{}]
        return "result: " + " | ".join(c.get("text", "")[:120] for c in content)

    for start in range(0, n, at_once):
        threads = []
        got = [None] * at_once
        for k in range(min(at_once, n - start)):
            t = threading.Thread(target=lambda k=k: got.__setitem__(k, one(start + k)))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        out += [g for g in got if g is not None]
    return out


def run(work, plugins, seconds, runs=3, connections=8, runaways=40):
    own = work / "code-plugins"
    own.mkdir(exist_ok=True)
    shutil.copy(abuse.ROOT / "plugins/echo.wasm", own / "echo.wasm")
    failures = Failures()
    log("server K (code mode: runaway programs, memory bombs, console floods)")
    with Server("code", work, own, CONFIG) as k:
        url = k.url + "/mcp"
        figure = measure_runaways(k, work, runs, seconds, connections, runaways, failures)
        rest = rss_kib(k.pid)
        bombs = answers_of(url, BOMB, BOMBS)
        chatter = answers_of(url, CHATTER, 4)
        time.sleep(0.5)
        after = rss_kib(k.pid)
        ensure_alive(k, "the memory bombs and console floods")
        figure.update({"bombs": bombs, "chatter": chatter, "rss_rest_mib": rest / 1024,
                       "rss_after_mib": after / 1024, "alive": k.alive(), "panics": k.host_panics(),
                       "failures": failures.total(), "examples": failures.examples})
    return figure


def yes(ok):
    return "yes" if ok else "**NO**"


def rows(r, seconds):
    """Code mode's rows of RELIABILITY.md (figure, goal, measured, met?)."""
    alone, beside = statistics.median(r["p99_alone"]), statistics.median(r["p99_beside"])
    goal = abuse.P99_FACTOR * alone + abuse.P99_SLACK_MS
    runs = ", ".join(f"{b:.2f}" for b in r["p99_beside"])
    p99_ok = beside <= goal and r["echo_errors"] == 0
    bombs_ok = all("memory limit of 64 MiB exceeded" in a for a in r["bombs"])
    chatter_ok = all("more bytes of console output not kept" in a or "deadline of" in a for a in r["chatter"])
    grew = r["rss_after_mib"] - r["rss_rest_mib"]
    failed = f", {r['echo_errors']} failed echo" if r["echo_errors"] else ""

    def said(answers):
        return "; ".join(sorted({a[:100] for a in answers}))

    out = ["", "## Hostile programs in code mode (issue 62)", "",
           "| figure | goal | measured | met? |", "|---|---|---|---|",
           f"| echo p99 latency, alone | (reference) | {alone:.2f} ms | — |",
           f"| echo p99 latency beside 40 runaway programs (`{RUNAWAY}`) | ≤ 2 × alone + 2 ms = {goal:.2f} ms, "
           f"no failed echo | {beside:.2f} ms (runs {runs}){failed} | {yes(p99_ok)} |",
           f"| runaway programs' answers | the deadline named | {json.dumps(r['answers'])} | "
           f"{yes(set(r['answers']) == {'deadline error'})} |",
           f"| {BOMBS} memory bombs (`{BOMB}`), two at once | each stopped, the cap named | `{said(r['bombs'])}` "
           f"| {yes(bombs_ok)} |",
           f"| 4 console floods (`{CHATTER}`) | stopped at the deadline | `{said(r['chatter'])}` | {yes(chatter_ok)} |",
           f"| RSS after the bombs and floods | ≤ +{PEAK_GROWTH_MIB} MiB | {grew:+.1f} MiB "
           f"({r['rss_rest_mib']:.0f} → {r['rss_after_mib']:.0f} MiB) | {yes(grew <= PEAK_GROWTH_MIB)} |",
           f"| server K alive, no host panic | alive, 0 panics | {'alive' if r['alive'] else 'DEAD'}, "
           f"{r['panics']} panics | {yes(r['alive'] and r['panics'] == 0)} |",
           "", "### How each figure was measured", "",
           f"**Server K** serves echo and code mode (`catalog = \"both\"`, `[code] enabled = true`, runs "
           f"limited to a {DEADLINE_S} s deadline, the default 64 MiB memory cap). Echo goes through wrk "
           f"(-t1 -c8, {seconds} s) alone, then while 40 Python threads each keep one `run` of `{RUNAWAY}` in "
           "flight (re-sent when it is stopped; the starts spread over one deadline, wrk started once all are "
           "in flight), alternating, three runs each; the median p99 of each is the figure. Each program runs "
           "in a fresh instance of the code sandbox under the same fuel, deadline, memory cap, instance pool "
           "and CPU lane as a runaway wasm tool. Then memory bombs and console floods, two at once, and the "
           "server's RSS before and after them.",
           ]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-code-"))
    try:
        abuse.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        result = run(work, work, args.seconds, runs=args.runs)
        print(json.dumps(result, indent=2))
        print("\n".join(rows(result, args.seconds)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
