"""Two hangar binaries side by side in one run (e.g. built on two wasmtime
versions): the same scenarios against fresh servers of each, round after
round, alternating which goes first, so the machine's drift hits both alike.

  python3 scripts/bench_versions.py A_BIN B_BIN [--rounds 6] [--seconds 3]

Scenarios (fresh instances, the default): MCP echo, the 4-stage pipeline and
the Python tool under wrk -c64 (req/s, p50, p99); echo and the Python tool on
one connection (p50); a cold start with 20 plugins (empty compiled cache: the
time to compile them). Prints each scenario's medians and the median of the
B/A pair ratios. Needs what scripts/bench needs (plugins built, wrk,
PostgreSQL at DATABASE_URL for the config's connector)."""

import argparse
import shutil
import statistics
from pathlib import Path

import bench
from bench import API_KEY, ECHO_MCP, PIPE_MCP, PY_FRESH, ROOT, WORK, check_once, lua_script, wrk

# (name, body, headers, connections): the wrk scenarios.
LOADS = [
    ("echo, MCP, c64", ECHO_MCP, None, 64),
    ("4-stage pipeline, MCP, c64", PIPE_MCP, {"x-api-key": API_KEY}, 64),
    ("Python tool, fresh instances, c64", PY_FRESH, None, 64),
    ("echo, MCP, one connection", ECHO_MCP, None, 1),
    ("Python tool, fresh instances, one connection", PY_FRESH, None, 1),
]


def plugins_dir():
    d = WORK / "plugins"
    d.mkdir()
    for name in ("echo", "api-key", "normalize", "redact", "py-greet"):
        shutil.copy(ROOT / f"plugins/{name}.wasm", d / f"{name}.wasm")
    shutil.copy(ROOT / "plugins/echo.wasm", d / "echo4.wasm")
    return d


def one_round(binary, plugins, seconds, scripts, many, extra, tag, only):
    """Every scenario (or those named by `only`) against fresh servers of `binary`: {scenario: sample}."""
    bench.HANGAR = Path(binary)
    out = {}
    if not only:
        cold = bench.start_hangar(many, WORK / f"cold-{tag}", extra)
        out["cold start, 20 plugins (ms)"] = {"ms": cold.startup * 1000}
        cold.stop()
        shutil.rmtree(WORK / f"cold-{tag}", ignore_errors=True)
    server = bench.start_hangar(plugins, WORK / f"cache-{Path(binary).name}-{tag}")
    try:
        for name, body, headers, conns in LOADS:
            if only and only not in name:
                continue
            check_once(server.url + "/mcp", body, headers)
            wrk(server.url + "/mcp", scripts[name], 1, conns, threads=min(2, conns))
            out[name] = wrk(server.url + "/mcp", scripts[name], seconds, conns, threads=min(2, conns))
    finally:
        server.stop()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--only", help="only the load scenarios whose name contains this (no cold start)")
    args = ap.parse_args()
    bench.psql("CREATE TABLE IF NOT EXISTS bench_items (id int PRIMARY KEY, name text NOT NULL)")
    plugins = plugins_dir()
    many, extra = bench.plugin_copies(20)
    scripts = {name: lua_script(f"v-{i}", body, headers=headers) for i, (name, body, headers, _) in enumerate(LOADS)}
    samples = {"A": [], "B": []}
    for r in range(args.rounds):
        order = [("A", args.a), ("B", args.b)]
        for side, binary in order[::-1] if r % 2 else order:
            samples[side].append(one_round(binary, plugins, args.seconds, scripts, many, extra, f"{side}{r}", args.only))
        a, b = samples["A"][-1], samples["B"][-1]
        print(f"round {r}: " + "; ".join(
            f"{k}: A {fmt(a[k])} B {fmt(b[k])}" for k in a), flush=True)
    print(f"\nA = {args.a}\nB = {args.b}\n{args.rounds} rounds of {args.seconds} s; medians, and the median of the "
          "B/A pair ratios (req/s: above 1 = B faster; latency and ms: below 1 = B faster)\n")
    print("| scenario | A | B | B/A (median, range) |\n|---|---|---|---|")
    for key in samples["A"][0]:
        for metric in ("rps", "p50", "p99", "ms"):
            if metric not in samples["A"][0][key] or samples["A"][0][key][metric] is None:
                continue
            a = [s[key][metric] for s in samples["A"]]
            b = [s[key][metric] for s in samples["B"]]
            ratios = [y / x for x, y in zip(a, b) if x]
            unit = {"rps": "req/s", "p50": "ms p50", "p99": "ms p99", "ms": "ms"}[metric]
            places = 0 if metric in ("rps", "ms") else 3
            print(f"| {key}, {unit} | {statistics.median(a):.{places}f} | {statistics.median(b):.{places}f} | "
                  f"**{statistics.median(ratios):.3f}** ({min(ratios):.2f}–{max(ratios):.2f}) |")


def fmt(sample):
    if "ms" in sample:
        return f"{sample['ms']:.0f} ms"
    return f"{sample['rps']:.0f}/s p50 {sample['p50']:.3f} p99 {sample['p99']:.3f}"


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in bench.STARTED:
            if p.proc.poll() is None:
                p.stop()
