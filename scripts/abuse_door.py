"""The door (issue 39): what a client that has not proved who it is can make
Hangar do, measured against a server that checks callers.

  D  a server-wide `[auth]` check (api-key), a tool that takes uploads,
     `trusted_proxies = ["127.0.0.1"]` so this script can be several
     clients (each names itself in X-Forwarded-For), small stream and
     session caps per client.
     - pre-auth body floods: 50 anonymous 50 MB uploads at once, and 50
       50 MB JSON bodies with a wrong key: each answered from its head,
       RSS held;
     - an auth-guessing flood: wrk sends wrong keys from one client for S
       seconds; how many auth components ran, how many guesses got 429
       unchecked, and a healthy caller's p99 alone and beside it;
     - a stream flood: one client opens 530 sessions and a GET /mcp stream
       on each; how many it holds, and whether /healthz and a healthy
       caller still answer.
  E  `[oauth]` whose issuer (a local HTTP server) hangs for 20 s on every
     key fetch after the first; tokens are Ed25519 JWTs made with the
     openssl command line. A valid caller's p99 alone, and beside a client
     sending a token with an unknown key id every 0.5 s.

Run by scripts/abuse (`--only door`); `rows()` gives its section of
RELIABILITY.md.
"""

import base64
import http.server
import json
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import abuse
from abuse import Server, free_port, log, reset_peak_rss, rss_kib, wrk

KEY = "door-key-0123456789abcdef0123456"
FLOOD_BYTES = 50 << 20
UPLOAD_FLOODS = 50
STREAM_CLIENT_SESSIONS = 530
MAX_STREAMS_PER_CLIENT = 16
MAX_SESSIONS_PER_CLIENT = 64
GUESS_CONNECTIONS = 4


def door_config(work):
    (work / "door.sql").write_text("CREATE TABLE docs (name TEXT, body BLOB);\n")
    return f"""
trusted_proxies = ["127.0.0.1"]
max_streams_per_client = {MAX_STREAMS_PER_CLIENT}
max_sessions_per_client = {MAX_SESSIONS_PER_CLIENT}

[auth]
plugin = "api-key"

[plugins.api-key]
config = {{ keys = "door={KEY}" }}

[uploads]
dir = "{work / 'uploads'}"

[connectors.files]
kind = "sqlite"
path = "{work / 'door.db'}"
init = "{work / 'door.sql'}"

[[tools]]
name = "docs.store"
description = "Keeps an uploaded file"
use = "files"
read_only = false
statement = "INSERT INTO docs (name, body) VALUES ({{{{ inputs.name }}}}, {{{{ inputs.file }}}}) RETURNING name"
inputs.name = {{ type = "string", required = true }}
inputs.file = {{ type = "string", required = true }}
consumes_uploads = ["file"]
"""


def metric(url, name):
    with abuse.urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = abuse.re.search(rf"^{abuse.re.escape(name)} (\S+)$", text, abuse.re.M)
    return float(m.group(1)) if m else float("nan")


def flood_body(port, path, headers, total, timeout=20.0):
    """Sends a head declaring `total` bytes, then the body in 1 MiB chunks
    while the server takes it; returns (status, body excerpt, bytes sent)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {total}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s.sendall(head.encode())
    chunk, sent, answer = b"x" * (1 << 20), 0, b""
    s.setblocking(False)
    deadline = time.monotonic() + timeout
    while sent < total and time.monotonic() < deadline and b"\r\n\r\n" not in answer:
        try:
            answer += s.recv(65536)
        except BlockingIOError:
            pass
        except OSError:
            break
        try:
            sent += s.send(chunk[: total - sent])
        except BlockingIOError:
            time.sleep(0.002)
        except OSError:
            break
    s.settimeout(5)
    s.setblocking(True)
    try:
        while True:
            more = s.recv(65536)
            if not more:
                break
            answer += more
    except OSError:
        pass
    s.close()
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "none"
    return status, answer.split(b"\r\n\r\n", 1)[-1][:160].decode(errors="replace"), sent


def measure_body_floods(server):
    start = rss_kib(server.pid)
    reset_peak_rss(server.pid)
    uploads = [("/uploads", {"Content-Type": "multipart/form-data; boundary=x",
                             "X-Forwarded-For": f"192.0.2.{i}"}) for i in range(UPLOAD_FLOODS)]
    bodies = [("/tools/echo/call", {"Content-Type": "application/json", "X-Api-Key": "wrong",
                                    "X-Forwarded-For": f"192.0.2.{100 + i}"}) for i in range(UPLOAD_FLOODS)]
    out = {}
    for name, batch in (("uploads", uploads), ("bodies", bodies)):
        started = time.monotonic()
        with ThreadPoolExecutor(len(batch)) as pool:
            answers = list(pool.map(lambda a: flood_body(server.port, a[0], a[1], FLOOD_BYTES), batch))
        statuses = abuse.Counter(a[0] for a in answers)
        out[name] = {"statuses": dict(statuses), "example": answers[0][1],
                     "sent_mib": sum(a[2] for a in answers) / (1 << 20),
                     "seconds": time.monotonic() - started}
        log(f"{name} floods: {dict(statuses)}, {out[name]['sent_mib']:.0f} MiB taken by the kernel")
    out["peak_mib"] = (rss_kib(server.pid, "VmHWM") - start) / 1024
    return out


def guess_script(work):
    path = work / "guess.lua"
    path.write_text("""
wrk.method = "POST"
wrk.body = '{"text":"x"}'
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, "/tools/echo/call", {
    ["Content-Type"] = "application/json",
    ["X-Forwarded-For"] = "203.0.113.9",
    ["X-Api-Key"] = "guess-" .. n,
  })
end
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) c401 = 0; c429 = 0 end
function response(status, headers, body)
  if status == 401 then c401 = c401 + 1 elseif status == 429 then c429 = c429 + 1 end
end
function done(summary, latency, requests)
  local a, b = 0, 0
  for _, t in ipairs(threads) do a = a + (t:get("c401") or 0); b = b + (t:get("c429") or 0) end
  io.write(string.format("c401: %d\\nc429: %d\\n", a, b))
end
""")
    return path


def healthy_script(work, name, headers):
    path = work / name
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"',
             'wrk.body = \'{"text":"hello"}\'']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def measure_guessing(server, work, seconds):
    healthy = healthy_script(work, "healthy.lua", {"X-Api-Key": KEY, "X-Forwarded-For": "198.51.100.1"})
    url = server.url + "/tools/echo/call"
    alone = wrk(url, healthy, seconds, 4)
    # Every guess that reaches the auth component is refused by it: the
    # refusals counted are the guesses that ran one (the healthy caller's
    # checks all pass, and are not among them).
    failures = metric(server.url, "hangar_auth_failures_total")
    out = {}

    def guess():
        p = subprocess.run(["wrk", "-t1", f"-c{GUESS_CONNECTIONS}", f"-d{seconds + 1}s", "-s", str(guess_script(work)), url],
                           capture_output=True, text=True, timeout=seconds + 60)
        out["guesses"] = int(abuse.re.search(r"(\d+) requests in", p.stdout).group(1))
        out["c401"] = int(abuse.re.search(r"c401: (\d+)", p.stdout).group(1))
        out["c429"] = int(abuse.re.search(r"c429: (\d+)", p.stdout).group(1))

    t = threading.Thread(target=guess)
    t.start()
    time.sleep(0.5)
    beside = wrk(url, healthy, seconds, 4)
    t.join()
    out["checks"] = metric(server.url, "hangar_auth_failures_total") - failures
    out["alone"], out["beside"] = alone, beside
    log(f"guessing: {out['guesses']} guesses, {out['c401']} × 401, {out['c429']} × 429, "
        f"{out['checks']:.0f} auth checks; healthy p99 {alone['p99']:.2f} → {beside['p99']:.2f} ms")
    return out


def open_stream(port, session):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall((f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
               f"Mcp-Session-Id: {session}\r\nX-Forwarded-For: 203.0.113.77\r\n\r\n").encode())
    head = b""
    try:
        while b"\r\n\r\n" not in head:
            more = s.recv(4096)
            if not more:
                break
            head += more
    except OSError:
        pass
    status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "none"
    return s, status


def initialize(url, client, key=KEY):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": abuse.PROTOCOL, "capabilities": {}, "clientInfo": {"name": "door", "version": "0"}}})
    req = abuse.urllib.request.Request(url + "/mcp", body.encode(), {
        **abuse.MCP_HEADERS, "X-Forwarded-For": client, "X-Api-Key": key})
    try:
        with abuse.urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("mcp-session-id")
    except abuse.urllib.error.HTTPError as e:
        return e.code, None


def measure_streams(server, work, seconds):
    healthy = healthy_script(work, "healthy2.lua", {"X-Api-Key": KEY, "X-Forwarded-For": "198.51.100.2"})
    url = server.url + "/tools/echo/call"
    alone = wrk(url, healthy, seconds, 4)
    sessions = abuse.Counter()
    socks, streams = [], abuse.Counter()
    for _ in range(STREAM_CLIENT_SESSIONS):
        status, sid = initialize(server.url, "203.0.113.77")
        sessions[status] += 1
        if sid:
            s, st = open_stream(server.port, sid)
            streams[st] += 1
            socks.append((s, st))
    # Streams the flooding client still holds open: those granted (200) whose
    # connection is still open (a refused one may stay open as a keep-alive
    # connection, holding no stream).
    time.sleep(0.5)
    held = sum(st == "200" and abuse.peek(s) == "open" for s, st in socks)
    other_health = server.healthz()
    other_session = initialize(server.url, "198.51.100.3")[0]
    beside = wrk(url, healthy, seconds, 4)
    abuse.close_all([s for s, _ in socks])
    log(f"streams: sessions {dict(sessions)}, streams {dict(streams)}, {held} held; "
        f"/healthz {other_health}, another client's initialize {other_session}")
    return {"sessions": dict(sessions), "streams": dict(streams), "held": held, "health": other_health,
            "other_session": other_session, "alone": alone, "beside": beside}


# ---------------------------------------------------------------- a slow issuer

def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """An Ed25519 key (openssl), its JWKS served by a local HTTP server that
    answers the first fetch at once and hangs `hang` seconds on later ones."""

    def __init__(self, work, hang=20.0):
        self.key = work / "issuer.pem"
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(self.key)], check=True)
        der = subprocess.run(["openssl", "pkey", "-in", str(self.key), "-pubout", "-outform", "DER"],
                             check=True, capture_output=True).stdout
        self.x = b64(der[-32:])
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.fetches = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                issuer.fetches += 1
                if issuer.fetches > 1:
                    time.sleep(hang)
                body = json.dumps({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA",
                                             "use": "sig", "x": issuer.x}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def token(self, resource, kid="k1", sub="door"):
        now = int(time.time())
        head = b64(json.dumps({"alg": "EdDSA", "typ": "JWT", "kid": kid}).encode())
        claims = b64(json.dumps({"iss": self.url, "aud": resource, "sub": sub, "iat": now,
                                 "exp": now + 3600}).encode())
        message = self.key.with_suffix(".msg")
        message.write_bytes(f"{head}.{claims}".encode())
        # Ed25519 signs the whole message at once: openssl needs it as a file.
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", str(self.key), "-rawin",
                              "-in", str(message)], check=True, capture_output=True).stdout
        return f"{head}.{claims}.{b64(sig)}"

    def stop(self):
        self.httpd.shutdown()


def _slow_issuer(work, plugins, seconds, issuer):
    # Server() picks its port itself; write the config with that port in it.
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    cfg = work / "issuer.toml"
    cfg.write_text(f'[server]\ncache_dir = "{abuse.CACHE_DIR}"\n[oauth]\nissuer = "{issuer.url}"\n'
                   f'jwks_uri = "{issuer.url}/jwks"\nresource = "{resource}"\n')
    log_path = work / "issuer.log"
    with open(log_path, "w") as out:
        proc = subprocess.Popen([str(abuse.HANGAR), "serve", "--config", str(cfg), "--listen",
                                 f"127.0.0.1:{port}", "--plugins", str(plugins)],
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**abuse.os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"})
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    abuse.urllib.request.urlopen(url + "/livez", timeout=1)
                    break
                except Exception:  # noqa: BLE001 - not up yet
                    time.sleep(0.05)
            good = issuer.token(resource)
            script = healthy_script(work, "oauth.lua", {"Authorization": f"Bearer {good}"})
            first = abuse.post(url + "/tools/echo/call", '{"text":"x"}',
                               {"content-type": "application/json", "authorization": f"Bearer {good}"})
            fetched = time.monotonic()
            alone = wrk(url + "/tools/echo/call", script, seconds, 4)
            # Unknown key ids start a fetch at most once per 10 s: begin once one may.
            time.sleep(max(0.0, 10.5 - (time.monotonic() - fetched)))
            stop = threading.Event()
            unknown = issuer.token(resource, kid="rotated")
            sent = []

            def unknown_kids():
                while not stop.is_set():
                    r = abuse.post(url + "/mcp", "{}", {"content-type": "application/json",
                                                        "authorization": f"Bearer {unknown}"}, timeout=30)
                    sent.append(r.status)
                    stop.wait(0.5)

            t = threading.Thread(target=unknown_kids, daemon=True)
            t.start()
            time.sleep(0.2)
            beside = wrk(url + "/tools/echo/call", script, seconds, 4)
            stop.set()
            t.join(35)
            log(f"slow issuer: first call {first.status}; p99 {alone['p99']:.2f} → {beside['p99']:.2f} ms; "
                f"{issuer.fetches} key fetches; unknown-kid answers {abuse.Counter(sent)}")
            return {"first": first.status, "alone": alone, "beside": beside, "fetches": issuer.fetches,
                    "unknown": dict(abuse.Counter(sent))}
        finally:
            proc.terminate()
            proc.wait(10)
            issuer.stop()


def run(work, plugins, seconds):
    """Every door figure: server D's, then the slow issuer's."""
    (work / "uploads").mkdir(exist_ok=True)
    results = {}
    with Server("door", work, plugins, door_config(work)) as d:
        results["bodies"] = measure_body_floods(d)
        results["guessing"] = measure_guessing(d, work, seconds)
        results["streams"] = measure_streams(d, work, seconds)
        results["alive"] = d.alive() and d.healthz()[0]
        results["panics"] = d.host_panics()
    results["issuer"] = _slow_issuer(work, plugins, seconds, Issuer(work))
    return results


def p99_goal(alone):
    return 2 * alone + 2


def yes(ok):
    return "yes" if ok else "**NO**"


def rows(r, seconds):
    """The door's section of RELIABILITY.md."""
    b, g, s, i = r["bodies"], r["guessing"], r["streams"], r["issuer"]
    up, body = b["uploads"], b["bodies"]
    up_ok = up["statuses"] == {"401": UPLOAD_FLOODS}
    body_ok = body["statuses"] == {"413": UPLOAD_FLOODS}
    # Ten refusals, one more try per 6 s refill, and the guesses already
    # past the door on wrk's other connections when the block begins.
    allowed = 10 + int((seconds + 2) / 6) + (GUESS_CONNECTIONS - 1)
    g_ok = g["checks"] <= allowed
    g_p99 = g["beside"]["p99"] <= p99_goal(g["alone"]["p99"])
    streams_held = s["held"]
    s_ok = streams_held <= MAX_STREAMS_PER_CLIENT and s["health"][0] and s["other_session"] == 200
    s_p99 = s["beside"]["p99"] <= p99_goal(s["alone"]["p99"])
    i_p99 = i["beside"]["p99"] <= p99_goal(i["alone"]["p99"])
    out = [
        "", "## The door: what an unproven client can make the server do (issue 39)", "",
        "| figure | goal | measured | met? |", "|---|---|---|---|",
        f"| {UPLOAD_FLOODS} anonymous 50 MB uploads at once: answers | all 401 from the head, unread | "
        f"{up['statuses']} (e.g. `{up['example'][:90]}`) | {yes(up_ok)} |",
        f"| {UPLOAD_FLOODS} 50 MB JSON bodies with a wrong key at once: answers | all 413 from the head | "
        f"{body['statuses']} | {yes(body_ok)} |",
        f"| peak RSS growth over both floods ({2 * UPLOAD_FLOODS} × 50 MB offered) | < 32 MiB | "
        f"+{b['peak_mib']:.1f} MiB | {yes(b['peak_mib'] < 32)} |",
        f"| wrong keys from one client for {seconds + 1} s (wrk -c4): auth components run | "
        f"≤ 10 + a try per 6 s + {GUESS_CONNECTIONS - 1} in flight ({allowed}) | {g['checks']:.0f} of {g['guesses']:,} guesses "
        f"({g['c401']} × 401, {g['c429']:,} × 429 unchecked) | {yes(g_ok)} |",
        f"| a healthy caller's p99 beside the guessing | ≤ 2 × alone + 2 ms = {p99_goal(g['alone']['p99']):.2f} ms | "
        f"{g['beside']['p99']:.2f} ms (alone {g['alone']['p99']:.2f} ms) | {yes(g_p99)} |",
        f"| one client opens {STREAM_CLIENT_SESSIONS} sessions and a GET /mcp stream on each: streams held | "
        f"≤ max_streams_per_client = {MAX_STREAMS_PER_CLIENT}; /healthz and another client's initialize answer | "
        f"{streams_held} held; sessions {s['sessions']}; streams {s['streams']}; /healthz "
        f"{'200' if s['health'][0] else s['health'][1]}; other initialize {s['other_session']} | {yes(s_ok)} |",
        f"| a healthy caller's p99 beside those streams | ≤ 2 × alone + 2 ms = {p99_goal(s['alone']['p99']):.2f} ms | "
        f"{s['beside']['p99']:.2f} ms (alone {s['alone']['p99']:.2f} ms) | {yes(s_p99)} |",
        f"| a valid token's p99 while the issuer hangs 20 s on each key fetch and a client sends unknown key ids "
        f"every 0.5 s | ≤ 2 × alone + 2 ms = {p99_goal(i['alone']['p99']):.2f} ms | {i['beside']['p99']:.2f} ms "
        f"(alone {i['alone']['p99']:.2f} ms; {i['fetches']} key fetches; unknown-kid answers {i['unknown']}) | "
        f"{yes(i_p99)} |",
        f"| crashes and host panics of server D | 0 | {'0' if r['alive'] else 'server gone'}, "
        f"{r['panics']} panics | {yes(r['alive'] and r['panics'] == 0)} |",
        "", "### How each figure was measured", "",
        "**Server D** has a server-wide `[auth]` (the api-key plugin), a SQLite tool that takes uploads, "
        f"`trusted_proxies = [\"127.0.0.1\"]` (so this script is several clients, each naming itself in "
        f"X-Forwarded-For), `max_streams_per_client = {MAX_STREAMS_PER_CLIENT}`, "
        f"`max_sessions_per_client = {MAX_SESSIONS_PER_CLIENT}` and the default `auth_failures = \"10/m\"`.",
        "",
        f"**Body floods.** {UPLOAD_FLOODS} threads each send a `POST /uploads` head (multipart, "
        "`Content-Length` 50 MB, no session, no key) and then push the body in 1 MiB chunks until the answer "
        f"comes; then the same with `POST /tools/echo/call` (JSON, a wrong key). The kernel took "
        f"{up['sent_mib']:.0f} MiB and {body['sent_mib']:.0f} MiB of them into socket buffers. Peak RSS is VmHWM, "
        "reset before. Before this issue the uploads were read whole (~51 MiB each) before the 401.",
        "",
        f"**Guessing.** wrk -t1 -c4 posts echo with a new wrong key per request from one client (203.0.113.9) "
        f"for {seconds + 1} s while wrk -c4 posts echo with the right key from another (198.51.100.1); "
        "guesses that ran an auth component are `hangar_auth_failures_total` before and after (every such "
        "guess is refused; the healthy caller's checks pass). Alone is the same healthy wrk before the guessing.",
        "",
        f"**Streams.** One client (203.0.113.77) sends {STREAM_CLIENT_SESSIONS} `initialize`s and opens a "
        "`GET /mcp` stream on each session it gets; streams granted (200) and still open 0.5 s later are "
        "counted. Meanwhile "
        "another client's `/healthz` and `initialize`, and a healthy wrk, are measured. Before this issue one "
        "client held 512 streams and /healthz answered 503 to everyone.",
        "",
        "**Slow issuer.** Server E has `[oauth]` with `jwks_uri` on a local HTTP server that answers the first "
        "key fetch and hangs 20 s on every later one. Tokens are Ed25519 JWTs signed with `openssl pkeyutl`. "
        "wrk -c4 posts echo with a valid token for the figure alone, then, once 10 s have passed since the "
        "first fetch (unknown key ids start one at most every 10 s), again while another client posts "
        "a token naming an unknown key id every 0.5 s. Before this issue every token check waited behind the "
        "hanging fetch.",
    ]
    return out
