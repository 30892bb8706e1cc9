#!/usr/bin/env python3
"""A stdio upstream's tool call through Hangar vs the same server called directly.

The upstream is the Python SDK's FastMCP run over stdio
(tests/clients/upstream_server.py, as the HTTP bench's, tool `add`). A: the SDK's stdio client talks to
`hangar serve --stdio`, which has the server as `[upstreams.up] command = …`
and calls `up.add` through its whole pipeline. B: the SDK's stdio client talks
to the same server directly. One connection each, calls one after another, A
and B alternating in rounds in one run; each call timed in the client.

    PYTHON=tests/.venv/bin/python scripts/bench_upstream_stdio.py [--runs 5] [--calls 500]
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
PYTHON = os.environ.get("PYTHON", sys.executable)
WORK = Path(tempfile.mkdtemp(prefix="hangar-bench-stdio-"))



async def timed(session, name, calls):
    """Milliseconds per call, `calls` calls one after another."""
    took = []
    for _ in range(calls):
        start = time.perf_counter()
        r = await session.call_tool(name, {"a": 2, "b": 3})
        took.append((time.perf_counter() - start) * 1000)
        assert not r.isError and r.content[0].text == "5", r
    return took


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


async def main():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()

    script = ROOT / "tests/clients/upstream_server.py"
    (WORK / "plugins").mkdir()
    config = WORK / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{WORK}/cache"\n[upstreams.up]\n'
                      f'command = [{json.dumps(PYTHON)}, {json.dumps(str(script))}, "stdio"]\n')
    env = {**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"}
    via = StdioServerParameters(command=str(HANGAR), env=env, args=[
        "serve", "--stdio", "--config", str(config), "--plugins", str(WORK / "plugins")])
    direct = StdioServerParameters(command=PYTHON, args=[str(script), "stdio"], env=env)
    with open(WORK / "stderr.log", "w") as errlog:
        async with stdio_client(via, errlog=errlog) as (ra, wa), \
                stdio_client(direct, errlog=errlog) as (rb, wb):
            async with ClientSession(ra, wa) as a, ClientSession(rb, wb) as b:
                await a.initialize()
                await b.initialize()
                await timed(a, "up.add", 50)  # warm-up
                await timed(b, "add", 50)
                a_ms, b_ms, ratios = [], [], []
                for _ in range(args.runs):
                    ra_ = await timed(a, "up.add", args.calls)
                    rb_ = await timed(b, "add", args.calls)
                    a_ms += ra_
                    b_ms += rb_
                    ratios.append(statistics.median(rb_) / statistics.median(ra_))
    print(f"| stdio upstream add, 1 connection | {1000 / statistics.mean(a_ms):.0f} | "
          f"{pct(a_ms, 50):.2f} / {pct(a_ms, 99):.2f} | {1000 / statistics.mean(b_ms):.0f} | "
          f"{pct(b_ms, 50):.2f} / {pct(b_ms, 99):.2f} | **{statistics.median(ratios):.3f}** "
          f"({min(ratios):.2f}–{max(ratios):.2f}) |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
