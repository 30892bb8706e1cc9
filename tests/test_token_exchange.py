"""Upstreams called on the caller's behalf: `[upstreams.NAME] auth`.

- `{ kind = "token-exchange", … }`: the caller's OAuth access token is
  exchanged (RFC 8693) at an authorization server for a token scoped to the
  upstream, and the upstream sees that one, never the caller's;
- `{ credential = "X" }`: the upstream sees the caller's own value of the
  per-user provider X (here a `user-key` one the caller connects).

Nobody here wrote the inbound authorization server: oidc-provider
(tests/clients/oidc_server.mjs, through test_oauth.AuthServer) issues the
callers' JWT access tokens, each caller a client registered dynamically, so
each test has callers (subjects) of its own. The exchange is the tests'
own RFC 8693 server (tests/clients/exchange_server.py), which verifies the
subject token against oidc-provider's keys and signs what it issues with a
key of its own; the upstream (tests/clients/audience_upstream.py, the
Python SDK's FastMCP) takes only its service token for listing and only
tokens the exchange server issued for its audience for calls, and tells
each call's token claims and session. Both count what they saw at
`GET /stats`, which is how a test knows what reached them."""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import Mcp, Server, free_port, run_hangar, wait_for
from test_oauth import AuthServer

TESTS = Path(__file__).resolve().parent
FILES = "https://files.example"
SHORT = "https://short.example"  # the exchange server's tokens for it live SHORT_TTL s
SHORT_TTL = 3
ELSEWHERE = "https://elsewhere.example"  # an audience the exchange server issues nothing for
SERVICE_TOKEN = "hangar-own-service-token-5d1c9a"
CLIENT_SECRET = "s3cret-exchange-7b41"
WRONG_SECRET = "wrong-secret-4e2a90"
REFUSED_SUBJECT = "eddsa"  # oidc-provider's static client the exchange server will not act for
ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode()
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
NO_CREDENTIALS = re.compile(
    r'credentials: no credentials for "(?P<provider>[^"]+)": connect it at (?P<url>\S+)')


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ----------------------------------------------------------------- the servers

class Helper:
    """One of tests/clients' Python servers: it prints `ready PORT` once it listens."""

    def __init__(self, script: str, env: dict, log: Path):
        self.log_path = log
        self.log = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, str(TESTS / "clients" / script)],
                                     env={**os.environ, **env}, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        self.port = None

    def ready(self) -> "Helper":
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            self.stop()
            raise RuntimeError(f"{self.log_path.name}: {line!r}\n{self.log_path.read_text()}")
        self.port = int(line.split()[1])
        self.base = f"http://127.0.0.1:{self.port}"
        return self

    def stats(self) -> dict:
        r = httpx.get(f"{self.base}/stats", timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def config(w) -> str:
    exchange = f'kind = "token-exchange", token_url = "{w.exchange.base}/token", client_id = "hangar"'
    secret = 'client_secret = "{{ env.EXCHANGE_CLIENT_SECRET }}"'
    service = f'headers = {{ authorization = "Bearer {SERVICE_TOKEN}" }}'
    return f"""
[server]
cache_dir = "{w.hangar.workdir / "cache"}"
public_url = "{w.hangar.url}"
auth_failures = "1000/m"

[oauth]
issuer = "{w.auth.issuer}"
resource = "{w.hangar.url}/mcp"
scopes_supported = ["tools:read"]
rest = "public"

[credentials]
encryption_key = "{{{{ env.HANGAR_CREDENTIALS_KEY }}}}"

[credentials.paste]
kind = "user-key"

[upstreams.files]
url = "{w.strict.base}/mcp"
{service}
tools = ["token_subject", "bearer"]
refresh = "1s"
auth = {{ {exchange}, {secret}, audience = "{FILES}", scopes = ["files:read"] }}

[upstreams.short]
url = "{w.strict.base}/mcp"
{service}
tools = ["token_subject"]
auth = {{ {exchange}, {secret}, audience = "{SHORT}" }}

[upstreams.elsewhere]
url = "{w.strict.base}/mcp"
{service}
tools = ["token_subject"]
auth = {{ {exchange}, {secret}, audience = "{ELSEWHERE}", scopes = ["files:read"] }}

[upstreams.badclient]
url = "{w.strict.base}/mcp"
{service}
tools = ["token_subject"]
auth = {{ {exchange}, client_secret = "{WRONG_SECRET}", audience = "{FILES}", scopes = ["files:read"] }}

[upstreams.keyed]
url = "{w.keyed.base}/mcp"
{service}
tools = ["bearer"]
auth = {{ credential = "paste" }}
"""


UPSTREAM_TOOLS = {"files.token_subject", "files.bearer", "short.token_subject",
                  "elsewhere.token_subject", "badclient.token_subject", "keyed.bearer"}


class World:
    """oidc-provider (the callers' tokens), the exchange server, the strict
    upstream (exchanged tokens only) and the keyed one (any bearer: the
    callers' pasted keys), and one Hangar in front."""

    def __init__(self, workdir: Path):
        self.started = []
        try:
            self._start(workdir)
        except BaseException:
            self.stop()
            raise

    def _start(self, workdir: Path):
        # All start at once (each fetches the others' keys only when first
        # asked), on ports chosen first.
        auth_ports, exchange = (free_port(), free_port()), f"http://127.0.0.1:{free_port()}"
        self.exchange = self.add(Helper("exchange_server.py", {
            "EXCHANGE_PORT": exchange.rsplit(":", 1)[1],
            "EXCHANGE_SUBJECT_ISSUER": f"http://127.0.0.1:{auth_ports[0]}",
            "EXCHANGE_CLIENT_ID": "hangar", "EXCHANGE_CLIENT_SECRET": CLIENT_SECRET,
            "EXCHANGE_AUDIENCES": json.dumps({FILES: 600, SHORT: SHORT_TTL}),
            "EXCHANGE_REFUSE_SUBJECTS": REFUSED_SUBJECT,
        }, workdir / "exchange.log"))
        self.strict = self.add(Helper("audience_upstream.py", {
            "UPSTREAM_SERVICE_TOKEN": SERVICE_TOKEN, "UPSTREAM_JWKS": f"{exchange}/jwks",
            "UPSTREAM_ISSUER": exchange, "UPSTREAM_AUDIENCE": f"{FILES},{SHORT}",
            # A short token in flight on a loaded machine is not refused on
            # the way; one used again after it expired shows by its `jti`.
            "UPSTREAM_LEEWAY": "5",
        }, workdir / "strict.log"))
        self.keyed = self.add(Helper("audience_upstream.py", {
            "UPSTREAM_SERVICE_TOKEN": SERVICE_TOKEN, "UPSTREAM_ANY_BEARER": "1",
        }, workdir / "keyed.log"))
        self.auth = self.add(AuthServer("xin", ports=auth_ports))
        for helper in (self.exchange, self.strict, self.keyed):
            helper.ready()
        assert self.exchange.base == exchange
        self.hangar = Server(workdir / "hangar", [], env={
            "HANGAR_CREDENTIALS_KEY": ENCRYPTION_KEY, "EXCHANGE_CLIENT_SECRET": CLIENT_SECRET,
            # Hangar's own debug lines too: a token must reach none of them.
            "RUST_LOG": "info,hangar=debug"})
        self.add(self.hangar)
        self.hangar.config_path.write_text(config(self))
        self.resource = f"{self.hangar.url}/mcp"
        self.hangar.start()
        # Every upstream listed (with Hangar's own token) before anything else.
        wait_for(lambda: UPSTREAM_TOOLS <= self.listed(), 60, "the upstreams' tools")
        self.exchange_at_start = self.exchange.stats()
        self.strict_at_start = self.strict.stats()

    def listed(self) -> set:
        r = httpx.get(f"{self.hangar.url}/tools", timeout=10)  # REST is public here
        return {t["name"] for t in r.json()} if r.status_code == 200 else set()

    def caller(self) -> "Caller":
        return Caller(self)

    def add(self, process):
        self.started.append(process)
        return process

    def stop(self):
        for process in reversed(self.started):
            process.stop()


class Caller:
    """A client registered at oidc-provider (RFC 7591) for the client
    credentials grant: its tokens' `sub` is its client id, new for every
    caller."""

    def __init__(self, w: World, client: str | None = None):
        self.w = w
        if client is None:
            r = httpx.post(f"{w.auth.issuer}/reg", json={
                "grant_types": ["client_credentials"], "response_types": [], "redirect_uris": [],
                "token_endpoint_auth_method": "client_secret_basic", "scope": "tools:read"})
            assert r.status_code == 201, r.text
            registered = r.json()
            self.sub, secret = registered["client_id"], registered["client_secret"]
        else:
            self.sub, secret = client, f"{client}-secret"
        r = httpx.post(f"{w.auth.issuer}/token", auth=(self.sub, secret), data={
            "grant_type": "client_credentials", "scope": "tools:read", "resource": w.resource})
        assert r.status_code == 200, r.text
        self.token = r.json()["access_token"]
        self.headers = {"authorization": f"Bearer {self.token}"}

    def session(self) -> Mcp:
        """A new MCP session of this caller's."""
        c = Mcp(self.w.hangar.url)
        c.http.headers.update(self.headers)
        c.initialize()
        return c

    def exchanges(self) -> list:
        """What the exchange server was asked with this caller's token."""
        return [r for r in self.w.exchange.stats()["requests"]
                if r["subject_token_sha256"] == sha256(self.token)]


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("exchange"))
    yield world
    world.stop()


# ----------------------------------------------------------------- helpers

def seen(reply) -> dict:
    """What the upstream's tool answered (its JSON)."""
    assert "result" in reply and not reply["result"].get("isError"), reply
    return json.loads(reply["result"]["content"][0]["text"])


def failure(reply) -> str:
    """The message of a failed call: a JSON-RPC error, or an `isError` result."""
    if "error" in reply:
        return reply["error"]["message"]
    assert reply.get("result", {}).get("isError") is True, reply
    return reply["result"]["content"][0]["text"]


def rest_failure(r: httpx.Response) -> str:
    assert r.status_code >= 400, (r.status_code, r.text)
    body = r.json()
    if "content" in body:
        assert body.get("isError") is True, body
        return body["content"][0]["text"]
    error = body["error"]
    return error["message"] if isinstance(error, dict) else error


def not_called(before: dict, after: dict):
    """Between two /stats of an upstream: no tool call reached it, and
    nothing but Hangar's own listing (the service token) did."""
    assert after["calls"] == before["calls"], after["calls"][len(before["calls"]):]
    for kind in ("exchanged", "bearer", "refused", "forbidden", "duplicate"):
        assert after["requests"].get(kind, 0) == before["requests"].get(kind, 0), (kind, after["methods"])


def no_refusals(before: dict, after: dict):
    """Between two /stats of an upstream: nothing it refused reached it
    (no caller's token, no service token calling, no second Authorization)."""
    for kind in ("refused", "forbidden", "duplicate"):
        assert after["requests"].get(kind, 0) == before["requests"].get(kind, 0), (kind, after["methods"])


# ----------------------------------------------------------------------- tests

def test_listing_the_upstreams_tools_exchanges_nothing(w):
    """At load Hangar listed every upstream with `headers` alone (the
    service token): no exchange, no caller's token. Its periodic refresh
    (`refresh = "1s"` on files) keeps doing so after callers' tokens were
    exchanged."""
    assert w.exchange_at_start["requests"] == [], w.exchange_at_start["requests"]
    start = w.strict_at_start
    assert start["methods"]["service"]["tools/list"] >= 1, start
    assert set(start["requests"]) == {"service"}, start["methods"]
    assert start["calls"] == []
    keyed = w.keyed.stats()
    assert keyed["methods"]["service"]["tools/list"] >= 1 and keyed["calls"] == [], keyed

    a = w.caller()
    assert seen(a.session().call("files.token_subject", {}))["sub"] == a.sub
    exchanged = w.exchange.stats()["exchanges"]
    lists = w.strict.stats()["methods"]["service"]["tools/list"]
    wait_for(lambda: w.strict.stats()["methods"]["service"]["tools/list"] >= lists + 2, 30,
             "two refreshes of files' tools")
    after = w.strict.stats()
    for kind, methods in after["methods"].items():
        if kind != "service":
            assert "tools/list" not in methods, (kind, methods)
    assert w.exchange.stats()["exchanges"] == exchanged  # refreshing exchanged nothing


def test_each_caller_is_seen_upstream_as_themselves_never_with_their_own_token(w):
    a, b = w.caller(), w.caller()
    assert a.sub != b.sub
    before = w.strict.stats()
    for caller in (a, b):
        claims = seen(caller.session().call("files.token_subject", {}))
        assert claims["sub"] == caller.sub, claims
        assert claims["aud"] == FILES and claims["scope"] == "files:read", claims
        assert claims["iss"] == w.exchange.base and claims["act"] == {"sub": "hangar"}, claims
        # What Hangar asked for (RFC 8693 §2.1), with the caller's token as the subject.
        [asked] = caller.exchanges()
        assert asked["outcome"] == "issued", asked
        assert asked["content_type"].startswith("application/x-www-form-urlencoded")
        assert (asked["client_auth"], asked["client_id"]) == ("basic", "hangar"), asked
        assert asked["grant_type"] == GRANT
        assert asked["subject_token_type"] == ACCESS_TOKEN
        assert asked["requested_token_type"] == ACCESS_TOKEN
        assert asked["audience"] == [FILES] and asked["resource"] == []
        assert asked["scope"] == "files:read"
        assert set(asked["params"]) == {"grant_type", "subject_token", "subject_token_type",
                                        "requested_token_type", "audience", "scope"}, asked
    upstream = w.strict.stats()
    no_refusals(before, upstream)
    for caller in (a, b):
        # The caller's own token never reached the upstream, not even refused.
        assert sha256(caller.token) not in upstream["bearers"]
        calls = [c for c in upstream["calls"] if c["sub"] == caller.sub]
        assert calls and all(c["kind"] == "exchanged" for c in calls), calls
        [asked] = caller.exchanges()
        assert {c["bearer_sha256"] for c in calls} == {asked["issued_sha256"]}


def test_one_exchange_per_caller_for_many_calls(w):
    a, b = w.caller(), w.caller()
    before = w.strict.stats()
    first = a.session()
    jtis = {seen(first.call("files.token_subject", {}))["jti"] for _ in range(3)}
    # Another MCP session of the same caller, and another tool of the same upstream.
    second = a.session()
    jtis.add(seen(second.call("files.token_subject", {}))["jti"])
    bearer = seen(second.call("files.bearer", {}))["sha256"]
    assert len(jtis) == 1, jtis
    [asked] = a.exchanges()
    assert asked["issued_sha256"] == bearer
    # Another caller exchanges their own, once.
    theirs = b.session()
    other = {seen(theirs.call("files.token_subject", {}))["jti"] for _ in range(2)}
    assert len(other) == 1 and other != jtis
    assert len(b.exchanges()) == 1
    assert len(a.exchanges()) == 1  # still
    no_refusals(before, w.strict.stats())


def test_an_expired_exchanged_token_is_not_used_again(w):
    """The short audience's tokens live SHORT_TTL s: after one expired, the
    same caller's next call carries a new one. No `scopes` configured: the
    exchange names no scope."""
    a = w.caller()
    c = a.session()
    one = seen(c.call("short.token_subject", {}))
    assert one["sub"] == a.sub and one["aud"] == SHORT and one["scope"] is None, one
    wait_for(lambda: time.time() > one["exp"] + 1, SHORT_TTL + 10, "the exchanged token to expire")
    two = seen(c.call("short.token_subject", {}))
    assert two["sub"] == a.sub and two["jti"] != one["jti"] and two["exp"] > one["exp"], (one, two)
    asked = a.exchanges()
    assert len(asked) >= 2 and all(r["outcome"] == "issued" for r in asked), asked
    for r in asked:
        assert r["audience"] == [SHORT] and r["scope"] is None and "scope" not in r["params"], r


def test_upstream_sessions_are_per_principal(w):
    a, b = w.caller(), w.caller()
    a1, b1, a2 = a.session(), b.session(), a.session()
    sessions = {}
    for who, c in (("a", a1), ("b", b1), ("a", a2), ("b", b1), ("a", a1)):
        sessions.setdefault(who, set()).add(seen(c.call("files.token_subject", {}))["session"])
    assert None not in sessions["a"] | sessions["b"], sessions
    assert not sessions["a"] & sessions["b"], sessions
    # And over every call this module made so far: an upstream session id
    # never carried two callers' tokens.
    for upstream, key in ((w.strict, "sub"), (w.keyed, "bearer_sha256")):
        owners = {}
        for call in upstream.stats()["calls"]:
            owners.setdefault(call["session"], set()).add(call[key])
        shared = {s: o for s, o in owners.items() if len(o) > 1}
        assert not shared, shared


def test_a_refused_exchange_is_a_clear_error_and_the_upstream_is_not_called(w):
    a = w.caller()
    c = a.session()
    upstream, exchange = w.strict.stats(), w.exchange.stats()
    cases = [
        ("elsewhere.token_subject", c, "invalid_target"),  # an audience the server does not serve
        ("badclient.token_subject", c, "invalid_client"),  # Hangar's client secret is wrong
        # A subject the server will not act for (oidc-provider's EdDSA-signed token).
        ("files.token_subject", Caller(w, REFUSED_SUBJECT).session(), "invalid_grant"),
    ]
    for tool, session, code in cases:
        message = failure(session.call(tool, {}))
        assert "token exchange" in message and code in message, (tool, message)
        for secret in (CLIENT_SECRET, WRONG_SECRET, a.token):
            assert secret not in message, (tool, message)
    not_called(upstream, w.strict.stats())
    after = w.exchange.stats()
    refused = [r["outcome"] for r in after["requests"][len(exchange["requests"]):]]
    assert sorted(refused) == ["invalid_client", "invalid_grant", "invalid_target"], refused
    assert after["exchanges"] == exchange["exchanges"]
    # The caller's calls to an upstream whose exchange works still go through,
    # and one caller's refusals opened no breaker for the others.
    assert seen(c.call("files.token_subject", {}))["sub"] == a.sub
    assert seen(w.caller().session().call("files.token_subject", {}))["aud"] == FILES


def test_a_caller_without_an_oauth_access_token_is_told_so(w):
    """REST is open here (`rest = "public"`): a call there has no access
    token to exchange. Nor has a personal token's caller (`hangar token`)."""
    upstream, exchange = w.strict.stats(), w.exchange.stats()
    for tool in ("files.token_subject", "files.bearer", "files.token_subject", "short.token_subject"):
        r = httpx.post(f"{w.hangar.url}/tools/{tool}/call", json={}, timeout=30)
        message = rest_failure(r)
        assert "token exchange" in message and "access token" in message, message
    made = run_hangar("token", "create", "pat-user", "--config", str(w.hangar.config_path),
                      env=w.hangar.env)
    assert made.returncode == 0, made.stderr
    personal = made.stdout.strip()
    c = Mcp(w.hangar.url)
    c.http.headers["authorization"] = f"Bearer {personal}"
    c.initialize()
    message = failure(c.call("files.token_subject", {}))
    assert "token exchange" in message and "access token" in message, message
    assert personal not in message
    not_called(upstream, w.strict.stats())
    assert w.exchange.stats()["requests"] == exchange["requests"]
    assert sha256(personal) not in w.strict.stats()["bearers"]
    # Callers without a token are their own problem: no breaker opened for the others.
    assert seen(w.caller().session().call("files.token_subject", {}))["aud"] == FILES


def test_credential_auth_sends_the_callers_own_key(w):
    a, b = w.caller(), w.caller()
    keyed = w.keyed.stats()
    # Not connected: told where to connect, and the upstream is not called.
    for caller in (a, b):
        m = NO_CREDENTIALS.search(failure(caller.session().call("keyed.bearer", {})))
        assert m and m["provider"] == "paste", m
        assert m["url"].startswith(f"{w.hangar.url}/connect/paste"), m["url"]
    not_called(keyed, w.keyed.stats())
    keys = {a: f"{a.sub[:8]}-pasted-key-91c3", b: f"{b.sub[:8]}-pasted-key-0d7e"}
    r = httpx.post(f"{w.hangar.url}/connect/paste", json={"key": keys[a]}, headers=a.headers)
    assert r.status_code == 200 and r.json() == {"connected": True}, r.text
    assert seen(a.session().call("keyed.bearer", {}))["sha256"] == sha256(keys[a])
    assert NO_CREDENTIALS.search(failure(b.session().call("keyed.bearer", {})))
    r = httpx.post(f"{w.hangar.url}/connect/paste", json={"key": keys[b]}, headers=b.headers)
    assert r.status_code == 200, r.text
    sessions = {}
    for caller in (b, a, b):
        got = seen(caller.session().call("keyed.bearer", {}))
        assert got["sha256"] == sha256(keys[caller]), caller.sub
        sessions.setdefault(caller, set()).add(got["session"])
    assert not sessions[a] & sessions[b], sessions
    bearers = w.keyed.stats()["bearers"]
    assert sha256(a.token) not in bearers and sha256(b.token) not in bearers
    # Disconnected: no key again.
    r = httpx.delete(f"{w.hangar.url}/connect/paste", headers=a.headers)
    assert r.status_code == 200 and r.json() == {"connected": False}, r.text
    assert NO_CREDENTIALS.search(failure(a.session().call("keyed.bearer", {})))
    assert seen(b.session().call("keyed.bearer", {}))["sha256"] == sha256(keys[b])
    log = w.hangar.log_text()
    for key in keys.values():
        assert key not in log


def test_exchanged_tokens_never_reach_the_log(w):
    a = w.caller()
    seen(a.session().call("files.token_subject", {}))
    seen(a.session().call("short.token_subject", {}))
    issued = w.exchange.stats()["tokens"]
    assert len(issued) >= 2
    log = w.hangar.log_text()
    assert log, "no log"
    for token in issued:
        assert token not in log
        assert token.split(".")[2] not in log  # nor its signature alone
    assert CLIENT_SECRET not in log and WRONG_SECRET not in log
