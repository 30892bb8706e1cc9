"""A slow issuer does not stall token checks. The issuer here is a small
HTTP server serving a JWK set that can be made to hang; tokens are signed in
the test (RS256, by keys the set publishes). While a key-set refresh hangs —
started by a token naming a `kid` Hangar has not seen — every token signed by
a key Hangar already holds is checked at once from the cached keys, the new
kid is refused at once (no second fetch starts), and once the issuer answers
the new kid is accepted."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from conftest import PROTOCOL, Server, wait_for

# Generous, against a hang of HANG seconds (Hangar gives up a fetch after 10 s).
ANSWER_WITHIN = 3.0
HANG = 20.0
MIN_REFRESH = 10.0  # Hangar's shortest time between two key-set fetches


class SlowIssuer:
    """GET /jwks: the public keys of `published`; while `hanging`, each
    request waits (up to HANG seconds, or until `release()`) first."""

    def __init__(self):
        self.private = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048)
                        for kid in ("k1", "k2")}
        self.published = ["k1"]
        self.fetches = 0
        self.hanging = False
        self.released = threading.Event()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/jwks":
                    self.send_error(404)
                    return
                issuer.fetches += 1
                if issuer.hanging:
                    issuer.released.wait(HANG)
                body = json.dumps({"keys": [issuer.jwk(kid) for kid in issuer.published]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # Hangar gave up waiting

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def jwk(self, kid):
        jwk = json.loads(RSAAlgorithm.to_jwk(self.private[kid].public_key()))
        jwk.update(kid=kid, alg="RS256", use="sig")
        return jwk

    def token(self, kid, resource, sub="alice"):
        now = int(time.time())
        claims = {"iss": self.url, "aud": resource, "sub": sub, "iat": now, "exp": now + 600}
        return pyjwt.encode(claims, self.private[kid], "RS256", headers={"kid": kid})

    def release(self):
        self.hanging = False
        self.released.set()

    def stop(self):
        self.release()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def issuer():
    i = SlowIssuer()
    yield i
    i.stop()


def initialize(server, token):
    """An `initialize` with `token`: its status and how long it took."""
    started = time.monotonic()
    r = httpx.post(server.url + "/mcp", timeout=60, headers={
        "authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                         "clientInfo": {"name": "slow-issuer-test", "version": "0"}}})
    return r, time.monotonic() - started


def test_a_hanging_key_refresh_stalls_no_token_signed_by_a_held_key(tmp_path, shared_cache, issuer):
    config = f"""
[oauth]
issuer = "{issuer.url}"
resource = "http://127.0.0.1:__PORT__/mcp"
jwks_uri = "{issuer.url}/jwks"
leeway = "0s"
"""
    s = Server(tmp_path, ["echo"], config, shared_cache)
    s.config_path.write_text(s.config_path.read_text().replace("__PORT__", str(s.port)))
    resource = f"{s.url}/mcp"
    s.start()
    try:
        known = issuer.token("k1", resource)
        r, _ = initialize(s, known)
        assert r.status_code == 200, r.text
        first_fetch = time.monotonic()
        assert issuer.fetches == 1

        # The issuer rotates in k2 and turns slow; past MIN_REFRESH, a token
        # naming k2 makes Hangar fetch the set again, and that fetch hangs.
        issuer.published = ["k1", "k2"]
        issuer.hanging = True
        time.sleep(max(0.0, first_fetch + MIN_REFRESH + 0.5 - time.monotonic()))
        new = issuer.token("k2", resource, sub="bob")
        outcome = {}
        asker = threading.Thread(target=lambda: outcome.update(new=initialize(s, new)))
        asker.start()
        wait_for(lambda: issuer.fetches == 2, 10, "the refresh the new kid starts")

        # While it hangs: tokens signed by k1 answer at once, every time.
        for _ in range(10):
            r, took = initialize(s, known)
            assert r.status_code == 200, r.text
            assert took < ANSWER_WITHIN, f"a held key's token waited {took:.1f} s for the issuer"
        # The new kid is refused at once (no key yet), and starts no second fetch.
        for _ in range(3):
            r, took = initialize(s, new)
            assert r.status_code == 401 and took < ANSWER_WITHIN, (r.status_code, took)
            assert "no signing key" in r.headers["www-authenticate"]
        asker.join(30)
        r, took = outcome["new"]
        assert r.status_code == 401 and took < ANSWER_WITHIN, (r.status_code, took)
        assert issuer.fetches == 2

        # The issuer answers the hanging fetch: the new kid works from then on.
        issuer.release()

        def accepted():
            if initialize(s, new)[0].status_code == 200:
                return True
            time.sleep(0.2)
            return False

        wait_for(accepted, 15, "the token with the new kid to be accepted")
        assert initialize(s, known)[0].status_code == 200
    finally:
        s.stop()
