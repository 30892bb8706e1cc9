"""Secrets for tools: `[plugins.X] config` values may come from the
environment (`{{ env.VAR }}`) or from a file (`{{ file./path }}`, e.g. a
mounted secret). The tool reads them with `config.get`; they never appear in
the log, `/healthz` or `hangar check` output, and a missing file is a problem
named by its path, not by its content."""

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
