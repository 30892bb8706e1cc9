"""The issuer's keys come over the host's one outbound policy, as upstream
answers do: a redirect elsewhere is not followed (one within the issuer's
origin is), a key set past 1 MiB is not read, and `HTTP_PROXY` is used.
The issuer is a small HTTP server publishing an RSA key; tokens are signed
in the test."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from conftest import PROTOCOL, Server, free_port, wait_for


class Listener:
    """Records whatever reaches a loopback port."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                while data := conn.recv(65536):
                    self.received += data
            except OSError:
                pass
            conn.close()


class Issuer:
    """GET /jwks: the key set. /jwks-home: 307 to /jwks. /jwks-elsewhere:
    307 to `elsewhere`. /jwks-huge: a 2 MiB key set."""

    def __init__(self, elsewhere):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.paths = []
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                issuer.paths.append(self.path)
                if self.path in ("/jwks-home", "/jwks-elsewhere"):
                    to = "/jwks" if self.path == "/jwks-home" else elsewhere
                    self.send_response(307)
                    self.send_header("location", to)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                if self.path not in ("/jwks", "/jwks-huge"):
                    self.send_error(404)
                    return
                keys = {"keys": [issuer.jwk()]}
                if self.path == "/jwks-huge":
                    keys["padding"] = "x" * (2 << 20)
                body = json.dumps(keys).encode()
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

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def jwk(self):
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid="k1", alg="RS256", use="sig")
        return jwk

    def token(self, resource):
        now = int(time.time())
        claims = {"iss": self.url, "aud": resource, "sub": "alice", "iat": now, "exp": now + 600}
        return pyjwt.encode(claims, self.key, "RS256", headers={"kid": "k1"})

    def stop(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def stolen():
    return Listener()


@pytest.fixture(scope="module")
def issuer(stolen):
    i = Issuer(f"http://127.0.0.1:{stolen.port}/stolen-keys")
    yield i
    i.stop()


@pytest.fixture
def start(tmp_path_factory, shared_cache, issuer):
    servers = []

    def go(jwks_path, env=None):
        config = f"""
[oauth]
issuer = "{issuer.url}"
resource = "http://127.0.0.1:__PORT__/mcp"
jwks_uri = "{issuer.url}{jwks_path}"
"""
        s = Server(tmp_path_factory.mktemp("oauth-outbound"), ["echo"], config, shared_cache, env)
        s.config_path.write_text(s.config_path.read_text().replace("__PORT__", str(s.port)))
        s.start()
        servers.append(s)
        return s

    yield go
    for s in servers:
        s.stop()


def initialize(server, token):
    return httpx.post(server.url + "/mcp", timeout=30, headers={
        "authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                         "clientInfo": {"name": "oauth-outbound-test", "version": "0"}}})


def test_a_key_set_behind_a_redirect_within_the_issuer_is_fetched(start, issuer):
    s = start("/jwks-home")
    r = initialize(s, issuer.token(f"{s.url}/mcp"))
    assert r.status_code == 200, r.text


def test_a_redirect_elsewhere_is_not_followed(start, issuer, stolen):
    s = start("/jwks-elsewhere")
    r = initialize(s, issuer.token(f"{s.url}/mcp"))
    # No key set was read, so the token cannot be checked: 503, not 401.
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable", r.text
    time.sleep(0.5)
    assert stolen.received == b"", stolen.received[:200]
    assert "status 307" in s.log_text()


def test_a_key_set_past_one_mib_is_not_read(start, issuer):
    s = start("/jwks-huge")
    r = initialize(s, issuer.token(f"{s.url}/mcp"))
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable", r.text
    assert "longer than 1 MiB" in s.log_text()


def test_the_key_set_is_fetched_through_the_proxy_in_the_environment(start, issuer, tmp_path):
    port = free_port()
    log = tmp_path / "proxy.log"
    proxy = subprocess.Popen([sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", str(port),
                              "--num-workers", "1", "--num-acceptors", "1", "--log-file", str(log)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             # proxy.py forks its acceptor: the whole group is killed at the end.
                             start_new_session=True)
    try:
        def up():
            assert proxy.poll() is None, "proxy.py exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for(up, 30, "proxy.py")
        s = start("/jwks", env={"HTTP_PROXY": f"http://127.0.0.1:{port}", "NO_PROXY": ""})
        r = initialize(s, issuer.token(f"{s.url}/mcp"))
        assert r.status_code == 200, r.text
        # proxy.py logs a request when its connection closes.
        s.stop()
        wait_for(lambda: f"GET {issuer.url.removeprefix('http://')}/jwks" in log.read_text(), 15,
                 "the proxy's access log to name the key set")
    finally:
        os.killpg(proxy.pid, signal.SIGKILL)
        proxy.wait(10)
