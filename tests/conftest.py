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
        return self.log_path.read_text() if self.log_path.exists() else ""

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
