"""The full pipeline through MCP with the real plugins: auth (api-key, jwt),
mappers (by config and by convention), validation, and one test per row of
the error table showing the stage that stopped the call and that later
stages did not run (a DB writer tool counts the calls that reached it)."""

import os
import shutil
import time

import httpx
import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from conftest import DATABASE_URL, Mcp, Server, plugin_path, psql

SCHEMA = f"hangar_pipe_{os.getpid()}"
API_KEY = "k-" + os.urandom(8).hex()
HS_SECRET = "hs-" + os.urandom(16).hex()
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def bump(name, extra="", statement=None, tag_input=True):
    stmt = statement or f"INSERT INTO {SCHEMA}.hits (tool) VALUES ({{{{ inputs.tag }}}}) RETURNING tool"
    inputs = 'inputs.tag = { type = "string", required = true }\n' if tag_input else ""
    return f"""
[[tools]]
name = "{name}"
description = "Counts the calls that reach it"
use = "main"
read_only = false
statement = "{stmt}"
{inputs}{extra}
"""


# Many refusals from one address on purpose; the auth_failures throttle
# they would meet is tested in test_fail_closed.py.
CONFIG = f"""
auth_failures = "1000/m"

[plugins.api-key]
config = {{ keys = "alice={{{{ env.HANGAR_TEST_API_KEY }}}}, bob=other-key" }}

[plugins.jwt]
config = {{ hs256_secret = "{HS_SECRET}", public_key_pem = '''{pem(RSA_KEY)}''' }}

[plugins.jwt-ec]
config = {{ public_key_pem = '''{pem(EC_KEY)}''' }}

[plugins.bad-error]
config = {{ mode = "error" }}
[plugins.bad-trap]
config = {{ mode = "trap" }}
[plugins.bad-garbage]
config = {{ mode = "garbage" }}

[connectors.main]
kind = "postgres"
url = "{DATABASE_URL}"
pool_size = 4

{bump("bump")}
{bump("bump.auth", 'auth = { plugin = "api-key", policy = { header = "x-api-key" } }')}
{bump("bump.inmap_error", 'mappers = { input = "bad-error" }')}
{bump("bump.inmap_trap", 'mappers = { input = "bad-trap" }')}
{bump("bump.env", statement=f"INSERT INTO {SCHEMA}.hits (tool) VALUES ('{{{{ env.HANGAR_TEST_NOT_SET }}}}') RETURNING tool", tag_input=False)}
{bump("bump.badsql", statement="INSERT INTO hangar_missing_table (tool) VALUES ({{ inputs.tag }})")}
{bump("bump.outmap_error", 'mappers = { output = "bad-error" }')}
{bump("bump.outmap_garbage", 'mappers = { output = "bad-garbage" }')}

[[tools]]
name = "panic"
mappers = {{ output = "bad-error" }}

[[tools]]
name = "whoami"
description = "The caller's subject, bound from the token"
use = "main"
auth = {{ plugin = "jwt", policy = {{ issuer = "https://issuer.test", audience = "hangar" }} }}
statement = "SELECT {{{{ inputs.owner }}}}::text AS owner, {{{{ inputs.note }}}}::text AS note"
inputs.owner = {{ type = "string", from_claim = "sub" }}
inputs.note = {{ type = "string", default = "-" }}

[[tools]]
name = "whoami.ec"
description = "Same, with ES256 tokens"
use = "main"
auth = {{ plugin = "jwt-ec", policy = {{ algorithms = ["ES256"], audience = "hangar" }} }}
statement = "SELECT {{{{ inputs.owner }}}}::text AS owner"
inputs.owner = {{ type = "string", from_claim = "sub" }}

[[tools]]
name = "whoami.noaud"
description = "A jwt policy that names no audience: every token is refused"
use = "main"
auth = {{ plugin = "jwt", policy = {{ issuer = "https://issuer.test" }} }}
statement = "SELECT {{{{ inputs.owner }}}}::text AS owner"
inputs.owner = {{ type = "string", from_claim = "sub" }}

[[tools]]
name = "whoami.anyaud"
description = "A jwt policy that accepts any audience, said out loud"
use = "main"
auth = {{ plugin = "jwt", policy = {{ issuer = "https://issuer.test", audience = "any" }} }}
statement = "SELECT {{{{ inputs.owner }}}}::text AS owner"
inputs.owner = {{ type = "string", from_claim = "sub" }}

[[tools]]
name = "users.list"
description = "Users with their e-mail and a secret"
use = "main"
statement = "SELECT name, email, 'hunter2' AS password FROM {SCHEMA}.users ORDER BY name"
mappers = {{ output = "redact" }}

[[tools]]
name = "users.by_email"
description = "A user by e-mail"
use = "main"
statement = "SELECT name FROM {SCHEMA}.users WHERE email = {{{{ inputs.email }}}}"
inputs.email = {{ type = "string", required = true }}
mappers = {{ input = "normalize" }}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, shared_cache):
    psql(f"""DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA};
             CREATE TABLE {SCHEMA}.hits (tool text NOT NULL);
             CREATE TABLE {SCHEMA}.users (name text, email text);
             INSERT INTO {SCHEMA}.users VALUES ('alice', 'alice@example.com'), ('bob', 'bob@example.org');""")
    workdir = tmp_path_factory.mktemp("pipeline")
    s = Server(workdir, ["echo", "misbehave", "api-key", "jwt", "redact", "normalize"], CONFIG, shared_cache,
               env={"HANGAR_TEST_API_KEY": API_KEY})
    shutil.copy(plugin_path("jwt"), s.plugins_dir / "jwt-ec.wasm")
    for mode in ("error", "trap", "garbage"):
        shutil.copy(plugin_path("bad-mapper"), s.plugins_dir / f"bad-{mode}.wasm")
    (s.plugins_dir / "mappers").mkdir()
    shutil.copy(plugin_path("redact"), s.plugins_dir / "mappers" / "echo.output.wasm")
    s.start()
    yield s
    s.stop()
    psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


@pytest.fixture
def mcp(server):
    c = Mcp(server.url)
    c.initialize()
    return c


def hits(tag):
    return int(psql(f"SELECT count(*) FROM {SCHEMA}.hits WHERE tool = '{tag}'"))


def failed(r, stage):
    assert "error" in r, r
    assert r["error"]["code"] == -32000, r
    assert r["error"]["data"]["stage"] == stage, r
    assert len(r["error"]["data"]["trace_id"]) == 32
    return r["error"]["message"]


def rows(r):
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]["structuredContent"]["rows"]


# --- the error table, one row each -------------------------------------------------

def test_resolution_unknown_tool(mcp):
    r = mcp.call("bump.nope", {"tag": "x"})
    assert r["error"]["code"] == -32601 and r["error"]["data"]["stage"] == "resolve"


def test_auth_refusal_stops_before_everything_else(mcp):
    assert failed(mcp.call("bump.auth", {"tag": "auth"}), "auth") == "Unauthorized"
    assert failed(mcp.call("bump.auth", {"tag": "auth"}, headers={"x-api-key": "wrong"}), "auth") == "Unauthorized"
    assert hits("auth") == 0
    assert rows(mcp.call("bump.auth", {"tag": "auth"}, headers={"x-api-key": API_KEY})) == [{"tool": "auth"}]
    assert hits("auth") == 1


def test_input_mapper_error_and_trap(mcp):
    assert "bad-mapper refused on purpose" in failed(mcp.call("bump.inmap_error", {"tag": "inmap"}), "input_map")
    assert "guest panicked: bad-mapper trapped on purpose" in failed(
        mcp.call("bump.inmap_trap", {"tag": "inmap"}), "input_map")
    assert hits("inmap") == 0


def test_input_validation(mcp):
    msg = failed(mcp.call("bump", {"tag": 5}), "validate")
    assert '/tag: 5 is not of type "string"' in msg
    msg = failed(mcp.call("bump", {}), "validate")
    assert '"tag" is a required property' in msg
    assert hits("5") == 0


def test_env_substitution(mcp):
    assert "HANGAR_TEST_NOT_SET" in failed(mcp.call("bump.env", {}), "env")
    assert int(psql(f"SELECT count(*) FROM {SCHEMA}.hits WHERE tool LIKE '%env%'")) == 0


def test_connector_execution(mcp):
    assert 'relation "hangar_missing_table" does not exist' in failed(
        mcp.call("bump.badsql", {"tag": "badsql"}), "connector")
    assert hits("badsql") == 0


def test_handler_trap_skips_the_output_mapper(mcp):
    # `panic` has a failing output mapper; the handler's error is what comes back.
    msg = failed(mcp.call("panic", {}), "handler")
    assert msg == "handler: guest panicked: misbehave panicked on purpose"


def test_output_mapper_error_after_the_handler_ran(mcp):
    assert "bad-mapper refused on purpose" in failed(mcp.call("bump.outmap_error", {"tag": "outmap"}), "output_map")
    assert hits("outmap") == 1
    assert "answered invalid JSON" in failed(mcp.call("bump.outmap_garbage", {"tag": "garbage"}), "output_map")
    assert hits("garbage") == 1


# --- auth plugins ---------------------------------------------------------------------

def token(key=HS_SECRET, alg="HS256", **claims):
    now = int(time.time())
    body = {"sub": "alice", "iss": "https://issuer.test", "aud": "hangar", "exp": now + 300, "iat": now}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return pyjwt.encode(body, key, algorithm=alg)


def bearer(t):
    return {"authorization": f"Bearer {t}"}


def test_jwt_accepts_good_tokens_and_binds_the_claim_over_the_argument(mcp):
    r = mcp.call("whoami", {"owner": "mallory"}, headers=bearer(token()))
    assert rows(r) == [{"owner": "alice", "note": "-"}]
    rs = token(RSA_KEY, "RS256", sub="rsa-user")
    assert rows(mcp.call("whoami", {}, headers=bearer(rs))) == [{"owner": "rsa-user", "note": "-"}]
    es = token(EC_KEY, "ES256", sub="ec-user")
    assert rows(mcp.call("whoami.ec", {}, headers=bearer(es))) == [{"owner": "ec-user"}]


def refusal_reason(server, r):
    """The reason the auth check gave for refusing the call `r`, from the
    server log line carrying the call's trace id."""
    trace_id = r["error"]["data"]["trace_id"]
    lines = [line for line in server.log_text().splitlines() if trace_id in line and "unauthorized: " in line]
    assert len(lines) == 1, lines
    # `… unauthorized: <reason> plugin=… tool=… trace_id=…`
    return lines[0].split("unauthorized: ", 1)[1].split(" plugin=", 1)[0]


# Each bad token is minted when its case runs, valid in every way but the one
# it breaks, and the case checks which check refused it.
BAD_TOKENS = {
    "no header": (lambda: {}, "no authorization header"),
    "not a JWT": (lambda: bearer("not.a.token"), "malformed token"),
    "expired": (lambda: bearer(token(exp=int(time.time()) - 60)), "ExpiredSignature"),
    "no exp": (lambda: bearer(token(exp=None)), "Missing required claim: exp"),
    "not yet valid": (lambda: bearer(token(nbf=int(time.time()) + 600)), "ImmatureSignature"),
    "wrong issuer": (lambda: bearer(token(iss="https://evil.test")), "InvalidIssuer"),
    "wrong audience": (lambda: bearer(token(aud="someone-else")), "InvalidAudience"),
    "wrong HS256 key": (lambda: bearer(token(key="another-secret-" + "x" * 32)), "InvalidSignature"),
    "RS256 by another key": (lambda: bearer(token(OTHER_RSA, "RS256")), "InvalidSignature"),
    "ES256 without an EC key": (lambda: bearer(token(EC_KEY, "ES256")), "bad EC key"),
    "alg none": (lambda: bearer(pyjwt.encode({"sub": "alice", "exp": int(time.time()) + 60}, None, algorithm="none")),
                 "malformed token"),
    "empty sub": (lambda: bearer(token(sub="")), "the token names no subject (sub)"),
    "no sub": (lambda: bearer(token(sub=None)), "the token names no subject (sub)"),
}


@pytest.mark.parametrize("case", BAD_TOKENS)
def test_jwt_rejects_bad_tokens_without_saying_why(mcp, server, case):
    headers, reason = BAD_TOKENS[case]
    r = mcp.call("whoami", {}, headers=headers())
    assert failed(r, "auth") == "Unauthorized"
    assert reason in refusal_reason(server, r)


def test_jwt_checks_the_audience_unless_the_policy_says_any(mcp, server):
    """A policy without `audience` does not skip the `aud` check: it refuses
    every token, with or without `aud`, and says why in the log. Only
    `audience = "any"` accepts a token for any audience (or none)."""
    for t in (token(aud=None), token(), token(aud="someone-else")):
        r = mcp.call("whoami.noaud", {}, headers=bearer(t))
        assert failed(r, "auth") == "Unauthorized"
        assert "the jwt policy names no audience" in refusal_reason(server, r)
    for t in (token(aud=None, sub="no-aud"), token(aud="someone-else", sub="no-aud")):
        assert rows(mcp.call("whoami.anyaud", {}, headers=bearer(t))) == [{"owner": "no-aud"}]
    # "any" skips only the audience: an empty subject is still refused.
    r = mcp.call("whoami.anyaud", {}, headers=bearer(token(aud=None, sub="")))
    assert "the token names no subject (sub)" in refusal_reason(server, r)


def test_rest_auth_refusal_is_401_with_nothing_more(server):
    r = httpx.post(server.url + "/tools/bump.auth/call", json={"tag": "rest"}, headers={"x-api-key": "nope"})
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
    ok = httpx.post(server.url + "/tools/bump.auth/call", json={"tag": "rest"}, headers={"x-api-key": API_KEY})
    assert ok.status_code == 200
    assert hits("rest") == 1


def test_the_reason_goes_to_the_log_only(mcp, server):
    # With every log level asked for, the caller still gets nothing but
    # "Unauthorized": neither the refusal's reason nor what the plugin logs.
    assert mcp.request("logging/setLevel", {"level": "debug"})["result"] == {}
    r = mcp.call("bump.auth", {"tag": "x"}, headers={"x-api-key": "wrong"})
    assert failed(r, "auth") == "Unauthorized"
    assert r["_events"] == [] and r["_status"] == 200
    assert refusal_reason(server, r) == "unknown api key"
    # api-key logs the refusal with host.log: that line is in the server log only.
    trace_id = r["error"]["data"]["trace_id"]
    assert f"rejected key for bump.auth ({trace_id})" in server.log_text()


# --- mappers --------------------------------------------------------------------------

def test_redact_masks_emails_and_secrets_in_a_db_result(mcp):
    r = mcp.call("users.list", {})
    assert rows(r) == [{"name": "alice", "email": "[redacted]", "password": "[redacted]"},
                       {"name": "bob", "email": "[redacted]", "password": "[redacted]"}]
    assert "example.com" not in r["result"]["content"][0]["text"]


def test_normalize_input_mapper(mcp):
    assert rows(mcp.call("users.by_email", {"email": "  ALICE@Example.COM "})) == [{"name": "alice"}]


def test_mapper_by_convention(mcp):
    r = mcp.call("echo", {"text": "write to bob@example.org please"})
    assert r["result"]["content"][0]["text"] == "write to [redacted] please"


# --- errors as results ------------------------------------------------------------------

def test_errors_as_results(start_server):
    s = start_server(plugins=("echo", "misbehave"), config='errors = "result"\n')
    c = Mcp(s.url)
    r = c.call("panic", {})
    assert r["result"]["isError"] is True
    assert r["result"]["content"][0]["text"] == "handler: guest panicked: misbehave panicked on purpose"
    r = c.call("echo", {"text": 1})
    assert r["result"]["isError"] is True and "validate:" in r["result"]["content"][0]["text"]
    assert c.call("nope", {})["error"]["code"] == -32601
