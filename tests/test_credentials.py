"""Credentials: `credentials.get(provider)` gives a tool the token of a
`[credentials.NAME]` provider its plugin is granted, and nothing else.

An OAuth 2.0 client-credentials provider's token endpoint (run by the test)
is asked once per token lifetime however many calls use the token; a static
provider answers its value (from the environment); a provider the plugin is
not granted is refused with the plugin's name; secrets stay out of the log."""

import base64
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import httpx
import pytest

from conftest import Mcp

CLIENT_SECRET = "client-secret-5c2e9a"
STATIC_TOKEN = "static-token-91fe07"


class TokenEndpoint:
    """Issues `tok-<n>` to the one client it knows, recording each request."""

    def __init__(self, expires_in):
        self.expires_in = expires_in
        self.requests = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                auth = self.headers.get("authorization", "")
                endpoint.requests.append({"form": parse_qs(body), "auth": auth})
                expected = "Basic " + base64.b64encode(f"hangar-client:{CLIENT_SECRET}".encode()).decode()
                if auth != expected:
                    return self.answer(401, {"error": "invalid_client"})
                n = len(endpoint.requests)
                self.answer(200, {"access_token": f"tok-{n}", "token_type": "Bearer",
                                  "expires_in": endpoint.expires_in})

            def answer(self, status, doc):
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/token"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint(request):
    e = TokenEndpoint(expires_in=getattr(request, "param", 3600))
    yield e
    e.close()


def config(endpoint, grants='["acme", "plain"]'):
    return f"""
[credentials.acme]
kind = "oauth2-client-credentials"
token_url = "{endpoint.url}"
client_id = "hangar-client"
client_secret = "{{{{ env.ACME_SECRET }}}}"
scopes = ["tickets:read", "tickets:write"]

[credentials.plain]
kind = "static"
value = "{{{{ env.PLAIN_TOKEN }}}}"

[plugins.http-fetch]
grants = {{ credentials = {grants} }}
"""


ENV = {"ACME_SECRET": CLIENT_SECRET, "PLAIN_TOKEN": STATIC_TOKEN}


def token(server, provider):
    r = Mcp(server.url).call("credential", {"provider": provider})
    assert "result" in r, r
    return r["result"]


def test_one_token_request_serves_many_concurrent_calls(start_server, endpoint):
    server = start_server(plugins=("http-fetch",), config=config(endpoint), env=ENV)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: token(server, "acme"), range(40)))
    assert all(r["isError"] is False for r in results), results
    assert {r["content"][0]["text"] for r in results} == {"tok-1"}
    assert len(endpoint.requests) == 1
    form = endpoint.requests[0]["form"]
    assert form["grant_type"] == ["client_credentials"]
    assert form["scope"] == ["tickets:read tickets:write"]
    log = server.log_text()
    assert CLIENT_SECRET not in log and "tok-1" not in log and STATIC_TOKEN not in log


@pytest.mark.parametrize("endpoint", [2], indirect=True)
def test_an_expired_token_is_fetched_again(start_server, endpoint):
    server = start_server(plugins=("http-fetch",), config=config(endpoint), env=ENV)
    assert token(server, "acme")["content"][0]["text"] == "tok-1"
    assert token(server, "acme")["content"][0]["text"] == "tok-1"
    time.sleep(2.2)
    assert token(server, "acme")["content"][0]["text"] == "tok-2"
    assert len(endpoint.requests) == 2


def test_a_static_provider_and_a_provider_not_granted(start_server, endpoint):
    server = start_server(plugins=("http-fetch",), config=config(endpoint, grants='["plain"]'), env=ENV)
    assert token(server, "plain")["content"][0]["text"] == STATIC_TOKEN
    refused = token(server, "acme")
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == "credentials: acme not granted to plugin http-fetch"
    assert endpoint.requests == []


def test_a_plugin_without_grants_gets_no_credential(start_server, endpoint):
    cfg = config(endpoint).split("[plugins.http-fetch]")[0]
    server = start_server(plugins=("http-fetch",), config=cfg, env=ENV)
    refused = token(server, "plain")
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == "credentials: plain not granted to plugin http-fetch"


def test_a_refusing_token_endpoint_is_an_error_not_a_token(start_server, endpoint):
    server = start_server(plugins=("http-fetch",), config=config(endpoint),
                          env={**ENV, "ACME_SECRET": "wrong-secret"})
    refused = token(server, "acme")
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == "credentials: acme: token endpoint answered 401 Unauthorized"


def test_a_grant_naming_a_missing_provider_is_a_problem(start_server, endpoint):
    server = start_server(plugins=("http-fetch",), config=config(endpoint, grants='["nope"]'), env=ENV)
    health = httpx.get(server.url + "/healthz").json()
    assert health["status"] == "degraded"
    assert any(p["path"] == "plugins.http-fetch.grants" and "[credentials.nope]" in p["error"]
               for p in health["problems"]), health
