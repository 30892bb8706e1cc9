"""Hangar as an OAuth 2.1 resource server (MCP authorization, 2025-11-25),
against a real authorization server nobody here wrote: oidc-provider on Node
22, issuing JWT access tokens for RFC 8707 resource indicators via the client
credentials grant. Every refusal is checked with its status and challenge;
the official Python SDK's OAuth client completes discovery → token → call."""

import asyncio
import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from conftest import PROTOCOL, Mcp, Server, free_port, parse_reply, wait_for

TESTS = Path(__file__).resolve().parent
NODE = TESTS / "node_modules/.bin/node"
PRM = "/.well-known/oauth-protected-resource"


def make_keys(prefix):
    """A private JWK set (RS256, ES256, EdDSA) and the keys, by alg."""
    made = {
        "RS256": (rsa.generate_private_key(public_exponent=65537, key_size=2048), RSAAlgorithm),
        "ES256": (ec.generate_private_key(ec.SECP256R1()), ECAlgorithm),
        "EdDSA": (ed25519.Ed25519PrivateKey.generate(), OKPAlgorithm),
    }
    jwks = []
    for alg, (key, conv) in made.items():
        jwk = json.loads(conv.to_jwk(key))
        jwk.update(kid=f"{prefix}-{alg.lower()}", alg=alg, use="sig")
        jwks.append(jwk)
    return {"keys": jwks}, {alg: key for alg, (key, _) in made.items()}


class AuthServer:
    """oidc-provider on two ports: the real issuer, and a rogue one signing
    with the same keys (tokens whose only fault is `iss`)."""

    def __init__(self, prefix="as", ports=None):
        self.jwks, self.keys = make_keys(prefix)
        self.port, self.rogue_port = ports or (free_port(), free_port())
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.rogue = f"http://127.0.0.1:{self.rogue_port}"
        env = {**os.environ, "OIDC_PORT": str(self.port), "ROGUE_PORT": str(self.rogue_port),
               "OIDC_KEYS": json.dumps(self.jwks)}
        self.proc = subprocess.Popen([str(NODE), str(TESTS / "clients/oidc_server.mjs")],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=TESTS)
        line = ""
        while "ready" not in line:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("oidc-provider exited")

    def token(self, client, resource, scope="tools:read", issuer=None):
        r = httpx.post(f"{issuer or self.issuer}/token", auth=(client, f"{client}-secret"),
                       data={"grant_type": "client_credentials", "scope": scope,
                             "resource": resource})
        assert r.status_code == 200, r.text
        return r.json()["access_token"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def auth_server():
    a = AuthServer()
    yield a
    a.stop()


# Many tests here send bad tokens from one address on purpose; the
# per-client throttle they would meet is tested in test_fail_closed.py.
CONFIG = """
auth_failures = "1000/m"

[oauth]
issuer = "{issuer}"
resource = "http://127.0.0.1:__PORT__/mcp"
scopes_supported = ["tools:read", "tools:admin"]
leeway = "0s"
rest = true

[plugins.jwt]
config = {{ hs256_secret = "an-hs256-secret-of-at-least-32-bytes" }}

[connectors.lite]
kind = "sqlite"
path = "{db}"

[[tools]]
name = "plugin.gated"
description = "Also checked by the jwt auth plugin, which reads the Authorization header"
use = "lite"
statement = "SELECT 'gated' AS g"
auth = {{ plugin = "jwt" }}

[[tools]]
name = "whoami"
description = "The caller's subject and client, bound from the token's claims"
use = "lite"
statement = "SELECT {{{{ inputs.sub }}}} AS sub, {{{{ inputs.client }}}} AS client"
inputs.sub = {{ type = "string", from_claim = "sub" }}
inputs.client = {{ type = "string", from_claim = "client_id" }}

[[tools]]
name = "refund"
description = "Needs tools:admin"
use = "lite"
statement = "SELECT 'refunded' AS done"
scopes = ["tools:admin"]

[[tools]]
name = "admin.audit"
description = "Shown only to the admin client"
use = "lite"
statement = "SELECT 'audit' AS log"
visible_to = {{ client_id = ["admin"] }}
"""


def oauth_server(tmp_path_factory, shared_cache, auth_server, extra=""):
    """A Hangar whose [oauth] resource names its own port (known only once chosen)."""
    workdir = tmp_path_factory.mktemp("hangar-oauth")
    config = CONFIG.format(issuer=auth_server.issuer, db=workdir / "t.db") + extra
    s = Server(workdir, ["echo", "jwt"], config, shared_cache)
    s.config_path.write_text(s.config_path.read_text().replace("__PORT__", str(s.port)))
    s.resource = f"{s.url}/mcp"
    return s.start()


@pytest.fixture(scope="module")
def hangar(tmp_path_factory, shared_cache, auth_server):
    s = oauth_server(tmp_path_factory, shared_cache, auth_server)
    yield s
    s.stop()


def challenge(r):
    """The parameters of a `WWW-Authenticate: Bearer ...` header."""
    value = r.headers.get("www-authenticate", "")
    assert value.startswith("Bearer "), (r.status_code, value)
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def init(server, token=None, headers=None):
    h = dict(headers or {})
    if token:
        h["authorization"] = f"Bearer {token}"
    c = Mcp(server.url)
    c.http.headers.update(h)
    return c, c.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                                 "clientInfo": {"name": "oauth-test", "version": "0"}}})


def assert_invalid(server, r, description):
    assert r.status_code == 401, r.text
    params = challenge(r)
    assert params["error"] == "invalid_token"
    assert params["error_description"] == description
    assert params["resource_metadata"] == f"http://127.0.0.1:{server.port}{PRM}/mcp"
    assert params["scope"] == "tools:read tools:admin"


def test_protected_resource_metadata(hangar, auth_server):
    for path in (PRM, f"{PRM}/mcp"):
        r = httpx.get(hangar.url + path)
        assert r.status_code == 200, path
        assert r.json() == {
            "resource": hangar.resource,
            "authorization_servers": [auth_server.issuer],
            "scopes_supported": ["tools:read", "tools:admin"],
            "bearer_methods_supported": ["header"],
            "resource_name": "Hangar",
        }
        # Public, and readable by browser-based clients on another origin.
        assert r.headers["access-control-allow-origin"] == "*"
        pre = httpx.options(hangar.url + path, headers={
            "origin": "http://localhost:6274", "access-control-request-method": "GET",
            "access-control-request-headers": "mcp-protocol-version"})
        assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "*"


def test_no_token_gets_a_challenge_without_an_error_code(hangar):
    _, r = init(hangar)
    assert r.status_code == 401
    params = challenge(r)
    assert "error" not in params
    assert params["resource_metadata"] == f"{hangar.url}{PRM}/mcp"
    assert params["scope"] == "tools:read tools:admin"
    # Every method on /mcp is protected, and another scheme is no bearer token.
    assert httpx.get(hangar.url + "/mcp").status_code == 401
    assert httpx.delete(hangar.url + "/mcp").status_code == 401
    basic = httpx.post(hangar.url + "/mcp", auth=("a", "b"), json={})
    assert basic.status_code == 401 and "error" not in challenge(basic)


def test_a_good_token_calls_a_tool_and_becomes_the_principal(hangar, auth_server):
    for client in ("admin", "es256", "eddsa"):  # RS256, ES256, EdDSA from the real AS
        token = auth_server.token(client, hangar.resource)
        c, r = init(hangar, token)
        assert r.status_code == 200, r.text
        reply = c.call("echo", {"text": "hi"})
        assert reply["result"]["content"][0]["text"] == "hi", reply
        who = c.call("whoami", {"sub": "forged", "client": "forged"})
        assert who["result"]["structuredContent"]["rows"][0] == {"sub": client, "client": client}, who
    # The token never reaches the log.
    assert token not in hangar.log_text()
    assert token.split(".")[2] not in hangar.log_text()


def test_a_session_belongs_to_the_token_subject_that_opened_it(hangar, auth_server):
    """Another subject's valid token does not reach a session it did not open
    (a leaked session id is not a way in): 404 as for an unknown session."""
    owner, r = init(hangar, auth_server.token("admin", hangar.resource))
    assert r.status_code == 200, r.text
    owner.session = r.headers["mcp-session-id"]
    assert owner.call("echo", {"text": "mine"})["result"]["content"][0]["text"] == "mine"
    other = Mcp(hangar.url)
    other.http.headers["authorization"] = f"Bearer {auth_server.token('reader', hangar.resource)}"
    other.session = owner.session
    taken = other.call("echo", {"text": "theirs"})
    assert taken["_status"] == 404 and taken["error"]["message"] == "Session not found", taken
    stream = other.http.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": owner.session})
    assert stream.status_code == 404
    assert other.http.delete("/mcp", headers={"mcp-session-id": owner.session}).status_code == 404
    # The owner's session is untouched.
    assert owner.call("echo", {"text": "still mine"})["result"]["content"][0]["text"] == "still mine"


def test_the_token_never_reaches_an_auth_plugin(hangar, auth_server):
    """The middleware takes the Authorization header off the request: a
    tool's own auth plugin that reads it finds none."""
    c, r = init(hangar, auth_server.token("admin", hangar.resource))
    assert r.status_code == 200
    reply = c.call("plugin.gated", {})
    assert reply["error"]["message"] == "Unauthorized", reply
    assert "no authorization header" in hangar.log_text()


def test_malformed_tokens_are_refused(hangar):
    for bad in ("not-a-jwt", "a.b.c", "Zm9v"):
        _, r = init(hangar, bad)
        assert_invalid(hangar, r, "malformed token")


def test_an_expired_token_is_refused(hangar, auth_server):
    token = auth_server.token("short", hangar.resource)  # a one-second lifetime
    exp = pyjwt.decode(token, options={"verify_signature": False})["exp"]
    wait_for(lambda: time.time() > exp + 1, 10, "the token to expire")
    _, r = init(hangar, token)
    assert_invalid(hangar, r, "token expired")


def test_a_token_not_yet_valid_is_refused(hangar, auth_server):
    # Signed with the issuer's own key, so only `nbf` is wrong.
    now = int(time.time())
    claims = {"iss": auth_server.issuer, "aud": hangar.resource, "sub": "early",
              "iat": now, "nbf": now + 3600, "exp": now + 7200}
    token = pyjwt.encode(claims, auth_server.keys["RS256"], "RS256", headers={"kid": "as-rs256"})
    _, r = init(hangar, token)
    assert_invalid(hangar, r, "token not yet valid")
    # The same token without `nbf` passes: the key and the other claims are good.
    del claims["nbf"]
    token = pyjwt.encode(claims, auth_server.keys["RS256"], "RS256", headers={"kid": "as-rs256"})
    assert init(hangar, token)[1].status_code == 200


def test_a_token_without_a_subject_is_refused(hangar, auth_server):
    """Sessions and file areas belong to the token's subject: a token whose
    `sub` is empty (or that names no subject at all) is refused, not given
    the empty subject every such token would share."""
    now = int(time.time())
    base = {"iss": auth_server.issuer, "aud": hangar.resource, "iat": now, "exp": now + 600}

    def signed(claims):
        return pyjwt.encode(claims, auth_server.keys["RS256"], "RS256", headers={"kid": "as-rs256"})

    for claims in ({**base, "sub": ""}, {**base, "sub": "", "client_id": "admin"}, base):
        _, r = init(hangar, signed(claims))
        assert_invalid(hangar, r, "the token names no subject (sub)")
    # The same claims with a subject pass.
    assert init(hangar, signed({**base, "sub": "someone"}))[1].status_code == 200


def test_a_token_from_another_issuer_is_refused(hangar, auth_server):
    token = auth_server.token("admin", hangar.resource, issuer=auth_server.rogue)
    _, r = init(hangar, token)
    assert_invalid(hangar, r, "wrong issuer")


def test_a_token_for_another_resource_is_refused(hangar, auth_server):
    token = auth_server.token("admin", "https://other.example.com/mcp")
    assert pyjwt.decode(token, options={"verify_signature": False})["aud"] == "https://other.example.com/mcp"
    _, r = init(hangar, token)
    assert_invalid(hangar, r, "wrong audience")


def test_a_token_signed_by_another_key_is_refused(hangar, auth_server):
    # A real token's claims, re-signed by a key that is not the issuer's but
    # names the issuer's key id.
    good = auth_server.token("admin", hangar.resource)
    claims = pyjwt.decode(good, options={"verify_signature": False})
    _, other = make_keys("mallory")
    forged = pyjwt.encode(claims, other["RS256"], "RS256", headers={"kid": "as-rs256"})
    _, r = init(hangar, forged)
    assert_invalid(hangar, r, "invalid signature")
    # A token naming a key the issuer never had is refused too.
    unknown = pyjwt.encode(claims, other["RS256"], "RS256", headers={"kid": "mallory-rs256"})
    _, r = init(hangar, unknown)
    assert r.status_code == 401 and challenge(r)["error"] == "invalid_token"
    # And an HS256 token "signed" with a public key's text is not accepted at all.
    _, r = init(hangar, pyjwt.encode(claims, "x" * 32, "HS256"))
    assert r.status_code == 401 and "not accepted" in challenge(r)["error_description"]


def test_a_tool_needing_a_scope_the_token_lacks_is_403(hangar, auth_server):
    c, r = init(hangar, auth_server.token("reader", hangar.resource))
    assert r.status_code == 200
    r = c.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "refund", "arguments": {}}})
    assert r.status_code == 403, r.text
    params = challenge(r)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "tools:admin"
    assert params["resource_metadata"] == f"{hangar.url}{PRM}/mcp"
    assert r.json()["id"] == 7
    # With the scope, the same tool runs.
    c, _ = init(hangar, auth_server.token("admin", hangar.resource, "tools:read tools:admin"))
    assert c.call("refund", {})["result"]["structuredContent"]["rows"][0] == {"done": "refunded"}


def test_a_hidden_tool_is_indistinguishable_from_an_unknown_one(hangar, auth_server):
    c, _ = init(hangar, auth_server.token("reader", hangar.resource))
    listed = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
    assert "admin.audit" not in listed and "echo" in listed
    hidden = c.call("admin.audit", {})
    unknown = c.call("no.such.tool", {})
    assert hidden["_status"] == unknown["_status"] == 200
    assert hidden["error"]["code"] == unknown["error"]["code"] == -32601
    assert hidden["error"]["message"].replace("admin.audit", "X") == \
        unknown["error"]["message"].replace("no.such.tool", "X")
    # The admin client sees and calls it.
    a, _ = init(hangar, auth_server.token("admin", hangar.resource))
    assert "admin.audit" in {t["name"] for t in a.request("tools/list")["result"]["tools"]}
    assert a.call("admin.audit", {})["result"]["structuredContent"]["rows"][0] == {"log": "audit"}


def test_keys_are_fetched_again_when_a_token_names_an_unknown_kid(tmp_path_factory, shared_cache):
    """The issuer rotates its keys (restarts with new ones, same URL): Hangar
    still holds the old set, and a token naming a new `kid` makes it fetch
    the set again (at most every 10 s); the retired key stops working."""
    first = AuthServer("old")
    s = oauth_server(tmp_path_factory, shared_cache, first)
    second = None
    try:
        old_token = first.token("admin", s.resource)
        assert init(s, old_token)[1].status_code == 200
        first.stop()
        second = AuthServer("new", ports=(first.port, first.rogue_port))
        new_token = second.token("admin", s.resource)
        assert pyjwt.get_unverified_header(new_token)["kid"] == "new-rs256"

        def accepted():
            if init(s, new_token)[1].status_code == 200:
                return True
            time.sleep(0.5)
            return False

        wait_for(accepted, 30, "the rotated key set to be fetched")
        _, r = init(s, old_token)
        assert r.status_code == 401 and challenge(r)["error"] == "invalid_token"
        assert "signing keys fetched" in s.log_text()
    finally:
        s.stop()
        (second or first).stop()


def test_a_token_that_cannot_be_checked_now_is_503_and_counts_no_failure(
        tmp_path_factory, shared_cache, auth_server):
    """When Hangar cannot check a token — the issuer has been down since
    start-up (no keys ever fetched), or the kv store that holds personal
    tokens is down — the token may well be good: the answer is 503
    `temporarily_unavailable` with a Retry-After, not a 401 that sends the
    client to re-authenticate, and it is no auth failure (two a minute
    allowed here, so a counted refusal would be 429 by the third)."""
    workdir = tmp_path_factory.mktemp("hangar-oauth-down")
    issuer = f"http://127.0.0.1:{free_port()}"
    config = CONFIG.format(issuer=issuer, db=workdir / "t.db").replace(
        'auth_failures = "1000/m"', 'auth_failures = "2/m"')
    config += f'\n[kv]\nbackend = "redis"\nurl = "redis://127.0.0.1:{free_port()}"\n'
    s = Server(workdir, ["echo", "jwt"], config, shared_cache)
    s.config_path.write_text(s.config_path.read_text().replace("__PORT__", str(s.port)))
    s.start()
    try:
        jwt = auth_server.token("reader", f"{s.url}/mcp")
        personal = "hgr_" + "A" * 43
        why = {jwt: "the issuer's signing keys are unavailable",
               personal: "personal tokens cannot be checked now"}
        for token in [jwt, personal] * 3:
            _, r = init(s, token)
            assert r.status_code == 503, (r.status_code, r.text)
            assert r.json() == {"error": "temporarily_unavailable",
                                "error_description": why[token]}, r.text
            assert int(r.headers["retry-after"]) >= 1, r.headers
        log = s.log_text()
        assert "no signing keys" in log and "personal tokens:" in log, log[-2000:]
        # A bad token is still a 401, and counted: the allowance is intact.
        _, r = init(s, "not-a-jwt")
        assert r.status_code == 401 and challenge(r)["error"] == "invalid_token", r.text
    finally:
        s.stop()


def test_rest_needs_a_token_when_rest_is_true(hangar, auth_server):
    r = httpx.post(f"{hangar.url}/tools/echo/call", json={"text": "x"})
    assert r.status_code == 401
    assert challenge(r)["resource_metadata"] == f"{hangar.url}{PRM}/mcp"
    assert httpx.get(f"{hangar.url}/tools").status_code == 401
    reader = {"authorization": f"Bearer {auth_server.token('reader', hangar.resource)}"}
    r = httpx.post(f"{hangar.url}/tools/whoami/call", json={}, headers=reader)
    assert r.status_code == 200, r.text
    assert r.json()["structuredContent"]["rows"][0] == {"sub": "reader", "client": "reader"}
    r = httpx.post(f"{hangar.url}/tools/refund/call", json={}, headers=reader)
    assert r.status_code == 403
    assert challenge(r)["error"] == "insufficient_scope"
    assert challenge(r)["scope"] == "tools:admin"
    # Hidden and unknown look alike on REST too.
    hidden = httpx.post(f"{hangar.url}/tools/admin.audit/call", json={}, headers=reader)
    unknown = httpx.post(f"{hangar.url}/tools/nope/call", json={}, headers=reader)
    assert hidden.status_code == unknown.status_code == 404
    names = {t["name"] for t in httpx.get(f"{hangar.url}/tools", headers=reader).json()}
    assert "admin.audit" not in names and "whoami" in names


def test_rest_is_open_only_when_written_public(tmp_path_factory, shared_cache, auth_server):
    s = oauth_server(tmp_path_factory, shared_cache, auth_server)
    s.stop()
    s.config_path.write_text(s.config_path.read_text().replace("rest = true\n", 'rest = "public"\n'))
    s.start()
    try:
        r = httpx.post(f"{s.url}/tools/echo/call", json={"text": "open"})
        assert r.status_code == 200, r.text
        assert httpx.post(s.url + "/mcp", json={}).status_code == 401
        # A tool with scopes has no token to check here: refused.
        assert httpx.post(f"{s.url}/tools/refund/call", json={}).status_code == 403
    finally:
        s.stop()


def test_check_refuses_a_bad_oauth_section(tmp_path):
    from conftest import run_hangar
    bad = tmp_path / "hangar.toml"
    bad.write_text('[oauth]\nissuer = "login.example.com"\nresource = "https://t.example.com/mcp"\n')
    (tmp_path / "plugins").mkdir()
    out = run_hangar("check", "--config", str(bad), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode != 0
    assert "issuer" in out.stderr + out.stdout
    bad.write_text('[[tools]]\nname = "x"\nscopes = ["a"]\n')
    out = run_hangar("check", "--config", str(bad), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode != 0
    assert "[oauth]" in out.stderr + out.stdout


def test_the_python_sdk_discovers_the_server_and_calls(hangar, auth_server):
    """The official SDK's OAuth client: 401 → protected resource metadata →
    authorization server metadata → client credentials token (with the
    RFC 8707 resource) → the call."""
    from mcp import ClientSession
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    class Memory:
        def __init__(self):
            self.tokens, self.client = None, None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, info: OAuthClientInformationFull) -> None:
            self.client = info

    seen = []

    async def log_request(request):
        seen.append((request.method, str(request.url)))

    async def run():
        storage = Memory()
        auth = ClientCredentialsOAuthProvider(
            server_url=hangar.resource, storage=storage, client_id="admin",
            client_secret="admin-secret", scopes="tools:read tools:admin",
            issuer=auth_server.issuer)
        async with streamablehttp_client(hangar.resource, auth=auth,
                                         httpx_client_factory=lambda **kw: httpx.AsyncClient(
                                             event_hooks={"request": [log_request]}, **kw)) as (r, w, _):
            async with ClientSession(r, w) as s:
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                result = await s.call_tool("whoami", {})
                refund = await s.call_tool("refund", {})
        return storage, tools, result, refund

    storage, tools, result, refund = asyncio.run(run())
    assert {"echo", "whoami", "refund", "admin.audit"} <= tools
    assert result.structuredContent["rows"][0] == {"sub": "admin", "client": "admin"}
    assert refund.structuredContent["rows"][0] == {"done": "refunded"}
    claims = pyjwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == hangar.resource and claims["iss"] == auth_server.issuer
    urls = [u for _, u in seen]
    assert f"{hangar.url}{PRM}/mcp" in urls  # discovered from the 401
    assert f"{auth_server.issuer}/token" in urls


def test_the_python_sdk_authorization_code_flow(hangar, auth_server):
    """The SDK's `OAuthClientProvider` as an interactive client would use it:
    401 → metadata → dynamic client registration → authorization code with
    PKCE (the user's login and consent are oidc-provider's own pages, whose
    forms the test submits) → token for the resource → calls."""
    from html.parser import HTMLParser
    from urllib.parse import parse_qs, urljoin, urlparse

    from mcp import ClientSession
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.auth import OAuthClientMetadata

    redirect_uri = "http://127.0.0.1:1/callback"  # never contacted: the test reads the redirect
    returned = {}

    class Form(HTMLParser):
        def __init__(self):
            super().__init__()
            self.action, self.fields = None, {}

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "form" and self.action is None:
                self.action = a.get("action")
            if tag == "input" and a.get("name"):
                self.fields[a["name"]] = a.get("value") or ""

    async def redirect_handler(url):
        # The user's browser: follow redirects, fill the login form, consent.
        async with httpx.AsyncClient() as browser:
            r = await browser.get(url)
            for _ in range(20):
                if r.status_code in (302, 303):
                    location = urljoin(str(r.url), r.headers["location"])
                    if location.startswith(redirect_uri):
                        query = parse_qs(urlparse(location).query)
                        returned["code"] = query["code"][0]
                        returned["state"] = query.get("state", [None])[0]
                        return
                    r = await browser.get(location)
                    continue
                assert r.status_code == 200, r.text
                form = Form()
                form.feed(r.text)
                assert form.action, r.text
                fields = {**form.fields, "login": "alice", "password": "any"}
                r = await browser.post(urljoin(str(r.url), form.action), data=fields)
            pytest.fail("the authorization server never redirected back")

    async def callback_handler():
        return returned["code"], returned["state"]

    class Memory:
        def __init__(self):
            self.tokens, self.client = None, None

        async def get_tokens(self):
            return self.tokens

        async def set_tokens(self, tokens):
            self.tokens = tokens

        async def get_client_info(self):
            return self.client

        async def set_client_info(self, info):
            self.client = info

    async def run():
        storage = Memory()
        auth = OAuthClientProvider(
            server_url=hangar.resource,
            client_metadata=OAuthClientMetadata(
                client_name="hangar-oauth-test", redirect_uris=[redirect_uri],
                grant_types=["authorization_code"], response_types=["code"],
                scope="tools:read tools:admin"),
            storage=storage, redirect_handler=redirect_handler,
            callback_handler=callback_handler)
        async with streamablehttp_client(hangar.resource, auth=auth) as (r, w, _):
            async with ClientSession(r, w) as s:
                await s.initialize()
                who = await s.call_tool("whoami", {})
                refund = await s.call_tool("refund", {})
        return storage, who, refund

    storage, who, refund = asyncio.run(run())
    assert storage.client is not None and storage.client.client_id  # registered dynamically
    row = who.structuredContent["rows"][0]
    assert row == {"sub": "alice", "client": storage.client.client_id}
    assert refund.structuredContent["rows"][0] == {"done": "refunded"}
    claims = pyjwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == hangar.resource


def test_the_inspector_cli_lists_and_calls_with_a_bearer_token(hangar, auth_server):
    cli = TESTS / "node_modules/@modelcontextprotocol/inspector-cli/build/index.js"
    # inspector-cli 1.0.3 checks for `../package.json` relative to the working
    # directory but imports it relative to its own file: run it from a folder
    # whose parent has one (tests/clients) so both agree.
    cwd = TESTS / "clients"
    token = auth_server.token("admin", hangar.resource)
    base = [str(NODE), str(cli), hangar.resource, "--transport", "http",
            "--header", f"Authorization: Bearer {token}"]
    listed = subprocess.run(base + ["--method", "tools/list"], capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=cwd)
    assert listed.returncode == 0, listed.stderr + listed.stdout
    assert "whoami" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    called = subprocess.run(base + ["--method", "tools/call", "--tool-name", "echo",
                                    "--tool-arg", "text=from the inspector"],
                            capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL, cwd=cwd)
    assert called.returncode == 0, called.stderr + called.stdout
    assert json.loads(called.stdout)["content"][0]["text"] == "from the inspector"
    # Without the header, the Inspector is refused.
    refused = subprocess.run([str(NODE), str(cli), hangar.resource, "--transport", "http",
                              "--method", "tools/list"], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL, cwd=cwd)
    assert refused.returncode != 0
