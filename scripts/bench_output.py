#!/usr/bin/env python3
"""What checking results against their `outputSchema` costs (issue 65's
figure for BENCHMARKS.md; goal: the checked call at ≥ 0.95 of the unchecked
one's rate, same run).

Two Hangars side by side, the same tool: misbehave's `shaped` (`mode =
"good"`, `n = 3`: an echo-sized `{count, items: [{id}]}` with a closed
`outputSchema`), one with `[server] output_validation = "strict"` (the
default), one with `"off"`. Each round drives both at once, one `wrk -t1
-cC` each on `tools/call` for S seconds after a second of warm-up, so
whatever else the machine does falls on both alike (one after the other,
rounds on this shared machine wandered ±20 % either way). Prints each
round's rates, their ratio, and each server's CPU per call (from /proc),
then the medians; and the time the strict server's calls spent in the
output stage (`hangar_stage_duration_seconds{stage="output"}`, the check
itself, timed by the server) against the CPU a call takes: the cost the
noise of the rates hides, and the ratio it comes to.

    python3 scripts/bench_output.py [--rounds 10] [--seconds 5] [--connections 8]

Needs target/release/hangar, target/test-plugins/misbehave.wasm (scripts/test
builds them) and wrk (scripts/bench installs it).
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
TEST_PLUGINS = Path(os.environ.get("TEST_PLUGINS", ROOT / "target/test-plugins"))
BODY = ('{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        '"params":{"name":"shaped","arguments":{"mode":"good","n":3}}}')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(work: Path, mode: str):
    """A Hangar with misbehave and `output_validation = mode`; (process, url)."""
    home = work / mode
    (home / "plugins").mkdir(parents=True)
    shutil.copy(TEST_PLUGINS / "misbehave.wasm", home / "plugins")
    config = home / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{work / "cache"}"\noutput_validation = "{mode}"\n')
    port = free_port()
    proc = subprocess.Popen([str(HANGAR), "serve", "--config", str(config), "--listen",
                             f"127.0.0.1:{port}", "--plugins", str(home / "plugins")],
                            env={**os.environ, "RUST_LOG": "warn"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(6000):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the {mode} server did not start")


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wrk(url, script, seconds, connections):
    return subprocess.Popen(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script),
                             url + "/mcp"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def requests_per_second(proc) -> float:
    out, err = proc.communicate()
    if proc.returncode != 0 or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"failed requests in the run:\n{out}{err}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def paired(servers, script, seconds, connections, first):
    """Both servers driven at once (`first`'s wrk started first): {mode:
    (calls/s, µs of server CPU per call)}."""
    servers = dict(sorted(servers.items(), key=lambda kv: kv[0] != first))
    for p in [wrk(url, script, 1, connections) for _, url in servers.values()]:
        requests_per_second(p)
    before = {m: cpu_seconds(proc.pid) for m, (proc, _) in servers.items()}
    runs = {m: wrk(url, script, seconds, connections) for m, (_, url) in servers.items()}
    rates = {m: requests_per_second(p) for m, p in runs.items()}
    return {m: (rates[m], (cpu_seconds(servers[m][0].pid) - before[m]) * 1e6 / (rates[m] * seconds))
            for m in servers}


def output_stage_us(url: str) -> float:
    """Mean µs per call in the output stage, from the server's /metrics."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()

    def sample(name):
        line = next(l for l in text.splitlines()
                    if l.startswith(name) and 'stage="output"' in l)
        return float(line.split()[-1])
    return sample("hangar_stage_duration_seconds_sum") * 1e6 / sample("hangar_stage_duration_seconds_count")


def check_answers(url: str, checked: bool):
    """One call by hand: a result with the structured content, not an error."""
    req = urllib.request.Request(url + "/mcp", data=BODY.encode(), headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream"})
    text = urllib.request.urlopen(req, timeout=10).read().decode()
    assert '"structuredContent":{"count":3' in text, (checked, text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=8)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-output-"))
    script = work / "call.lua"
    script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      'wrk.headers["Accept"] = "application/json, text/event-stream"\n'
                      f"wrk.body = '{BODY}'\n")
    servers = {mode: start(work, mode) for mode in ("strict", "off")}
    try:
        for mode, (_, url) in servers.items():
            check_answers(url, mode == "strict")
        ratios, costs, strict_cpus = [], [], []
        for i in range(args.rounds):
            first = ("strict", "off")[i % 2]
            got = paired(servers, script, args.seconds, args.connections, first)
            (strict, strict_cpu), (off, off_cpu) = got["strict"], got["off"]
            ratios.append(strict / off)
            costs.append(off_cpu / strict_cpu)
            strict_cpus.append(strict_cpu)
            print(f"round {i}: strict {strict:.0f}/s ({strict_cpu:.1f} µs CPU/call), "
                  f"off {off:.0f}/s ({off_cpu:.1f} µs CPU/call), ratio {ratios[-1]:.3f}, "
                  f"CPU ratio off/strict {costs[-1]:.3f}", flush=True)
        stage = output_stage_us(servers["strict"][1])
        cpu = statistics.median(c for c in strict_cpus)
        print(f"output stage (the check): {stage:.2f} µs per call, against {cpu:.1f} µs of CPU "
              f"per call: ratio {1 - stage / cpu:.3f}")
        print(f"median ratio strict/off {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)}); "
              f"CPU per call off/strict {statistics.median(costs):.3f} "
              f"(min {min(costs):.3f}, max {max(costs):.3f})")
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
