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

import services
from services import PrivatePostgres, free_port, pg_bindir  # noqa: F401 (re-exported)

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


def peak_rss_mib(pid: int) -> float:
    """The kernel's peak resident set (VmHWM) of process `pid`, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


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
        """Starts the process and waits until it answers `/healthz`."""
        self.launch()
        return self.wait_ready()

    def launch(self):
        """Starts the process without waiting for it."""
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(HANGAR_BIN), "serve", "--config", str(self.config_path),
             "--listen", f"127.0.0.1:{self.port}", "--plugins", str(self.plugins_dir)],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1", **self.env},
            cwd=self.workdir,
        )
        return self

    def wait_ready(self):
        """Waits until the launched process answers `/healthz`."""
        # Python and JS components take a while to compile on a first start
        # (~15 s of CPU each here), and under load far longer: 900 s is
        # against a hang only (scripts/stress beside 6 busy loops saw a
        # start that compiled a Python and a JavaScript component pass 240 s).
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                raise RuntimeError(f"hangar exited {self.proc.returncode}:\n{self.log_text()}")
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        # A server that never answered is stopped here, not left running.
        self.stop()
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
                self.proc.wait(10)
        if self.proc:
            self.log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Mcp:
    """A raw MCP client over httpx, for what the official SDKs do not let a test say."""

    def __init__(self, url: str, accept: str = "application/json, text/event-stream",
                 path: str = "/mcp"):
        self.http = httpx.Client(base_url=url, timeout=60,
                                 headers={"accept": accept, "content-type": "application/json"})
        self.path = path
        self.session = None
        self.next_id = 0

    def post(self, message, headers=None) -> httpx.Response:
        h = dict(headers or {})
        if self.session:
            h.setdefault("mcp-session-id", self.session)
        body = message if isinstance(message, (bytes, str)) else json.dumps(message)
        return self.http.post(self.path, content=body, headers=h)

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


def refused(addr: str) -> bool:
    """Whether host:port refuses connections (a killed server is gone)."""
    host, port = addr.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # The dying process's listener took the SYN and was torn down:
        # not gone yet from the client's side; ask again.
        return False


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
    """Compiled components shared by every server in the run, so each starts fast.

    With pytest-xdist every worker has a base temp folder of its own under
    one shared parent; the cache sits in that parent, so what one worker's
    server compiled the others' do not compile again (Hangar writes each
    entry to a temporary file and renames it: concurrent starts are safe)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "compiled-cache"
        cache.mkdir(exist_ok=True)
        return cache
    return tmp_path_factory.mktemp("compiled-cache")


@pytest.fixture(scope="module")
def start_server(tmp_path_factory, shared_cache):
    """Starts servers for a test module; all are stopped when it ends."""
    servers = []

    def start(plugins=("echo", "everything", "misbehave"), config="", cache=True, env=None):
        workdir = tmp_path_factory.mktemp("hangar")
        s = Server(workdir, plugins, config, shared_cache if cache else None, env)
        # Kept before it starts: one that fails to start is stopped too.
        servers.append(s)
        return s.start()

    yield start
    for s in servers:
        s.stop()


def run_hangar(*args, timeout=120, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(HANGAR_BIN), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", **(env or {})})


# The suite's PostgreSQL and Redis: the ones DATABASE_URL / REDIS_URL (or
# the usual local ports) name when they answer, else private servers this
# run starts and stops (tests/services.py). Set in the environment, so every
# `hangar` and script the tests start sees the same.
DATABASE_URL = services.postgres_url()
REDIS_URL = services.redis_url()


def psql(sql: str, url: str | None = None) -> str:
    """Runs SQL with the psql client (test set-up only; tools go through Hangar)."""
    out = subprocess.run(["psql", url or DATABASE_URL, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# A skipped test fails the run: the suite starts or installs what it needs
# (tests/services.py, scripts/test), so a skip means something is missing
# that a user would not notice. Expected failures (xfail) are not skips. The
# allow-list names tests that may skip, with why; it is empty.
ALLOWED_SKIPS: dict[str, str] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and item.nodeid not in ALLOWED_SKIPS:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped ({reason}), and a skip fails the run (tests/conftest.py)"


# Parallel runs (scripts/test runs pytest-xdist with `--dist loadgroup`): a
# module's tests stay on one worker, so its module-scoped servers start once.
# Modules that share a fixed resource share a group, and so a worker:
# scripts/cluster's default folder and its generated config.
SHARED_GROUPS = {
    "test_cluster": "cluster",
    "test_cluster_default": "cluster",
}

# The modules that take longest (setup and calls, from `--durations`) start
# first, so that no worker is left with one of them at the end while the
# others idle.
SLOW_FIRST = [
    "test_scaffold",
    "test_cluster",
    "test_cluster_default",
    "test_clients",
    "test_typed_exports",
    "test_polyglot",
    "test_explorer_apps",
    "test_http_examples",
    "test_logging",
    "test_release",
    "test_image",
]


# tryfirst: xdist's own hook turns the mark into the group it schedules by,
# so the marks must be there before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    def module(item):
        return Path(item.fspath).stem

    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(module(item), len(rank)))
    for item in items:
        name = module(item)
        item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS.get(name, name)))
