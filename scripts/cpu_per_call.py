"""CPU time per request, by process: where a saturated run's cores go.

  python3 scripts/cpu_per_call.py [--rounds 3] [--seconds 5] [--connections 64] [--only TEXT]

Under wrk -c64 every process shares this machine's cores, so a scenario's
throughput is roughly the cores divided by the CPU all of them spend per
request: the server's, wrk's, and PostgreSQL's for the DB rows. This script
reads that CPU from /proc (the server's and PostgreSQL's processes) and from
wrk's rusage, for Hangar's scenarios and the baselines they are compared
with in scripts/bench, on freshly started servers each round. It prints
µs of CPU per request for each process and the ratio the totals predict,
so a ratio goal that is missed says how many µs per call it would take.
With `--connections 1` it also prints the wall time per request next to
the CPU: what a one-connection p50 spends waiting rather than computing.
Needs what scripts/bench needs (plugins built, wrk, PostgreSQL)."""

import argparse
import os
import resource
import statistics
import subprocess
from pathlib import Path

import bench
from bench import (API_KEY, BASELINE, DATABASE_URL, DB_BASE, DB_MCP, ECHO_MCP, PIPE_MCP, PY_FRESH, ROOT, WORK,
                   Proc, check_once, free_port, lua_script, psql, start_hangar)

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def postgres_seconds():
    """CPU of every PostgreSQL process (its backends serve both sides alike)."""
    total = 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip().startswith("postgres"):
                total += cpu_seconds(d.name)
        except OSError:
            pass
    return total


def children_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(pid, url, script, seconds, connections):
    """One wrk run: requests, wall seconds, and CPU seconds of the server, wrk and PostgreSQL."""
    bench.wrk(url, script, 1, connections, threads=min(2, connections))
    server, pg, kids = cpu_seconds(pid), postgres_seconds(), children_seconds()
    out = bench.wrk(url, script, seconds, connections, threads=min(2, connections))
    return {"n": out["total"], "rps": out["rps"], "p50": out["p50"],
            "server": cpu_seconds(pid) - server, "wrk": children_seconds() - kids,
            "postgres": postgres_seconds() - pg}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--only")
    args = ap.parse_args()
    psql("CREATE TABLE IF NOT EXISTS bench_items (id int PRIMARY KEY, name text NOT NULL);"
         "INSERT INTO bench_items SELECT g, 'item ' || g FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING")
    plugins = WORK / "plugins"
    plugins.mkdir()
    for name in ("echo", "api-key", "normalize", "redact", "py-greet"):
        (plugins / f"{name}.wasm").write_bytes((ROOT / f"plugins/{name}.wasm").read_bytes())
    (plugins / "echo4.wasm").write_bytes((ROOT / "plugins/echo.wasm").read_bytes())
    # (name, Hangar's or the baseline's, path, script)
    scenarios = [
        ("echo, MCP", "hangar", "/mcp", lua_script("echo", ECHO_MCP)),
        ("4-stage pipeline, MCP", "hangar", "/mcp", lua_script("pipe", PIPE_MCP, headers={"x-api-key": API_KEY})),
        ("Python tool, fresh instances, MCP", "hangar", "/mcp", lua_script("py", PY_FRESH)),
        ("DB tool, cache miss, MCP", "hangar", "/mcp", lua_script("db-miss", DB_MCP, unique=True)),
        ("bare echo", "base", "/echo", lua_script("base-echo", ECHO_MCP)),
        ("in-process query", "base", "/query", lua_script("base-query", DB_BASE, unique=True)),
        # The same, with the session reset Hangar sends after each read-only
        # statement: what of the DB row's gap is the reset, and what the rest.
        ("in-process query with Hangar's session reset", "base", "/query-reset",
         lua_script("base-query-reset", DB_BASE, unique=True)),
    ]
    if args.only:
        scenarios = [s for s in scenarios if args.only in s[0]]
    samples = {name: [] for name, *_ in scenarios}
    for r in range(args.rounds):
        # Fresh servers every round; unique DB ids never repeat across rounds.
        os.environ["BENCH_BASE"] = str(r * 1_000_000_000 + 1)
        hangar = start_hangar(plugins, WORK / f"cache-{r}")
        port = free_port()
        base = Proc([str(BASELINE), f"127.0.0.1:{port}", DATABASE_URL], f"http://127.0.0.1:{port}/echo")
        urls = {"hangar": (hangar.proc.pid, hangar.url), "base": (base.proc.pid, f"http://127.0.0.1:{port}")}
        try:
            check_once(hangar.url + "/mcp", PIPE_MCP, {"x-api-key": API_KEY})
            for name, side, path, script in scenarios:
                pid, url = urls[side]
                samples[name].append(measure(pid, url + path, script, args.seconds, args.connections))
        finally:
            hangar.stop()
            base.stop()
    print(f"wrk -c{args.connections}, {args.seconds} s per run, {args.rounds} rounds (medians of the rounds)")
    print("| scenario | req/s | p50 (min–max) | wall µs/req | server CPU µs/req | wrk µs/req | PostgreSQL µs/req | all CPU µs/req |")
    print("|---|---|---|---|---|---|---|---|")
    totals, rps = {}, {}
    for name, rows in samples.items():
        per = {k: statistics.median(s[k] / s["n"] * 1e6 for s in rows) for k in ("server", "wrk", "postgres")}
        total = statistics.median((s["server"] + s["wrk"] + s["postgres"]) / s["n"] * 1e6 for s in rows)
        wall = statistics.median(args.seconds / s["n"] * 1e6 * args.connections for s in rows)
        totals[name] = total
        rps[name] = statistics.median(s["rps"] for s in rows)
        print(f"| {name} | {statistics.median(s['rps'] for s in rows):.0f} | "
              f"{statistics.median(s['p50'] for s in rows):.3f} ms ({min(s['p50'] for s in rows):.3f}–"
              f"{max(s['p50'] for s in rows):.3f}) | {wall:.1f} | {per['server']:.1f} | "
              f"{per['wrk']:.1f} | {per['postgres']:.1f} | {total:.1f} |")
    for name, base in (("echo, MCP", "bare echo"), ("4-stage pipeline, MCP", "bare echo"),
                       ("DB tool, cache miss, MCP", "in-process query"),
                       ("DB tool, cache miss, MCP", "in-process query with Hangar's session reset")):
        if name in totals and base in totals:
            p50s = [a["p50"] / b["p50"] for a, b in zip(samples[name], samples[base])]
            print(f"{name}: CPU ratio {base} / {name} = {totals[base] / totals[name]:.3f}; "
                  f"req/s ratio {rps[name] / rps[base]:.3f}; p50 / {base}'s p50 by round "
                  f"{statistics.median(p50s):.2f} ({min(p50s):.2f}–{max(p50s):.2f})")


if __name__ == "__main__":
    main()
