"""`hangar new` writes a buildable project in each language: one of each is
scaffolded, built with its own build.sh, loaded and called over MCP; the
`--http` tools (Rust, Python and JavaScript) call a local JSON API under a
grant, and the Python one is refused without it.

A Rust project depends on `hangar-sdk` by version. Here it builds against
the crate `cargo package -p hangar-sdk` makes (verified: it builds on its
own), unpacked into a temp folder and put in place of crates.io's with
`hangar new --sdk DIR` (a `[patch.crates-io]` table): never against the
repository's `sdk/`; `cargo metadata` confirms which crate was used."""

import os
import shutil
import subprocess
import tarfile
import tomllib

import json

import httpx
import pytest

from conftest import HANGAR_BIN, ROOT, Mcp, Server, run_hangar
from test_oci_sources import registries, registry  # noqa: F401 (a fixture)
from test_http_examples import ITEMS, JsonApi

BUILD_ENV = {
    **os.environ,
    "CARGO_TARGET_DIR": str(ROOT / "target" / "scaffold"),
    "COMPONENTIZE_PY": str(ROOT / "target" / "py-tools" / "bin" / "componentize-py"),
    # The one scripts/lib.sh installs for every JavaScript build.
    "COMPONENTIZE_JS_CLI": str(ROOT / "target" / "js-tools" / "node_modules" / "@bytecodealliance"
                               / "componentize-js" / "src" / "cli.js"),
}


SDK_VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]


@pytest.fixture(scope="module")
def packaged_sdk(tmp_path_factory):
    """`cargo package -p hangar-sdk` with its verification build (every
    feature, for the host target) in a target dir of its own; the .crate
    unpacked into a temp folder. Answers (unpacked folder, cargo's stderr)."""
    target = ROOT / "target" / "sdk-package"
    out = subprocess.run(
        ["cargo", "package", "-p", "hangar-sdk", "--allow-dirty", "--all-features",
         "--target-dir", str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    crate = target / "package" / f"hangar-sdk-{SDK_VERSION}.crate"
    into = tmp_path_factory.mktemp("packaged-sdk")
    with tarfile.open(crate) as t:
        t.extractall(into, filter="data")
    return into / f"hangar-sdk-{SDK_VERSION}", out.stderr


def files_under(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_the_sdk_package_carries_the_wit_and_builds_on_its_own(packaged_sdk):
    sdk, log = packaged_sdk
    # Verification on: cargo built the unpacked crate, away from the repository.
    assert f"Verifying hangar-sdk v{SDK_VERSION}" in log, log
    # The WIT package (and the WASI packages in deps/) as in the repository's wit/.
    shipped = files_under(sdk / "wit")
    assert shipped == files_under(ROOT / "wit")
    assert {str(p) for p in shipped} >= {"worlds.wit", "types.wit", "deps/http.wit"}
    lib = (sdk / "src" / "lib.rs").read_text()
    assert 'path: "wit"' in lib and "../wit" not in lib
    manifest = tomllib.loads((sdk / "Cargo.toml").read_text())
    assert manifest["package"]["version"] == SDK_VERSION
    assert all("path" not in (d if isinstance(d, dict) else {})
               for d in manifest["dependencies"].values())


def scaffold(tmp_path, kind, name, lang, *flags, sdk=None):
    """Writes, builds and answers the component of a `hangar new` project;
    a Rust one against the packaged SDK `sdk` (`hangar new --sdk`)."""
    project = tmp_path / name
    local = ("--sdk", str(sdk)) if lang == "rust" else ()
    out = run_hangar("new", kind, name, "--lang", lang, *flags, *local, "--dir", str(project))
    assert out.returncode == 0, out.stderr
    assert f"build it with: {project}/build.sh" in out.stdout
    assert (project / "README.md").exists()
    if lang == "rust":
        # One way to write a Rust plugin: the SDK by version, no WIT copy.
        assert not (project / "wit").exists()
        manifest = (project / "Cargo.toml").read_text()
        assert "wit-bindgen" not in manifest
        manifest = tomllib.loads(manifest)
        dep = manifest["dependencies"]["hangar-sdk"]
        assert (dep if isinstance(dep, str) else dep["version"]) == SDK_VERSION
        assert manifest["patch"]["crates-io"]["hangar-sdk"] == {"path": str(sdk.resolve())}
    else:
        assert (project / "wit" / "worlds.wit").read_bytes() == (ROOT / "wit" / "worlds.wit").read_bytes()
    built = subprocess.run([str(tmp_path / name / "build.sh")], capture_output=True, text=True,
                           env=BUILD_ENV, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    wasm = tmp_path / name / f"{name}.wasm"
    assert wasm.exists()
    if lang == "rust":
        meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--manifest-path",
                               str(project / "Cargo.toml")], capture_output=True, text=True,
                              env=BUILD_ENV, timeout=300)
        assert meta.returncode == 0, meta.stderr
        used = [p["manifest_path"] for p in json.loads(meta.stdout)["packages"]
                if p["name"] == "hangar-sdk"]
        assert used == [str(sdk.resolve() / "Cargo.toml")], used
    return wasm


def test_scaffolded_plugins_in_three_languages_build_and_run(tmp_path, shared_cache, packaged_sdk,
                                                            registry):
    """The author's whole path for the Rust tool: scaffolded against the
    packaged SDK, built, `hangar push`ed to a real registry, pulled by its
    digest pin and called over MCP."""
    rust_tool = scaffold(tmp_path, "tool", "scaf-rust", "rust", sdk=packaged_sdk[0])
    py_mapper = scaffold(tmp_path, "mapper", "scaf-py", "python")
    js_auth = scaffold(tmp_path, "auth", "scaf-js", "js")
    push_cfg = tmp_path / "push.toml"
    push_cfg.write_text(registries(registry))
    ref = f"oci://{registry.host}/authors/scaf-rust:0.1.0"
    pushed = run_hangar("push", str(rust_tool), ref, "--config", str(push_cfg))
    assert pushed.returncode == 0, pushed.stderr
    digest = pushed.stdout.strip().splitlines()[-1]
    assert digest.startswith("sha256:"), pushed.stdout
    config = registries(registry) + f"""
[plugins.scaf-rust]
source = "{ref}"
digest = "{digest}"
[plugins.scaf-js]
config = {{ token = "let-me-in" }}
[[tools]]
name = "scaf-rust"
auth = {{ plugin = "scaf-js" }}
mappers = {{ output = "scaf-py" }}
"""
    s = Server(tmp_path / "srv", [], config, shared_cache)
    for wasm in (py_mapper, js_auth):
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


def test_rust_auth_and_mapper_scaffolds_use_the_packaged_sdk(tmp_path, shared_cache, packaged_sdk):
    sdk = packaged_sdk[0]
    tool = scaffold(tmp_path, "tool", "rs-tool", "rust", sdk=sdk)
    auth = scaffold(tmp_path, "auth", "rs-auth", "rust", sdk=sdk)
    mapper = scaffold(tmp_path, "mapper", "rs-mapper", "rust", sdk=sdk)
    assert 'features = ["auth"]' in (tmp_path / "rs-auth" / "Cargo.toml").read_text()
    assert "hangar_sdk::export_mapper!" in (tmp_path / "rs-mapper" / "src" / "lib.rs").read_text()
    config = """
[plugins.rs-auth]
config = { token = "let-me-in" }
[[tools]]
name = "rs-tool"
auth = { plugin = "rs-auth" }
mappers = { input = "rs-mapper" }
"""
    s = Server(tmp_path / "srv", [], config, shared_cache)
    for wasm in (tool, auth, mapper):
        shutil.copy(wasm, s.plugins_dir / wasm.name)
    s.start()
    try:
        c = Mcp(s.url)
        assert [t["name"] for t in c.request("tools/list")["result"]["tools"]] == ["rs-tool"]
        assert c.call("rs-tool", {"text": "hi"})["error"]["message"] == "Unauthorized"
        wrong = c.call("rs-tool", {"text": "hi"}, headers={"x-token": "nope"})
        assert wrong["error"]["message"] == "Unauthorized"
        ok = c.call("rs-tool", {"text": "hi"}, headers={"x-token": "let-me-in"})
        assert ok["result"]["content"] == [{"type": "text", "text": "rs-tool: hi"}], ok
        # A ToolError from the SDK is a result with isError, its message the text.
        bad = c.call("rs-tool", {"text": ""}, headers={"x-token": "let-me-in"})
        assert bad["result"]["isError"] is True, bad
        assert bad["result"]["content"][0]["text"] == "text must not be empty", bad
        assert "rs-mapper mapped a payload" in s.log_text()
        assert "missing or wrong x-token" in s.log_text()
    finally:
        s.stop()


def test_new_refuses_a_non_empty_folder_and_bad_names(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    out = run_hangar("new", "tool", "taken", "--dir", str(tmp_path / "taken"))
    assert out.returncode != 0 and "not empty" in out.stderr
    out = run_hangar("new", "tool", "Bad Name", "--dir", str(tmp_path / "bad"))
    assert out.returncode != 0
    out = run_hangar("new", "tool", "x", "--sdk", str(ROOT / "host"), "--dir", str(tmp_path / "x"))
    assert out.returncode != 0
    assert "is not the manifest of the hangar-sdk crate" in out.stderr, out.stderr
    assert not (tmp_path / "x").exists()
    out = run_hangar("new", "tool", "y", "--lang", "python", "--sdk", str(ROOT / "sdk"),
                     "--dir", str(tmp_path / "y"))
    assert out.returncode != 0 and "--sdk is for Rust projects" in out.stderr
    assert HANGAR_BIN.exists()


@pytest.fixture
def api():
    a = JsonApi()
    yield a
    a.httpd.shutdown()
    a.httpd.server_close()


HTTP_TOOLS = ("scaf-rust-http", "scaf-py-http", "scaf-js-http")


def test_http_scaffolds_in_three_languages_call_a_granted_json_api(tmp_path, shared_cache, api,
                                                                  packaged_sdk):
    rust_tool = scaffold(tmp_path, "tool", "scaf-rust-http", "rust", "--http", sdk=packaged_sdk[0])
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
