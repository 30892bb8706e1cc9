"""Personal tokens (issue 63): `hangar token create SUBJECT` makes a token
(`hgr_…`) for clients that cannot do OAuth; it is sent as `Authorization:
Bearer hgr_…`, or in the path of `/mcp/t/TOKEN` for a client that can only
be given a URL, and stands for SUBJECT and its claims wherever an OAuth
bearer token does. `hangar token list` and `revoke` work on the config's kv
store beside a running server: a token made now is taken at once, a revoked
one refused at once.

What the principal is is read back through the pipeline: SQL tools bind the
caller's claims (`from_claim`), `visible_to` hides a tool from callers whose
claims do not match, `/connect` and the `http-fetch` test plugin's
`credential {provider}` tool show per-user credentials, and the access log
names the principal. The Python MCP SDK is the client given only a URL."""

import asyncio
import base64
import json
import os
import re
import time
import uuid

import httpx
import jwt as pyjwt
import pytest

from conftest import REDIS_URL, Mcp, Server, run_hangar, wait_for

ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode()
ENV = {"HANGAR_CREDENTIALS_KEY": ENCRYPTION_KEY}
TOKEN = re.compile(r"hgr_[A-Za-z0-9_-]{40,}")
JWT_SECRET = "an-hs256-secret-of-at-least-32-bytes"
RUN = uuid.uuid4().hex[:12]
NO_CREDENTIALS = re.compile(r'^credentials: no credentials for "paste": connect it at \S+$')

# Every token this process made, to look for in logs and stores.
MADE: list[str] = []

PROVIDERS = """
[credentials]
encryption_key = "{{{{ env.HANGAR_CREDENTIALS_KEY }}}}"

[credentials.paste]
kind = "user-key"

[plugins.http-fetch]
grants = {{ credentials = ["paste"] }}

[uploads]
dir = "{work}/uploads"
"""

TOOLS = """
[connectors.lite]
kind = "sqlite"
path = "{work}/lite.db"

[[tools]]
name = "whoami"
description = "The caller's subject and the id of the personal token it came with"
use = "lite"
statement = "SELECT {{{{ inputs.sub }}}} AS sub, {{{{ inputs.tok }}}} AS tok"
inputs.sub = {{ type = "string", from_claim = "sub" }}
inputs.tok = {{ type = "string", from_claim = "hangar_token" }}

[[tools]]
name = "claims"
description = "The caller's org, level and admin claims, typed"
use = "lite"
statement = "SELECT {{{{ inputs.org }}}} AS org, {{{{ inputs.level }}}} AS level, {{{{ inputs.admin }}}} AS admin"
inputs.org = {{ type = "string", from_claim = "org" }}
inputs.level = {{ type = "integer", from_claim = "level" }}
inputs.admin = {{ type = "boolean", from_claim = "admin" }}

[[tools]]
name = "acme.only"
description = "Shown to callers whose org is acme"
use = "lite"
statement = "SELECT 'for acme' AS note"
visible_to = {{ org = ["acme"] }}

[[tools]]
name = "files.size"
description = "The size of an uploaded file"
use = "lite"
statement = "SELECT length({{{{ inputs.file }}}}) AS bytes"
inputs.file = {{ type = "string", required = true }}
consumes_uploads = ["file"]
"""


def make_server(workdir, plugins, body, server_keys="", cache=None, env=None) -> Server:
    """A Server whose config is `[server]` (its own cache folder unless
    `cache`, its own URL as public_url, `server_keys`) then `body`."""
    s = Server(workdir, plugins, env={**ENV, **(env or {})})
    s.config_path.write_text(
        f'[server]\ncache_dir = "{cache or workdir / "cache"}"\npublic_url = "{s.url}"\n'
        + server_keys + body)
    return s


@pytest.fixture(scope="module")
def servers():
    started = []
    yield started
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def hangar(tmp_path_factory, servers):
    """Tokens in the embedded kv store of a cache folder of its own; Hangar's
    own lines at debug, as JSON."""
    work = tmp_path_factory.mktemp("tokens")
    s = make_server(work, ("echo", "http-fetch"), (PROVIDERS + TOOLS).format(work=work),
                    'auth_failures = "1000/m"\n',
                    env={"HANGAR_LOG_FORMAT": "json", "RUST_LOG": "info,hangar=debug"})
    servers.append(s.start())
    return s


# ------------------------------------------------------------------ the commands

def cli(server: Server, *args, config=None):
    return run_hangar("token", *args, "--config", str(config or server.config_path), env=ENV)


def create(server: Server, subject: str, *args, config=None) -> tuple[str, str]:
    """`hangar token create SUBJECT ARGS…`: (the token, the id its note on stderr names)."""
    out = cli(server, "create", subject, *args, config=config)
    assert out.returncode == 0, (out.stdout, out.stderr)
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and out.stdout == lines[0] + "\n", repr(out.stdout)
    token = lines[0]
    assert TOKEN.fullmatch(token) and 44 <= len(token) <= 52, token
    assert token not in out.stderr and token[4:] not in out.stderr, out.stderr
    MADE.append(token)
    mine = [t for t in listed(server, config) if t["subject"] == subject and t["id"] in out.stderr]
    assert len(mine) == 1, (out.stderr, listed(server, config))
    return token, mine[0]["id"]


def listed(server: Server, config=None) -> list:
    out = cli(server, "list", "--json", config=config)
    assert out.returncode == 0, out.stderr
    tokens = json.loads(out.stdout)
    assert isinstance(tokens, list), out.stdout
    return tokens


def bearer(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def call(server: Server, tool: str, arguments: dict, headers: dict, path: str = "/mcp") -> dict:
    c = Mcp(server.url, path=path)
    c.http.headers.update(headers)
    return c.call(tool, arguments)


def rows(server: Server, tool: str, headers: dict, path: str = "/mcp") -> list:
    r = call(server, tool, {}, headers, path)
    assert "result" in r and r["result"]["isError"] is False, r
    return r["result"]["structuredContent"]["rows"]


def mcp_tools(server: Server, headers: dict, path: str = "/mcp") -> list[str]:
    c = Mcp(server.url, path=path)
    c.http.headers.update(headers)
    r = c.request("tools/list")
    assert "result" in r, r
    return [t["name"] for t in r["result"]["tools"]]


def assert_invalid_token(r: httpx.Response):
    assert r.status_code == 401, (r.status_code, r.text)
    body = r.json()
    assert body["error"] == "invalid_token" and isinstance(body["error_description"], str), body
    challenge = r.headers.get("www-authenticate", "")
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge, challenge


def unknown_token() -> str:
    return "hgr_" + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


def initialize_body() -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "tokens-test", "version": "0"}}}


MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


# ----------------------------------------------------------------------- tests

def test_create_prints_the_token_alone_and_list_shows_it_without_secrets(hangar):
    before = time.time()
    token, id_ = create(hangar, "tess", "--claim", "org=acme", "--claim", "level=3",
                        "--claim", "admin=true", "--claim", 'roles=["a","b"]',
                        "--claim", 'meta={"k":1}', "--claim", "note=a=b", "--claim", "ratio=0.5",
                        "--claim", "word=hello world")
    [row] = [t for t in listed(hangar) if t["id"] == id_]
    assert set(row) == {"id", "subject", "claims", "created"}, row  # no expiry: no `expires`
    assert row["subject"] == "tess"
    assert row["claims"] == {"org": "acme", "level": 3, "admin": True, "roles": ["a", "b"],
                             "meta": {"k": 1}, "note": "a=b", "ratio": 0.5, "word": "hello world"}, row
    assert isinstance(row["created"], int) and before - 2 <= row["created"] <= time.time() + 2, row
    # No secret in either listing.
    text = cli(hangar, "list")
    assert text.returncode == 0 and id_ in text.stdout and "tess" in text.stdout, text
    plain = cli(hangar, "list", "--json")
    for out in (text, plain):
        assert token not in out.stdout + out.stderr and token[4:] not in out.stdout + out.stderr
    # An expiry: unix seconds, 30 days on.
    _, id30 = create(hangar, "tess", "--expires", "30d")
    [row30] = [t for t in listed(hangar) if t["id"] == id30]
    assert abs(row30["expires"] - row30["created"] - 30 * 86400) <= 1, row30


def test_sub_and_hangar_token_are_refused_as_claim_names(hangar):
    for claim in ("sub=mallory", "hangar_token=forged"):
        out = cli(hangar, "create", "ursula", "--claim", claim)
        assert out.returncode != 0, (claim, out.stdout)
        assert not TOKEN.search(out.stdout), out.stdout
    bad = cli(hangar, "create", "ursula", "--expires", "soon")
    assert bad.returncode != 0 and not TOKEN.search(bad.stdout), (bad.stdout, bad.stderr)
    assert [t for t in listed(hangar) if t["subject"] == "ursula"] == []


def test_a_token_is_its_subject_and_claims_on_mcp_and_rest(hangar):
    token, id_ = create(hangar, "alice", "--claim", "org=acme", "--claim", "level=7",
                        "--claim", "admin=true")
    h = bearer(token)
    assert rows(hangar, "whoami", h) == [{"sub": "alice", "tok": id_}]
    # SQLite has no boolean: a bound true comes back as 1.
    assert rows(hangar, "claims", h) in ([{"org": "acme", "level": 7, "admin": 1}],
                                         [{"org": "acme", "level": 7, "admin": True}])
    r = httpx.post(f"{hangar.url}/tools/whoami/call", json={}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["structuredContent"]["rows"] == [{"sub": "alice", "tok": id_}]
    # A session opened with the token is the token's.
    c = Mcp(hangar.url)
    c.http.headers.update(h)
    c.initialize()
    assert c.call("whoami", {})["result"]["structuredContent"]["rows"][0]["sub"] == "alice"


def test_visible_to_follows_the_tokens_claims(hangar):
    acme, _ = create(hangar, "amos", "--claim", "org=acme")
    globex, _ = create(hangar, "gail", "--claim", "org=globex")
    assert "acme.only" in mcp_tools(hangar, bearer(acme))
    assert "acme.only" not in mcp_tools(hangar, bearer(globex))
    assert "acme.only" not in mcp_tools(hangar, {})
    rest = lambda h: [t["name"] for t in httpx.get(f"{hangar.url}/tools", headers=h).json()]  # noqa: E731
    assert "acme.only" in rest(bearer(acme)) and "acme.only" not in rest(bearer(globex))
    assert httpx.get(f"{hangar.url}/tools/acme.only", headers=bearer(acme)).status_code == 200
    assert httpx.get(f"{hangar.url}/tools/acme.only", headers=bearer(globex)).status_code == 404
    assert rows(hangar, "acme.only", bearer(acme)) == [{"note": "for acme"}]
    hidden = call(hangar, "acme.only", {}, bearer(globex))
    assert hidden["error"]["code"] == -32601, hidden


def test_a_request_without_a_personal_token_is_unchanged(hangar):
    """Anonymous callers, and a bearer token that is not a personal one,
    pass as before on a server with neither [oauth] nor [auth]."""
    for h in ({}, {"authorization": "Bearer not-a-personal-token"}, {"authorization": "Basic eDp5"}):
        r = call(hangar, "echo", {"text": "still here"}, h)
        assert r["result"]["content"][0]["text"] == "still here", (h, r)
        assert httpx.get(f"{hangar.url}/tools", headers=h).status_code == 200
    # Anonymous: no claims to bind.
    r = call(hangar, "whoami", {}, {})
    assert "error" in r or r["result"]["isError"], r


def test_the_path_form_is_mcp_for_that_token(hangar):
    token, id_ = create(hangar, "pat")
    path = f"/mcp/t/{token}"
    c = Mcp(hangar.url, path=path)
    c.initialize()
    assert c.session
    assert "whoami" in [t["name"] for t in c.request("tools/list")["result"]["tools"]]
    assert c.call("whoami", {})["result"]["structuredContent"]["rows"] == [{"sub": "pat", "tok": id_}]
    # GET: the session's stream opens.
    with httpx.stream("GET", hangar.url + path, timeout=10,
                      headers={"accept": "text/event-stream", "mcp-session-id": c.session}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
    # DELETE ends the session.
    r = httpx.delete(hangar.url + path, headers={"mcp-session-id": c.session})
    assert r.status_code in (200, 202, 204), (r.status_code, r.text)
    gone = httpx.post(hangar.url + path, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                      headers={**MCP_HEADERS, "mcp-session-id": c.session})
    assert gone.status_code == 404, (gone.status_code, gone.text)
    # Stateless, without initialize, too.
    assert rows(hangar, "whoami", {}, path=path) == [{"sub": "pat", "tok": id_}]
    # An unknown token in the path: refused as in the header.
    assert_invalid_token(httpx.post(f"{hangar.url}/mcp/t/{unknown_token()}", json=initialize_body(),
                                    headers=MCP_HEADERS))


def test_the_python_sdk_given_only_a_url(hangar):
    """The official SDK's streamable HTTP client (POST, GET and DELETE on
    the one URL it is given), listing tools and calling one."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    token, id_ = create(hangar, "sdk-user")

    async def main():
        async with streamablehttp_client(f"{hangar.url}/mcp/t/{token}") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("whoami", {})
                echo = await session.call_tool("echo", {"text": "from the sdk"})
                return [t.name for t in tools.tools], result, echo

    names, result, echo = asyncio.run(main())
    assert {"whoami", "echo", "credential"} <= set(names), names
    assert result.isError is False, result
    assert result.structuredContent["rows"] == [{"sub": "sdk-user", "tok": id_}], result
    assert echo.content[0].text == "from the sdk"


def test_a_token_made_or_revoked_beside_the_running_server_counts_at_once(hangar):
    token, _ = create(hangar, "rita")
    assert rows(hangar, "whoami", bearer(token))[0]["sub"] == "rita"
    out = cli(hangar, "revoke", "rita")
    assert out.returncode == 0 and re.search(r"\b1\b", out.stdout), (out.stdout, out.stderr)
    assert_invalid_token(httpx.post(f"{hangar.url}/mcp", json=initialize_body(),
                                    headers={**MCP_HEADERS, **bearer(token)}))
    assert_invalid_token(httpx.post(f"{hangar.url}/tools/echo/call", json={"text": "x"},
                                    headers=bearer(token)))
    assert [t for t in listed(hangar) if t["subject"] == "rita"] == []
    # Nothing left to revoke: exit code 1.
    again = cli(hangar, "revoke", "rita")
    assert again.returncode == 1, (again.stdout, again.stderr)


def test_revoke_by_id_leaves_the_subjects_other_tokens(hangar):
    first, first_id = create(hangar, "ivy")
    second, second_id = create(hangar, "ivy")
    third, _ = create(hangar, "ivy")
    other, _ = create(hangar, "ivo")
    out = cli(hangar, "revoke", "ivy", "--id", first_id)
    assert out.returncode == 0 and re.search(r"\b1\b", out.stdout), (out.stdout, out.stderr)
    assert_invalid_token(httpx.get(f"{hangar.url}/tools", headers=bearer(first)))
    assert rows(hangar, "whoami", bearer(second)) == [{"sub": "ivy", "tok": second_id}]
    # An id of another subject's token matches nothing.
    assert cli(hangar, "revoke", "ivo", "--id", second_id).returncode == 1
    assert rows(hangar, "whoami", bearer(second))[0]["sub"] == "ivy"
    # All of a subject's: the other two, and not ivo's.
    out = cli(hangar, "revoke", "ivy")
    assert out.returncode == 0 and re.search(r"\b2\b", out.stdout), (out.stdout, out.stderr)
    for t in (second, third):
        assert_invalid_token(httpx.get(f"{hangar.url}/tools", headers=bearer(t)))
    assert rows(hangar, "whoami", bearer(other))[0]["sub"] == "ivo"


def test_an_expired_token_is_refused_and_no_longer_listed(hangar):
    token, id_ = create(hangar, "eve", "--expires", "5s")
    [row] = [t for t in listed(hangar) if t["id"] == id_]
    assert row["expires"] - row["created"] == 5, row
    assert rows(hangar, "whoami", bearer(token))[0]["sub"] == "eve"

    def refused():
        r = httpx.get(f"{hangar.url}/tools", headers=bearer(token))
        return r if r.status_code != 200 else None

    assert_invalid_token(wait_for(refused, 10, "the token to expire"))
    assert time.time() >= row["expires"] - 1
    # Refused from its `expires` second on; its row goes when the store's
    # TTL (5 s after it was made, to the millisecond) runs out.
    wait_for(lambda: id_ not in [t["id"] for t in listed(hangar)], 3, "the expired token to leave the list")


def test_unknown_tokens_get_invalid_token_on_every_door(hangar):
    h = bearer(unknown_token())
    doors = {
        "POST /mcp": httpx.post(f"{hangar.url}/mcp", json=initialize_body(), headers={**MCP_HEADERS, **h}),
        "GET /tools": httpx.get(f"{hangar.url}/tools", headers=h),
        "GET /tools/echo": httpx.get(f"{hangar.url}/tools/echo", headers=h),
        "POST /tools/echo/call": httpx.post(f"{hangar.url}/tools/echo/call", json={"text": "x"}, headers=h),
        "GET /openapi.json": httpx.get(f"{hangar.url}/openapi.json", headers=h),
        "POST /uploads": httpx.post(f"{hangar.url}/uploads", files=[("file", ("a.txt", b"abc", "text/plain"))],
                                    headers=h),
        "GET /uploads": httpx.get(f"{hangar.url}/uploads", headers=h),
        "GET /connect": httpx.get(f"{hangar.url}/connect", headers=h),
        "POST /connect/paste": httpx.post(f"{hangar.url}/connect/paste", json={"key": "k"}, headers=h),
        "DELETE /connect/paste": httpx.delete(f"{hangar.url}/connect/paste", headers=h),
        "POST /mcp/t/TOKEN": httpx.post(f"{hangar.url}/mcp/t/{unknown_token()}", json=initialize_body(),
                                        headers=MCP_HEADERS),
    }
    wrong = {}
    for door, r in doors.items():
        try:
            assert_invalid_token(r)
        except (AssertionError, ValueError) as e:
            wrong[door] = (r.status_code, r.headers.get("www-authenticate"), r.text[:200], str(e)[:100])
    assert not wrong, "doors not answering invalid_token: " + "; ".join(
        f"{door}: {status} www-authenticate={challenge!r} {text}" for door, (status, challenge, text, _) in wrong.items())


def test_connect_and_per_user_credentials_follow_the_tokens_subject(hangar):
    token, _ = create(hangar, "tina")
    second, _ = create(hangar, "tina")
    stranger, _ = create(hangar, "uma")
    r = httpx.get(f"{hangar.url}/connect", headers=bearer(token))
    assert r.status_code == 200, r.text
    assert {p["name"]: p["connected"] for p in r.json()["providers"]} == {"paste": False}
    r = httpx.post(f"{hangar.url}/connect/paste", json={"key": "tina-pasted-key-5d1c"}, headers=bearer(token))
    assert r.status_code == 200 and r.json() == {"connected": True}, r.text
    MADE.append("tina-pasted-key-5d1c")

    def credential(headers, path="/mcp"):
        r = call(hangar, "credential", {"provider": "paste"}, headers, path)
        assert "result" in r, r
        return r["result"]["isError"], r["result"]["content"][0]["text"]

    # The subject's connection, whichever of its tokens, header or path.
    assert credential(bearer(token)) == (False, "tina-pasted-key-5d1c")
    assert credential(bearer(second)) == (False, "tina-pasted-key-5d1c")
    assert credential({}, f"/mcp/t/{second}") == (False, "tina-pasted-key-5d1c")
    r = httpx.get(f"{hangar.url}/connect", headers=bearer(second))
    assert r.json()["providers"][0]["connected"] is True, r.text
    # Another subject has none: the error names where to connect.
    is_error, text = credential(bearer(stranger))
    assert is_error and NO_CREDENTIALS.match(text), text
    assert f"{hangar.url}/connect/paste?ticket=" in text
    r = httpx.delete(f"{hangar.url}/connect/paste", headers=bearer(second))
    assert r.status_code == 200 and r.json() == {"connected": False}, r.text
    assert credential(bearer(token))[0] is True


def test_uploads_take_a_personal_token_as_the_caller(hangar):
    token, _ = create(hangar, "ulla")
    other, _ = create(hangar, "ugo")
    files = [("file", ("a.txt", b"alpha", "text/plain"))]
    assert httpx.post(f"{hangar.url}/uploads", files=files).status_code == 401
    r = httpx.post(f"{hangar.url}/uploads", files=files, headers=bearer(token))
    assert r.status_code == 201, r.text
    [up] = r.json()["uploads"]
    assert up["name"] == "a.txt" and up["size"] == 5, up
    mine = httpx.get(f"{hangar.url}/uploads", headers=bearer(token))
    assert mine.status_code == 200 and [u["handle"] for u in mine.json()["uploads"]] == [up["handle"]], mine.text
    theirs = httpx.get(f"{hangar.url}/uploads", headers=bearer(other))
    assert theirs.status_code == 200 and theirs.json()["uploads"] == [], theirs.text


def access_records(server: Server) -> list[dict]:
    out = []
    for line in server.log_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("target") == "hangar::access":
            out.append(record)
    return out


def test_a_token_never_reaches_the_log_and_the_path_is_logged_redacted(hangar):
    token, _ = create(hangar, "logan")
    unknown = unknown_token()
    MADE.append(unknown)
    c = Mcp(hangar.url, path=f"/mcp/t/{token}")
    c.initialize()
    assert c.call("whoami", {})["result"]["isError"] is False
    assert call(hangar, "echo", {"text": "x"}, bearer(token))["result"]["isError"] is False
    assert httpx.post(f"{hangar.url}/tools/whoami/call", json={}, headers=bearer(token)).status_code == 200
    httpx.delete(f"{hangar.url}/mcp/t/{token}", headers={"mcp-session-id": c.session})
    assert_invalid_token(httpx.post(f"{hangar.url}/mcp/t/{unknown}", json=initialize_body(),
                                    headers=MCP_HEADERS))
    assert_invalid_token(httpx.get(f"{hangar.url}/tools", headers=bearer(unknown)))
    # Each call's access line names the subject.
    def logged():
        calls = [a for a in access_records(hangar) if a.get("principal") == "logan"]
        return calls if {a["tool"] for a in calls} >= {"whoami", "echo"} else None

    wait_for(logged, 5, "access lines naming the token's subject")
    log = hangar.log_text()
    for secret in MADE:
        assert secret not in log and secret[4:] not in log, f"{secret[:8]}… is in the log"
    assert "/mcp/t/…" in log, "the refused path-form request's line does not show /mcp/t/…"


def test_the_kv_store_holds_only_a_digest(hangar):
    token, _ = create(hangar, "dora-the-digest")
    assert rows(hangar, "whoami", bearer(token))[0]["sub"] == "dora-the-digest"
    files = sorted((hangar.workdir / "cache").glob("kv.sqlite3*"))
    assert files, list((hangar.workdir / "cache").iterdir())
    stored = b"".join(f.read_bytes() for f in files)
    assert b"dora-the-digest" in stored  # the store the tokens are in
    for secret in MADE:
        assert secret.encode() not in stored and secret[4:].encode() not in stored, secret[:8]


def test_refused_tokens_count_against_auth_failures(tmp_path_factory, servers):
    """Three refusals a minute: the fourth request of that client gets 429
    before its token is looked at, a good token too; another client (by a
    trusted proxy's X-Forwarded-For) is not touched."""
    work = tmp_path_factory.mktemp("throttled")
    s = make_server(work, ("echo", "http-fetch"), PROVIDERS.format(work=work),
                    'auth_failures = "3/m"\ntrusted_proxies = ["127.0.0.1"]\n')
    servers.append(s.start())
    good, _ = create(s, "gus")
    guesser = {"x-forwarded-for": "203.0.113.66"}
    codes = [httpx.get(f"{s.url}/tools", headers={**guesser, **bearer(unknown_token())}).status_code
             for _ in range(5)]
    assert codes == [401, 401, 401, 429, 429], codes
    r = httpx.post(f"{s.url}/tools/echo/call", json={"text": "x"}, headers={**guesser, **bearer(good)})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1, (r.status_code, r.text)
    # The path form counts the same way.
    r = httpx.post(f"{s.url}/mcp/t/{unknown_token()}", json=initialize_body(), headers={**MCP_HEADERS, **guesser})
    assert r.status_code == 429, (r.status_code, r.text)
    # /connect… too: its refusals count, and past the allowance it is closed.
    r = httpx.get(f"{s.url}/connect", headers={**guesser, **bearer(unknown_token())})
    assert r.status_code == 429, (r.status_code, r.text)
    other = {"x-forwarded-for": "203.0.113.67"}
    r = httpx.post(f"{s.url}/tools/echo/call", json={"text": "x"}, headers={**other, **bearer(good)})
    assert r.status_code == 200, (r.status_code, r.text)
    assert_invalid_token(httpx.get(f"{s.url}/tools", headers={**other, **bearer(unknown_token())}))


def test_an_auth_check_still_reads_its_own_authorization_header(tmp_path_factory, shared_cache, servers):
    """A server-wide [auth] check (the jwt plugin, Authorization: Bearer
    <JWT>) is unchanged by the personal door: a JWT is not a personal token."""
    work = tmp_path_factory.mktemp("jwt-door")
    body = f"""
[auth]
plugin = "jwt"
policy = {{ audience = "hangar" }}

[plugins.jwt]
config = {{ hs256_secret = "{JWT_SECRET}" }}
"""
    s = make_server(work, ("echo", "jwt"), body, 'auth_failures = "1000/m"\n', cache=shared_cache)
    servers.append(s.start())
    jwt = pyjwt.encode({"sub": "jay", "aud": "hangar", "exp": int(time.time()) + 600}, JWT_SECRET, "HS256")
    r = call(s, "echo", {"text": "via jwt"}, bearer(jwt))
    assert r["result"]["content"][0]["text"] == "via jwt", r
    refused = call(s, "echo", {"text": "x"}, {})
    assert "error" in refused, refused
    r = httpx.post(f"{s.url}/tools/echo/call", json={"text": "rest"}, headers=bearer(jwt))
    assert r.status_code == 200, r.text


# ------------------------------------------------------------------ [oauth]

@pytest.fixture(scope="module")
def auth_server():
    from test_oauth import AuthServer
    a = AuthServer(prefix="tokens")
    yield a
    a.stop()


def test_the_oauth_door_takes_personal_tokens(tmp_path_factory, servers, auth_server):
    work = tmp_path_factory.mktemp("oauth-door")
    s = make_server(work, ("echo",), f"""
[oauth]
issuer = "{auth_server.issuer}"
resource = "RESOURCE"
scopes_supported = ["tools:read"]
""" + TOOLS.format(work=work), 'auth_failures = "1000/m"\n')
    resource = f"{s.url}/mcp"
    s.config_path.write_text(s.config_path.read_text().replace("RESOURCE", resource))
    servers.append(s.start())
    jwt = auth_server.token("reader", resource)
    # A JWT passes, and so does a personal token where a JWT would.
    assert call(s, "echo", {"text": "jwt"}, bearer(jwt))["result"]["content"][0]["text"] == "jwt"
    token, id_ = create(s, "olga", "--claim", "org=acme")
    assert rows(s, "whoami", bearer(token)) == [{"sub": "olga", "tok": id_}]
    assert "acme.only" in mcp_tools(s, bearer(token))
    r = httpx.post(f"{s.url}/tools/whoami/call", json={}, headers=bearer(token))
    assert r.status_code == 200 and r.json()["structuredContent"]["rows"][0]["sub"] == "olga", r.text
    assert rows(s, "whoami", {}, path=f"/mcp/t/{token}")[0]["sub"] == "olga"
    # Nothing, or an unknown personal token: refused.
    r = httpx.post(f"{s.url}/mcp", json=initialize_body(), headers=MCP_HEADERS)
    assert r.status_code == 401, r.text
    r = httpx.post(f"{s.url}/mcp", json=initialize_body(), headers={**MCP_HEADERS, **bearer(unknown_token())})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers.get("www-authenticate", ""), \
        (r.status_code, r.headers, r.text)
    cli(s, "revoke", "olga")
    r = httpx.post(f"{s.url}/mcp", json=initialize_body(), headers={**MCP_HEADERS, **bearer(token)})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers.get("www-authenticate", ""), \
        (r.status_code, r.headers, r.text)


# ------------------------------------------------------------------ Redis

def redis_scan(pattern):
    from test_kv import redis_command
    keys, cursor = [], "0"
    while True:
        cursor, batch = redis_command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        keys += batch
        if cursor in ("0", b"0"):
            return keys


def test_tokens_in_a_redis_kv_store(tmp_path_factory, shared_cache, servers):
    from test_kv import redis_command
    prefix = f"hangar-test:{RUN}:tokens"
    work = tmp_path_factory.mktemp("redis-tokens")
    body = f'\n[kv]\nbackend = "redis"\nurl = "{REDIS_URL}"\nprefix = "{prefix}"\n'
    s = make_server(work, ("echo",), body, 'auth_failures = "1000/m"\n', cache=shared_cache)
    servers.append(s.start())
    try:
        token, id_ = create(s, "rhea", "--claim", "org=acme")
        assert [t["subject"] for t in listed(s)] == ["rhea"]
        r = call(s, "echo", {"text": "redis"}, bearer(token))
        assert r["result"]["content"][0]["text"] == "redis", r
        r = call(s, "echo", {"text": "path"}, {}, path=f"/mcp/t/{token}")
        assert r["result"]["content"][0]["text"] == "path", r
        keys = redis_scan(f"{prefix}*")
        assert keys, "no key under the prefix"
        for k in keys:
            assert token[4:].encode() not in k, k
            kind = redis_command("TYPE", k)
            values = ([redis_command("GET", k)] if kind == "string"
                      else redis_command("HGETALL", k) if kind == "hash" else [])
            for v in values:
                assert v is None or token[4:].encode() not in v, k
        out = cli(s, "revoke", "rhea")
        assert out.returncode == 0, out.stderr
        assert_invalid_token(httpx.get(f"{s.url}/tools", headers=bearer(token)))
        assert listed(s) == []
    finally:
        for k in redis_scan(f"{prefix}*"):
            redis_command("DEL", k)


def test_tokens_serve_every_replica_of_a_cluster(tmp_path_factory, shared_cache, servers):
    """With [cluster] (and no [kv]) tokens live in the cluster's Redis: one
    made with either replica's config is taken by both, and a revoke is
    refused by both at once."""
    from test_kv import redis_command
    prefix = f"hangar-test:{RUN}:cluster-tokens"
    body = f"""
[cluster]
redis = "{REDIS_URL}"
prefix = "{prefix}"

[artifacts]
signing_key = "hangar-test-cluster-signing-key"
"""
    replicas = []
    for name in ("replica-a", "replica-b"):
        s = make_server(tmp_path_factory.mktemp(name), ("echo",), body, 'auth_failures = "1000/m"\n',
                        cache=shared_cache)
        servers.append(s.start())
        replicas.append(s)
    a, b = replicas
    try:
        token, id_ = create(a, "cleo")
        assert id_ in [t["id"] for t in listed(b)]
        for s in (a, b):
            r = call(s, "echo", {"text": s.url}, bearer(token))
            assert r["result"]["content"][0]["text"] == s.url, r
        out = cli(b, "revoke", "cleo")
        assert out.returncode == 0 and re.search(r"\b1\b", out.stdout), (out.stdout, out.stderr)
        for s in (a, b):
            assert_invalid_token(httpx.get(f"{s.url}/tools", headers=bearer(token)))
    finally:
        for k in redis_scan(f"{prefix}*"):
            redis_command("DEL", k)
