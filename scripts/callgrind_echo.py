"""Instructions per MCP echo call, counted by callgrind: one server under
valgrind (max_instances = 2: valgrind cannot reserve a larger pool), 300
calls of warm-up on one connection, counters zeroed, 2000 calls, dumped.
  python3 scripts/callgrind_echo.py HANGAR_BIN TAG [TOOL]    (output in /tmp/cg/TAG)
TOOL is `echo` (the tool world's) by default, `pipeline` (echo behind the
bench's api-key auth and normalize/redact mappers), or `typed-echo.echo`: the same
echo as a plain component's typed export (tests' typed-echo, from
target/test-plugins). Both are loaded either way.
Repeatable to the instruction for the same binary, whatever else runs."""
import http.client, json, os, subprocess, sys, time, glob, shutil
binary, tag = sys.argv[1], sys.argv[2]
tool = sys.argv[3] if len(sys.argv) > 3 else "echo"
work = f"/tmp/cg/{tag}"
shutil.rmtree(work, ignore_errors=True); os.makedirs(work + "/plugins")
root = os.path.join(os.path.dirname(__file__), "..")
shutil.copy(os.path.join(root, "plugins", "echo.wasm"), work + "/plugins/echo.wasm")
shutil.copy(os.path.join(root, "target", "test-plugins", "typed-echo.wasm"), work + "/plugins/typed-echo.wasm")
config = '[server]\ncache_dir = "/tmp/cg/cache"\nmax_instances = 2\n'
h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
if tool == "pipeline":
    # The bench's 4-stage pipeline: api-key auth, normalize, echo, redact
    # (four fresh instances a call; max_instances leaves room for them).
    for name in ("api-key", "normalize", "redact"):
        shutil.copy(os.path.join(root, "plugins", f"{name}.wasm"), f"{work}/plugins/{name}.wasm")
    config = config.replace("max_instances = 2", "max_instances = 4") + (
        '[plugins.api-key]\nconfig = { keys = "bench=bench-key" }\n'
        '[[tools]]\nname = "echo"\nauth = { plugin = "api-key" }\n'
        'mappers = { input = "normalize", output = "redact" }\n')
    h["x-api-key"] = "bench-key"
    tool = "echo"
open(work + "/h.toml", "w").write(config)
port = 18000 + (hash(tag) % 1000)
env = {**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"}
args = [binary, "serve", "--config", work + "/h.toml", "--listen", f"127.0.0.1:{port}", "--plugins", work + "/plugins"]
# warm the compiled cache without valgrind
p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def up():
    for _ in range(6000):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/livez"); c.getresponse().read(); return
        except Exception:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/healthz"); c.getresponse().read(); return
            except Exception: time.sleep(0.05)
    raise SystemExit("not up")
up(); p.terminate(); p.wait()
out = f"{work}/cg.out"
p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + args, env=env,
                     stdout=subprocess.DEVNULL, stderr=open(work + "/vg.log", "w"))
up()
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "hello"}}})
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
def calls(n):
    for _ in range(n):
        c.request("POST", "/mcp", body, h); r = c.getresponse(); d = r.read(); assert b'"result"' in d, d
calls(300)
subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True, capture_output=True)
calls(2000)
subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True, capture_output=True)
time.sleep(1)
p.terminate(); p.wait(60)
parts = sorted(glob.glob(out + ".*"))
best = None
for f in parts:
    for line in open(f, errors="replace"):
        if line.startswith("totals:"):
            best = (f, int(line.split()[1]))
print(tag, best, "per call", best[1] / 2000 if best else None)
