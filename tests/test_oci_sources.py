"""Plugins from an OCI registry (issue #42: sources, pins, the cache, `hangar push` / `pull`).

A real registry: Debian's `docker-registry` (the CNCF distribution server) on a
free port, with its storage in the test's folder; `hangar push` publishes the
components as the Wasm OCI artifact.
"""

import hashlib
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import httpx
import pytest

from conftest import HANGAR_BIN, Mcp, Server, free_port, plugin_path, wait_for

REGISTRY_BIN = shutil.which("docker-registry") or "/usr/bin/docker-registry"


class Registry:
    def __init__(self, workdir: Path, htpasswd: Path | None = None):
        workdir.mkdir(parents=True, exist_ok=True)
        self.storage = workdir / "storage"
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        auth = ""
        if htpasswd:
            auth = f"auth:\n  htpasswd:\n    realm: hangar-tests\n    path: {htpasswd}\n"
        self.config = workdir / "config.yml"
        self.config.write_text(
            "version: 0.1\nlog:\n  level: warn\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.storage}\n"
            "  cache:\n    blobdescriptor: inmemory\n"
            f"http:\n  addr: {self.host}\n" + auth)
        self.log_path = workdir / "registry.log"
        self.proc = None

    def start(self):
        if not Path(REGISTRY_BIN).exists():
            pytest.fail("docker-registry is not installed (scripts/test installs Debian's docker-registry)")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([REGISTRY_BIN, "serve", str(self.config)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_path.read_text()
            try:
                httpx.get(f"http://{self.host}/v2/", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("the registry did not start:\n" + self.log_path.read_text())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
            self.log.close()

    def blob_file(self, digest: str) -> Path:
        hex_ = digest.split(":", 1)[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hex_[:2] / hex_ / "data"


@pytest.fixture
def registry(tmp_path):
    r = Registry(tmp_path / "registry").start()
    yield r
    r.stop()


def hangar(*args, env=None):
    return subprocess.run([str(HANGAR_BIN), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def registries(registry) -> str:
    return f'[registries]\ninsecure = ["{registry.host}"]\n'


def push(tmp_path, registry, name: str, ref: str, extra: str = "") -> str:
    """`hangar push`es plugin `name` to `oci://<registry>/<ref>`; returns the manifest digest."""
    cfg = tmp_path / "push.toml"
    cfg.write_text(registries(registry) + extra)
    out = hangar("push", plugin_path(name), f"oci://{registry.host}/{ref}", "--config", cfg)
    assert out.returncode == 0, out.stderr
    digest = out.stdout.strip().splitlines()[-1]
    assert digest.startswith("sha256:") and len(digest) == 71, out.stdout
    return digest


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def source(name: str, ref: str, digest: str | None = None) -> str:
    text = f'[plugins.{name}]\nsource = "{ref}"\n'
    if digest:
        text += f'digest = "{digest}"\n'
    return text


def tools(server) -> list[str]:
    c = Mcp(server.url)
    c.initialize()
    r = c.request("tools/list")
    return sorted(t["name"] for t in r["result"]["tools"])


def call_echo(server, text="from the registry"):
    c = Mcp(server.url)
    c.initialize()
    r = c.call("echo", {"text": text})
    assert "result" in r and not r["result"].get("isError"), r
    assert text in json.dumps(r["result"]), r


def problems(server) -> list[dict]:
    return httpx.get(server.url + "/healthz", timeout=10).json()["problems"]


@pytest.fixture
def servers():
    started = []

    def start(*args, **kw):
        s = Server(*args, **kw)
        started.append(s)
        return s.start()

    yield start
    for s in started:
        s.stop()


def test_push_then_serve_by_tag_and_by_pinned_digest(tmp_path, registry, servers):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    ref = f"oci://{registry.host}/tools/echo"
    config = registries(registry) + source("remote", f"{ref}:1.0") \
        + source("pinned", f"{ref}:1.0", digest)
    # Both plugins are echo: give the second's tool another name.
    config += 'tools = [{ export = "echo", name = "echo_pinned" }]\n'
    s = servers(tmp_path / "srv", ["wordcount"], config=config)
    assert tools(s) == ["echo", "echo_pinned", "wordcount"]
    call_echo(s)
    assert problems(s) == []
    # By digest, in the reference itself.
    s2 = servers(tmp_path / "srv2", [], config=registries(registry)
                 + source("bydigest", f"{ref}@{digest}"))
    assert tools(s2) == ["echo"]
    call_echo(s2)
    assert problems(s2) == []
    # Stored content-addressed: the layer under its own digest.
    layer = sha256(plugin_path("echo"))
    stored = tmp_path / "srv2/cache/oci/sha256" / layer.split(":")[1]
    assert stored.read_bytes() == plugin_path("echo").read_bytes()
    # `hangar check` shows the source, the digest and where the bytes came from.
    out = hangar("check", "--config", s2.config_path, "--plugins", s2.plugins_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"source {ref}@{digest}" in out.stdout
    assert f"digest {digest}" in out.stdout
    assert "from   registry" in out.stdout


def test_a_pin_that_does_not_match_is_refused_and_the_rest_serves(tmp_path, registry, servers):
    push(tmp_path, registry, "echo", "tools/echo:1.0")
    wrong = "sha256:" + "0" * 64
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + source("remote", ref, wrong))
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert p["path"] == ref
    assert '"remote"' in p["error"] and ref in p["error"]
    assert f"does not match the pinned {wrong}" in p["error"]


def test_offline_restart_with_a_pin_serves_from_the_cache(tmp_path, registry, servers):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    cache = tmp_path / "cache"
    config = registries(registry) + source("remote", ref, digest)
    s = servers(tmp_path / "srv", ["wordcount"], config=config, cache_dir=cache)
    assert tools(s) == ["echo", "wordcount"]
    s.stop()
    registry.stop()
    s = servers(tmp_path / "srv2", ["wordcount"], config=config, cache_dir=cache)
    assert tools(s) == ["echo", "wordcount"]
    call_echo(s)
    [p] = problems(s)
    assert p["path"] == ref
    assert "registry unreachable, serving the cached " + digest in p["error"]
    assert "WARN" in s.log_text() and "serving the cached component" in s.log_text()
    assert httpx.get(s.url + "/healthz").json()["status"] == "degraded"
    out = hangar("check", "--config", s.config_path, "--plugins", s.plugins_dir)
    assert "from   cache" in out.stdout
    assert "registry unreachable" in out.stdout


def test_offline_with_an_unpinned_tag_never_pulled_is_refused(tmp_path, registry, servers):
    push(tmp_path, registry, "echo", "tools/echo:1.0")
    registry.stop()
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"], config=registries(registry) + source("remote", ref))
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert p["path"] == ref and '"remote"' in p["error"]
    assert "registry unreachable and this tag was never pulled" in p["error"]


def test_a_tampered_blob_in_the_registry_is_refused(tmp_path, registry, servers):
    push(tmp_path, registry, "echo", "tools/echo:1.0")
    blob = registry.blob_file(sha256(plugin_path("echo")))
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF
    blob.write_bytes(bytes(data))
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"], config=registries(registry) + source("remote", ref))
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert p["path"] == ref and '"remote"' in p["error"]
    assert "digest" in p["error"].lower(), p
    # Nothing of it is stored.
    assert not (tmp_path / "srv/cache/oci/sha256" / sha256(plugin_path("echo")).split(":")[1]).exists()


def put_artifact(registry, repo, tag, layer: bytes, layer_type: str, config_type: str) -> str:
    """Pushes a one-layer image manifest over the distribution API; returns its digest."""
    base = f"http://{registry.host}/v2/{repo}"

    def blob(data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        r = httpx.post(f"{base}/blobs/uploads/")
        assert r.status_code == 202, r.text
        loc = r.headers["location"]
        loc = loc if loc.startswith("http") else f"http://{registry.host}{loc}"
        loc += ("&" if "?" in loc else "?") + "digest=" + digest
        r = httpx.put(loc, content=data,
                      headers={"content-type": "application/octet-stream"})
        assert r.status_code == 201, r.text
        return {"digest": digest, "size": len(data)}

    config = blob(b'{"architecture":"wasm","os":"wasip2"}')
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": config_type, **config},
        "layers": [{"mediaType": layer_type, **blob(layer)}],
    }).encode()
    r = httpx.put(f"{base}/manifests/{tag}", content=manifest,
                  headers={"content-type": "application/vnd.oci.image.manifest.v1+json"})
    assert r.status_code == 201, r.text
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


def test_a_manifest_not_of_the_wasm_artifact_shape_is_refused(tmp_path, registry, servers):
    wasm = plugin_path("echo").read_bytes()
    put_artifact(registry, "tools/odd", "layer", wasm, "application/octet-stream",
                 "application/vnd.wasm.config.v0+json")
    put_artifact(registry, "tools/odd", "config", wasm, "application/wasm",
                 "application/vnd.oci.image.config.v1+json")
    good = put_artifact(registry, "tools/odd", "good", wasm, "application/wasm",
                        "application/vnd.wasm.config.v0+json")
    base = f"oci://{registry.host}/tools/odd"
    s = servers(tmp_path / "srv", ["wordcount"], config=registries(registry)
                + source("badlayer", f"{base}:layer") + source("badconfig", f"{base}:config")
                + source("remote", f"{base}:good", good))
    assert tools(s) == ["echo", "wordcount"]
    errors = {p["path"]: p["error"] for p in problems(s)}
    assert len(errors) == 2, errors
    assert 'layer media type "application/octet-stream", expected "application/wasm"' \
        in errors[f"{base}:layer"]
    assert '"badlayer"' in errors[f"{base}:layer"]
    assert 'config media type "application/vnd.oci.image.config.v1+json"' in errors[f"{base}:config"]


def test_hangar_pull_fills_the_cache(tmp_path, registry, servers):
    digest = push(tmp_path, registry, "echo", "tools/echo:2.0")
    ref = f"oci://{registry.host}/tools/echo:2.0"
    cache = tmp_path / "cache"
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{cache}"\n' + registries(registry) + source("remote", ref))
    out = hangar("pull", "--config", cfg)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"remote {ref} {digest} (from registry)" in out.stdout
    layer = cache / "oci/sha256" / sha256(plugin_path("echo")).split(":")[1]
    assert layer.read_bytes() == plugin_path("echo").read_bytes()
    assert (cache / "oci/sha256" / digest.split(":")[1]).exists()
    # With the registry gone, the tag pulled before serves from the cache.
    registry.stop()
    s = servers(tmp_path / "srv", [], config=registries(registry) + source("remote", ref),
                cache_dir=cache)
    assert tools(s) == ["echo"]
    [p] = problems(s)
    assert "serving the cached " + digest in p["error"]
    out = hangar("pull", "--config", cfg)
    assert out.returncode == 1
    assert "registry unreachable" in out.stdout


def test_a_plain_http_registry_not_listed_as_insecure_is_refused(tmp_path, registry, servers):
    push(tmp_path, registry, "echo", "tools/echo:1.0")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"], config=source("remote", ref))
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert p["path"] == ref and '"remote"' in p["error"]
    assert f"cannot reach {registry.host} over HTTPS" in p["error"]
    assert "must be listed in [registries] insecure" in p["error"]
    # `hangar push` says the same.
    cfg = tmp_path / "none.toml"
    cfg.write_text("")
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg)
    assert out.returncode == 1
    assert "[registries] insecure" in out.stderr


def test_hot_reload_takes_a_new_source_and_pin(tmp_path, registry, servers):
    first = push(tmp_path, registry, "echo", "tools/x:1")
    second = push(tmp_path, registry, "wordcount", "tools/x:2")
    base = f"oci://{registry.host}/tools/x"
    s = servers(tmp_path / "srv", [], config=registries(registry) + source("remote", f"{base}:1", first))
    assert tools(s) == ["echo"]
    s.config_path.write_text(s.config_path.read_text().replace(f"{base}:1", f"{base}:2")
                             .replace(first, second))
    wait_for(lambda: tools(s) == ["wordcount"], 30, "the reload to take the new pin")
    assert problems(s) == []
    # A pin that does not match on reload: the reload fails, the catalog in service stays.
    s.config_path.write_text(s.config_path.read_text().replace(second, first))
    health = lambda: httpx.get(s.url + "/healthz").json()  # noqa: E731
    wait_for(lambda: health()["reload"]["failed"] >= 1, 30, "the reload to fail")
    last = health()["reload"]["last"]
    assert last["outcome"] == "failed"
    assert f"does not match the pinned {first}" in last["error"]
    assert tools(s) == ["wordcount"]


def test_registry_credentials_from_the_environment(tmp_path, servers):
    import bcrypt

    htpasswd = tmp_path / "htpasswd"
    hashed = bcrypt.hashpw(b"s3cret-pass", bcrypt.gensalt(rounds=5)).decode()
    htpasswd.write_text(f"hangar:{hashed}\n")
    registry = Registry(tmp_path / "registry", htpasswd=htpasswd).start()
    try:
        auth = (f'[registries.auth."{registry.host}"]\n'
                'username = "hangar"\npassword = "{{ env.REGISTRY_PASSWORD }}"\n')
        env = {**__import__("os").environ, "REGISTRY_PASSWORD": "s3cret-pass"}
        cfg = tmp_path / "push.toml"
        cfg.write_text(registries(registry) + auth)
        ref = f"oci://{registry.host}/tools/echo:1.0"
        out = hangar("push", plugin_path("echo"), ref, "--config", cfg, env=env)
        assert out.returncode == 0, out.stderr
        digest = out.stdout.strip()
        # With the credentials it serves; without them the registry says no.
        s = servers(tmp_path / "srv", ["wordcount"],
                    config=registries(registry) + auth + source("remote", ref, digest),
                    env={"REGISTRY_PASSWORD": "s3cret-pass"})
        assert tools(s) == ["echo", "wordcount"]
        assert problems(s) == []
        anon = servers(tmp_path / "anon", ["wordcount"],
                       config=registries(registry) + source("remote", ref, digest))
        assert tools(anon) == ["wordcount"]
        [p] = problems(anon)
        assert p["path"] == ref and '"remote"' in p["error"]
        assert "Not authorized" in p["error"], p
        # A variable that is not set is a problem naming it, not an empty password.
        unset = servers(tmp_path / "unset", ["wordcount"],
                        config=registries(registry) + auth + source("remote", ref, digest))
        assert tools(unset) == ["wordcount"]
        [p] = problems(unset)
        assert "REGISTRY_PASSWORD" in p["error"] and '"remote"' in p["error"], p
    finally:
        registry.stop()


def test_a_registry_outage_blocks_no_reload_of_a_cached_pin(tmp_path, registry, servers):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", [], config=registries(registry) + source("remote", ref, digest))
    assert tools(s) == ["echo"]
    registry.stop()
    shutil.copy(plugin_path("wordcount"), s.plugins_dir / "wordcount.wasm")
    wait_for(lambda: tools(s) == ["echo", "wordcount"], 30, "the reload to take the new file")
    assert httpx.get(s.url + "/healthz").json()["reload"]["failed"] == 0
    assert problems(s) == []
    call_echo(s)
