"""`hangar new` writes a buildable project in each language: one of each is
scaffolded, built with its own build.sh, loaded and called over MCP; the
`--http` tools (Rust, Python and JavaScript) call a local JSON API under a
grant, and the Python one is refused without it."""

import os
import shutil
import subprocess

import json

import httpx
import pytest

from conftest import HANGAR_BIN, ROOT, Mcp, Server, run_hangar
from test_http_examples import ITEMS, JsonApi

BUILD_ENV = {
    **os.environ,
    "CARGO_TARGET_DIR": str(ROOT / "target" / "scaffold"),
    "COMPONENTIZE_PY": str(ROOT / "target" / "py-tools" / "bin" / "componentize-py"),
    "COMPONENTIZE_JS_CLI": str(ROOT / "plugins" / "js-reverse" / "node_modules" / "@bytecodealliance"
                               / "componentize-js" / "src" / "cli.js"),
}


def scaffold(tmp_path, kind, name, lang, *flags):
    out = run_hangar("new", kind, name, "--lang", lang, *flags, "--dir", str(tmp_path / name))
    assert out.returncode == 0, out.stderr
    assert f"build it with: {tmp_path / name}/build.sh" in out.stdout
    built = subprocess.run([str(tmp_path / name / "build.sh")], capture_output=True, text=True,
                           env=BUILD_ENV, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    wasm = tmp_path / name / f"{name}.wasm"
    assert wasm.exists()
    return wasm


def test_scaffolded_plugins_in_three_languages_build_and_run(tmp_path, shared_cache):
    rust_tool = scaffold(tmp_path, "tool", "scaf-rust", "rust")
    py_mapper = scaffold(tmp_path, "mapper", "scaf-py", "python")
    js_auth = scaffold(tmp_path, "auth", "scaf-js", "js")
    config = """
[plugins.scaf-js]
config = { token = "let-me-in" }
[[tools]]
name = "scaf-rust"
auth = { plugin = "scaf-js" }
mappers = { output = "scaf-py" }
"""
    s = Server(tmp_path / "srv", [], config, shared_cache)
    for wasm in (rust_tool, py_mapper, js_auth):
        shutil.copy(wasm, s.plugins_dir / wasm.name)
    s.start()
    try:
        c = Mcp(s.url)
        assert [t["name"] for t in c.request("tools/list")["result"]["tools"]] == ["scaf-rust"]
        denied = c.call("scaf-rust", {"text": "hi"})
        assert denied["error"]["message"] == "Unauthorized"
        ok = c.call("scaf-rust", {"text": "hi"}, headers={"x-token": "let-me-in"})
        assert ok["result"]["content"] == [{"type": "text", "text": "scaf-rust: hi"}]
        err = c.call("scaf-rust", {"text": ""}, headers={"x-token": "let-me-in"})
        assert err["result"]["isError"] is True
        assert "scaf-py mapped a payload" in s.log_text()
    finally:
        s.stop()


def test_new_refuses_a_non_empty_folder_and_bad_names(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    out = run_hangar("new", "tool", "taken", "--dir", str(tmp_path / "taken"))
    assert out.returncode != 0 and "not empty" in out.stderr
    out = run_hangar("new", "tool", "Bad Name", "--dir", str(tmp_path / "bad"))
    assert out.returncode != 0
    assert HANGAR_BIN.exists()


@pytest.fixture
def api():
    a = JsonApi()
    yield a
    a.httpd.shutdown()
    a.httpd.server_close()


HTTP_TOOLS = ("scaf-rust-http", "scaf-py-http", "scaf-js-http")


def test_http_scaffolds_in_three_languages_call_a_granted_json_api(tmp_path, shared_cache, api):
    rust_tool = scaffold(tmp_path, "tool", "scaf-rust-http", "rust", "--http")
    py_tool = scaffold(tmp_path, "tool", "scaf-py-http", "python", "--http")
    js_tool = scaffold(tmp_path, "tool", "scaf-js-http", "js", "--http")
    assert "-d http" not in (tmp_path / "scaf-js-http" / "build.sh").read_text()
    assert "-w tool-http" in (tmp_path / "scaf-py-http" / "build.sh").read_text()
    config = "".join(f"""
[plugins.{name}]
config = {{ base_url = "{api.base}" }}
grants = {{ http = ["127.0.0.1:{api.port}"] }}
""" for name in HTTP_TOOLS)
    s = Server(tmp_path / "srv", [], config, shared_cache)
    for wasm in (rust_tool, py_tool, js_tool):
        shutil.copy(wasm, s.plugins_dir / wasm.name)
    s.start()
    try:
        c = Mcp(s.url)
        c.http.timeout = httpx.Timeout(30)
        names = sorted(t["name"] for t in c.request("tools/list")["result"]["tools"])
        assert names == sorted(HTTP_TOOLS)
        for name in names:
            r = c.call(name, {"path": "/items/1"})
            assert r["result"]["isError"] is False, r
            assert json.loads(r["result"]["content"][0]["text"]) == ITEMS["1"]
            assert r["result"]["structuredContent"] == ITEMS["1"]
            err = c.call(name, {"path": "/broken"})
            assert err["result"]["isError"] is True, err
            assert "the API answered 500" in err["result"]["content"][0]["text"], err
        assert len(api.seen("/items/1")) == 3
        assert "scaf-py-http fetched /items/1: 200" in s.log_text()
    finally:
        s.stop()
    # Without the grant, the Python tool's request is refused by the host.
    config = f'\n[plugins.scaf-py-http]\nconfig = {{ base_url = "{api.base}" }}\n'
    s = Server(tmp_path / "srv-ungranted", [], config, shared_cache)
    shutil.copy(py_tool, s.plugins_dir / py_tool.name)
    s.start()
    try:
        before = len(api.requests)
        r = Mcp(s.url).call("scaf-py-http", {"path": "/items/1"})
        assert r["result"]["isError"] is True, r
        assert r["result"]["content"][0]["text"] == "request failed: HttpRequestDenied", r
        assert f"http: 127.0.0.1:{api.port} not granted to plugin scaf-py-http" in s.log_text()
        assert len(api.requests) == before
    finally:
        s.stop()
