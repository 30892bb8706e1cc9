"""`hangar new` writes a buildable project in each language: one of each is
scaffolded, built with its own build.sh, loaded and called over MCP."""

import os
import shutil
import subprocess

from conftest import HANGAR_BIN, ROOT, Mcp, Server, run_hangar

BUILD_ENV = {
    **os.environ,
    "CARGO_TARGET_DIR": str(ROOT / "target" / "scaffold"),
    "COMPONENTIZE_PY": str(ROOT / "target" / "py-tools" / "bin" / "componentize-py"),
    "COMPONENTIZE_JS_CLI": str(ROOT / "plugins" / "js-reverse" / "node_modules" / "@bytecodealliance"
                               / "componentize-js" / "src" / "cli.js"),
}


def scaffold(tmp_path, kind, name, lang):
    out = run_hangar("new", kind, name, "--lang", lang, "--dir", str(tmp_path / name))
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
