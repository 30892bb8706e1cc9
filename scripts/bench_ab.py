"""Paired A/B of two hangar binaries on the MCP echo call: fresh servers
per round, alternating which goes first, wrk -t2 -c64 for S seconds each
(after 1 s of warm-up). Prints each round's B/A and the median.
  python3 scripts/bench_ab.py OLD_BIN NEW_BIN ROUNDS SECONDS
Needs plugins/echo.wasm (scripts/bench builds it) and wrk."""
import os, re, shutil, socket, statistics, subprocess, sys, time, urllib.request
A, B, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
work = "/tmp/ab"; shutil.rmtree(work, ignore_errors=True); os.makedirs(work + "/plugins")
shutil.copy(os.path.join(os.path.dirname(__file__), "..", "plugins", "echo.wasm"), work + "/plugins/")
open(work + "/h.toml", "w").write('[server]\ncache_dir = "/tmp/ab-cache"\n')
open(work + "/echo.lua", "w").write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
  'wrk.headers["Accept"] = "application/json, text/event-stream"\n'
  'wrk.body = \'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}\'\n')
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def run(binary):
    p = port()
    proc = subprocess.Popen([binary, "serve", "--config", work + "/h.toml", "--listen", f"127.0.0.1:{p}", "--plugins", work + "/plugins"],
                            env={**os.environ, "RUST_LOG": "warn"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(2000):
        try: urllib.request.urlopen(f"http://127.0.0.1:{p}/healthz", timeout=1); break
        except Exception: time.sleep(0.05)
    subprocess.run(["wrk", "-t2", "-c64", "-d1s", "-s", work + "/echo.lua", f"http://127.0.0.1:{p}/mcp"], capture_output=True)
    out = subprocess.run(["wrk", "-t2", "-c64", f"-d{secs}s", "-s", work + "/echo.lua", f"http://127.0.0.1:{p}/mcp"], capture_output=True, text=True).stdout
    proc.terminate(); proc.wait()
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
ratios = []
for i in range(rounds):
    if i % 2 == 0: a = run(A); b = run(B)
    else: b = run(B); a = run(A)
    ratios.append(b / a); print(f"round {i}: A {a:.0f} B {b:.0f} B/A {b/a:.3f}", flush=True)
print(f"median B/A {statistics.median(ratios):.3f} mean {statistics.mean(ratios):.3f} min {min(ratios):.3f} max {max(ratios):.3f} n={len(ratios)}")
