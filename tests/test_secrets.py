"""Secrets for tools: `[plugins.X] config` values may come from the
environment (`{{ env.VAR }}`) or from a file (`{{ file./path }}`, e.g. a
mounted secret). The tool reads them with `config.get`; they never appear in
the log, `/healthz` or `hangar check` output, and a missing file is a problem
named by its path, not by its content. An empty value is a problem too, and
the auth plugins refuse empty keys and short HS256 secrets."""

import base64
import hashlib
import hmac
import json
import shutil
import time

import httpx

from conftest import Mcp, Server, plugin_path, run_hangar

FILE_SECRET = "file-secret-7f3a9c1e"
ENV_SECRET = "env-secret-b81d44e0"


def config_for(secret_file):
    return f"""
[plugins.http-fetch]
config = {{ token = "{{{{ file.{secret_file} }}}}", api_key = "{{{{ env.HANGAR_TEST_KEY }}}}", plain = "visible" }}
"""


def tool_text(c, key):
    r = c.call("config", {"key": key})
    assert "result" in r, r
    return r["result"]["content"][0]["text"]


def test_a_tool_reads_secrets_from_a_file_and_the_environment_and_nothing_leaks(tmp_path, shared_cache):
    secret_file = tmp_path / "token"
    secret_file.write_text(FILE_SECRET + "\n")
    s = Server(tmp_path / "srv", ["http-fetch"], config_for(secret_file), shared_cache,
               env={"HANGAR_TEST_KEY": ENV_SECRET, "RUST_LOG": "debug"}).start()
    try:
        c = Mcp(s.url)
        c.initialize()
        assert tool_text(c, "token") == FILE_SECRET  # trailing newline dropped
        assert tool_text(c, "api_key") == ENV_SECRET
        assert tool_text(c, "plain") == "visible"
        assert tool_text(c, "missing") == "(unset)"
        health = httpx.get(s.url + "/healthz").text
        tools = httpx.get(s.url + "/tools").text
        log = s.log_text()
        for secret in (FILE_SECRET, ENV_SECRET):
            assert secret not in health and secret not in tools and secret not in log
    finally:
        s.stop()

    plugins = tmp_path / "srv" / "plugins"
    out = run_hangar("check", "--config", str(s.config_path), "--plugins", str(plugins),
                     env={"HANGAR_TEST_KEY": ENV_SECRET})
    assert out.returncode == 0, out.stdout + out.stderr
    assert FILE_SECRET not in out.stdout + out.stderr and ENV_SECRET not in out.stdout + out.stderr


def test_a_missing_secret_file_is_a_problem_named_by_its_path(tmp_path, shared_cache):
    missing = tmp_path / "no-such-secret"
    s = Server(tmp_path / "srv", ["http-fetch"], config_for(missing), shared_cache,
               env={"HANGAR_TEST_KEY": ENV_SECRET}).start()
    try:
        health = httpx.get(s.url + "/healthz").json()
        assert health["status"] == "degraded"
        problem = next(p for p in health["problems"] if p["path"] == "plugins.http-fetch.config.token")
        assert problem["error"] == f"secret file {missing}: entity not found"
        # The key is left unset rather than holding a placeholder.
        c = Mcp(s.url)
        c.initialize()
        assert tool_text(c, "token") == "(unset)"
    finally:
        s.stop()


# --- empty values: never a key or a secret ----------------------------------------------

LONG_SECRET = "hs256-secret-that-is-long-enough-0123456789"


def hs256(claims, key: bytes) -> str:
    """An HS256 JWT signed with any key, the empty one included (PyJWT refuses that)."""
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(claims).encode())
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(signature)


def bearer(key: bytes) -> dict:
    return {"authorization": "Bearer " + hs256({"sub": "mallory", "exp": int(time.time()) + 600}, key)}


EMPTY_ENV_CONFIG = """
[plugins.api-key]
config = { keys = "alice={{ env.HANGAR_TEST_EMPTY_KEY }}" }

[plugins.jwt]
config = { hs256_secret = "{{ env.HANGAR_TEST_EMPTY_SECRET }}" }

[plugins.echo-key]
prefix = "key."

[[tools]]
name = "key.echo"
auth = { plugin = "api-key" }

[[tools]]
name = "echo"
auth = { plugin = "jwt", policy = { audience = "any" } }
"""


def test_an_empty_variable_is_a_problem_and_never_a_key_or_secret(tmp_path, shared_cache):
    env = {"HANGAR_TEST_EMPTY_KEY": "", "HANGAR_TEST_EMPTY_SECRET": ""}
    s = Server(tmp_path / "srv", ["echo", "api-key", "jwt"], EMPTY_ENV_CONFIG, shared_cache, env=env)
    shutil.copy(plugin_path("echo"), s.plugins_dir / "echo-key.wasm")
    s.start()
    try:
        health = httpx.get(s.url + "/healthz").json()
        assert health["status"] == "degraded"
        problems = {p["path"]: p["error"] for p in health["problems"]}
        assert problems["plugins.api-key.config.keys"] == "environment variable HANGAR_TEST_EMPTY_KEY is empty"
        assert problems["plugins.jwt.config.hs256_secret"] == \
            "environment variable HANGAR_TEST_EMPTY_SECRET is empty"
        # An empty key header, and a token signed with the empty secret, get nowhere.
        r = httpx.post(s.url + "/tools/key.echo/call", json={"text": "x"}, headers={"x-api-key": ""})
        assert r.status_code == 401
        r = httpx.post(s.url + "/tools/echo/call", json={"text": "x"}, headers=bearer(b""))
        assert r.status_code == 401
    finally:
        s.stop()

    out = run_hangar("check", "--config", str(s.config_path), "--plugins", str(s.plugins_dir), env=env)
    assert out.returncode != 0
    assert "HANGAR_TEST_EMPTY_KEY is empty" in out.stdout + out.stderr
    assert "HANGAR_TEST_EMPTY_SECRET is empty" in out.stdout + out.stderr


PLUGIN_CONFIG = f"""
[plugins.api-key]
config = {{ keys = "alice=, bob=bob-key-0123456789abcdef" }}

[plugins.jwt]
config = {{ hs256_secret = "short-secret" }}

[plugins.jwt-long]
config = {{ hs256_secret = "{LONG_SECRET}" }}

[plugins.echo-key]
prefix = "key."

[plugins.echo-long]
prefix = "long."

[[tools]]
name = "key.echo"
auth = {{ plugin = "api-key" }}

[[tools]]
name = "echo"
auth = {{ plugin = "jwt", policy = {{ audience = "any" }} }}

[[tools]]
name = "long.echo"
auth = {{ plugin = "jwt-long", policy = {{ audience = "any" }} }}
"""


def test_auth_plugins_refuse_empty_keys_and_short_hs256_secrets(tmp_path, shared_cache):
    s = Server(tmp_path, ["echo", "api-key", "jwt"], PLUGIN_CONFIG, shared_cache)
    for copy, of in (("echo-key", "echo"), ("echo-long", "echo"), ("jwt-long", "jwt")):
        shutil.copy(plugin_path(of), s.plugins_dir / f"{copy}.wasm")
    s.start()
    try:
        def call(tool, headers):
            return httpx.post(f"{s.url}/tools/{tool}/call", json={"text": "x"}, headers=headers).status_code

        # api-key: alice's key is empty in the config; an empty header matches nothing.
        assert call("key.echo", {"x-api-key": ""}) == 401
        assert call("key.echo", {"x-api-key": "bob-key-0123456789abcdef"}) == 200
        # jwt: a 12-byte secret is refused, so a token signed with it is too;
        # the same token shape signed with a long secret passes.
        assert call("echo", bearer(b"short-secret")) == 401
        assert "hs256_secret is 12 bytes; at least 32 are needed" in s.log_text()
        assert call("long.echo", bearer(LONG_SECRET.encode())) == 200
    finally:
        s.stop()
