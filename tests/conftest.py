"""Black-box test helpers: start the real `hangar` binary and talk HTTP to it.

`scripts/test` builds everything first and exports HANGAR_BIN and TEST_PLUGINS.
"""

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
HANGAR_BIN = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
EXAMPLE_PLUGINS = ROOT / "plugins"
TEST_PLUGINS = Path(os.environ.get("TEST_PLUGINS", ROOT / "target/test-plugins"))
PROTOCOL = "2025-11-25"


def plugin_path(name: str) -> Path:
    for d in (EXAMPLE_PLUGINS, TEST_PLUGINS):
        if (d / f"{name}.wasm").exists():
            return d / f"{name}.wasm"
    raise FileNotFoundError(f"{name}.wasm: run scripts/test (it builds the plugins)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `hangar serve` process with its own config and plugins folder."""

    def __init__(self, workdir: Path, plugins, config: str = "", cache_dir: Path | None = None,
                 env: dict | None = None, config_file: Path | None = None):
        """`config` is appended to a generated file; `config_file` is used as it is."""
        self.env = env or {}
        self.workdir = workdir
        self.plugins_dir = workdir / "plugins"
        self.plugins_dir.mkdir(parents=True, exist_ok=True)
        for name in plugins:
            shutil.copy(plugin_path(name), self.plugins_dir / f"{name}.wasm")
        if config_file:
            self.config_path = config_file
        else:
            cache = cache_dir or workdir / "cache"
            self.config_path = workdir / "hangar.toml"
            self.config_path.write_text(f'[server]\ncache_dir = "{cache}"\n' + config)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "hangar.log"
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(HANGAR_BIN), "serve", "--config", str(self.config_path),
             "--listen", f"127.0.0.1:{self.port}", "--plugins", str(self.plugins_dir)],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1", **self.env},
            cwd=self.workdir,
        )
        # Python and JS components take a while to compile on a first start.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hangar exited {self.proc.returncode}:\n{self.log_text()}")
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"hangar did not start:\n{self.log_text()}")

    def log_text(self) -> str:
        """The log so far. Hangar writes its lines from a thread of its own a
        moment after they happen, so this waits (up to 2 s) until the file
        has stopped growing for 50 ms."""
        if not self.log_path.exists():
            return ""
        size, deadline = -1, time.monotonic() + 2
        while time.monotonic() < deadline:
            now = self.log_path.stat().st_size
            if now == size:
                break
            size = now
            time.sleep(0.05)
        return self.log_path.read_text()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc:
            self.log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Mcp:
    """A raw MCP client over httpx, for what the official SDKs do not let a test say."""

    def __init__(self, url: str, accept: str = "application/json, text/event-stream"):
        self.http = httpx.Client(base_url=url, timeout=60,
                                 headers={"accept": accept, "content-type": "application/json"})
        self.session = None
        self.next_id = 0

    def post(self, message, headers=None) -> httpx.Response:
        h = dict(headers or {})
        if self.session:
            h.setdefault("mcp-session-id", self.session)
        body = message if isinstance(message, (bytes, str)) else json.dumps(message)
        return self.http.post("/mcp", content=body, headers=h)

    def initialize(self):
        r = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                        "clientInfo": {"name": "hangar-tests", "version": "0"}})
        assert "result" in r, r
        self.notify("notifications/initialized")
        return r

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        r = self.post(msg)
        assert r.status_code == 202, r.text
        return r

    def request(self, method, params=None, id=None, headers=None):
        """Sends a request; returns the response message (notifications in `_events`)."""
        if id is None:
            self.next_id += 1
            id = self.next_id
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        r = self.post(msg, headers)
        if method == "initialize" and "mcp-session-id" in r.headers:
            self.session = r.headers["mcp-session-id"]
        return parse_reply(r)

    def call(self, name, arguments=None, **kw):
        params = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.request("tools/call", params, **kw)


def session(server, capabilities=None) -> "Mcp":
    """An initialized raw MCP session that declared `capabilities`."""
    c = Mcp(server.url)
    r = c.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": capabilities or {},
                                 "clientInfo": {"name": "offers-test", "version": "0"}})
    assert "result" in r, r
    c.notify("notifications/initialized")
    return c


def ask_and_answer(server, c, tool, arguments, answer, session_id=None):
    """Calls `tool` on an SSE stream; answers the first request the server sends with
    `answer(request)` (a JSON-RPC response body, or None to stay silent). Returns
    (the request, the call's final message)."""
    http = httpx.Client(base_url=server.url, timeout=30)
    body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    asked, final = None, None
    with http.stream("POST", "/mcp", json=body, headers={
            "accept": "application/json, text/event-stream", "mcp-session-id": c.session}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            msg = json.loads(line[6:])
            if "method" in msg and "id" in msg and asked is None:
                asked = msg
                reply = answer(msg)
                if reply is not None:
                    posted = http.post("/mcp", json=reply, headers={
                        "accept": "application/json, text/event-stream",
                        "mcp-session-id": session_id or c.session})
                    assert posted.status_code == 202
            elif msg.get("id") == 99:
                final = msg
    http.close()
    return asked, final


def wait_for(condition, timeout, what):
    """Polls `condition` until it returns something truthy; fails after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def client(server, timeout=60):
    """A raw MCP client with its own HTTP timeout (a hang fails the test)."""
    c = Mcp(server.url)
    c.http.timeout = httpx.Timeout(timeout)
    return c


def parse_reply(r: httpx.Response) -> dict:
    ctype = r.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        messages = [json.loads(line[len("data: "):]) for line in r.text.splitlines()
                    if line.startswith("data: ")]
        final = [m for m in messages if "id" in m and ("result" in m or "error" in m)]
        events = [m for m in messages if "method" in m]
        reply = final[-1] if final else {}
        reply["_events"] = events
        reply["_status"] = r.status_code
        return reply
    if not r.content:
        return {"_status": r.status_code, "_events": []}
    reply = r.json()
    reply["_status"] = r.status_code
    reply["_events"] = []
    return reply


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory):
    """Compiled components shared by every server in the run, so each starts fast."""
    return tmp_path_factory.mktemp("compiled-cache")


@pytest.fixture(scope="module")
def start_server(tmp_path_factory, shared_cache):
    """Starts servers for a test module; all are stopped when it ends."""
    servers = []

    def start(plugins=("echo", "everything", "misbehave"), config="", cache=True, env=None):
        workdir = tmp_path_factory.mktemp("hangar")
        s = Server(workdir, plugins, config, shared_cache if cache else None, env).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def run_hangar(*args, timeout=120, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(HANGAR_BIN), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", **(env or {})})


DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")


def psql(sql: str, url: str = DATABASE_URL) -> str:
    """Runs SQL with the psql client (test set-up only; tools go through Hangar)."""
    out = subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def pg_bindir() -> Path:
    """Where the PostgreSQL server binaries are: `pg_config --bindir` when it
    has them, else the newest /usr/lib/postgresql/N/bin."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30)
        bindir = Path(out.stdout.strip())
        if out.returncode == 0 and (bindir / "initdb").exists():
            return bindir
    except FileNotFoundError:
        pass
    found = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not found:
        pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) are missing")
    return found[-1]


class PrivatePostgres:
    """A throwaway PostgreSQL cluster on a free port, in a temp folder, for
    tests that stop it or configure it (TLS). initdb refuses root, so when
    run as root the cluster belongs to the `postgres` user, in a folder it
    can reach (pytest's own temp folders are private to root)."""

    def __init__(self, settings: dict | None = None, files: dict | None = None):
        import tempfile
        self.bindir = pg_bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="hangar-pg-"))
        os.chmod(self.dir, 0o755)
        self.owner = None
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            self.owner = (pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, *self.owner)
        self.data = self.dir / "pgdata"
        self.port = free_port()
        # Files the server reads (certificates, keys): name -> (bytes, mode).
        for name, (content, mode) in (files or {}).items():
            path = self.dir / name
            path.write_bytes(content)
            os.chmod(path, mode)
            if self.owner:
                os.chown(path, *self.owner)
        self.settings = {"listen_addresses": "127.0.0.1", **(settings or {})}
        self.run(self.bindir / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres")

    def run(self, *cmd):
        argv = [str(c) for c in cmd]
        if self.owner:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    def ctl(self, action):
        # A setting may name a file of the cluster's folder as {dir}/NAME.
        options = f"-p {self.port} -k {self.dir} " + " ".join(
            f"-c {k}={str(v).replace('{dir}', str(self.dir))}" for k, v in self.settings.items())
        self.run(self.bindir / "pg_ctl", "-D", self.data, "-w", "-m", "fast", "-l", self.dir / "pg.log",
                 "-o", options, action)

    def path(self, name) -> Path:
        return self.dir / name

    def close(self):
        try:
            self.ctl("stop")
        except AssertionError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
