"""Hangar and `wkg` (the Bytecode Alliance's wasm-pkg tool) read each other's artifacts (issue #42, item 3).

A component `hangar push`ed is read back by `wkg oci pull` byte for byte; one
`wkg oci push`ed is pulled from `[plugins.X] source` and called over MCP. Both
against a real registry (Debian's `docker-registry`, as in test_oci_sources.py).

`wkg` 0.16.1 is installed by scripts/test into the test tool directory
(`$HANGAR_TOOLS`, default `~/.cache/hangar-tools`). Without it these tests fail,
saying so: they are never skipped quietly.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import plugin_path
from test_oci_sources import (  # noqa: F401 (fixtures)
    hangar, problems, push, registries, registry, servers, source, tools, call_echo)

TOOLS = Path(os.environ.get("HANGAR_TOOLS", Path.home() / ".cache/hangar-tools"))


@pytest.fixture
def wkg(tmp_path):
    """Runs `wkg`, with a Docker config of its own (no credentials of this machine)."""
    found = os.environ.get("WKG_BIN") or (
        str(TOOLS / "bin/wkg") if (TOOLS / "bin/wkg").exists() else shutil.which("wkg"))
    if not found:
        pytest.fail(f"wkg is not installed (looked for $WKG_BIN, {TOOLS}/bin/wkg and PATH); "
                    f"scripts/test installs it: cargo install wkg --version 0.16.1 --locked "
                    f"--root {TOOLS}")
    docker = tmp_path / "wkg-docker"
    docker.mkdir()
    (docker / "config.json").write_text("{}")
    env = {**os.environ, "DOCKER_CONFIG": str(docker)}
    env.pop("WKG_OCI_USERNAME", None)
    env.pop("WKG_OCI_PASSWORD", None)

    def run(*args):
        out = subprocess.run([found, *map(str, args)], capture_output=True, text=True,
                             timeout=120, env=env)
        assert out.returncode == 0, f"wkg {args}:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    return run


def test_wkg_pulls_what_hangar_pushed_byte_identical(tmp_path, registry, wkg):
    for name in ("echo", "wordcount"):
        digest = push(tmp_path, registry, name, f"tools/{name}:1.0")
        out = tmp_path / f"{name}-from-wkg.wasm"
        wkg("oci", "pull", "--insecure", registry.host,
            f"{registry.host}/tools/{name}:1.0", "-o", out)
        assert out.read_bytes() == plugin_path(name).read_bytes()
        # And by the digest `hangar push` printed.
        by_digest = tmp_path / f"{name}-by-digest.wasm"
        wkg("oci", "pull", "--insecure", registry.host,
            f"{registry.host}/tools/{name}@{digest}", "-o", by_digest)
        assert by_digest.read_bytes() == plugin_path(name).read_bytes()


def test_hangar_serves_what_wkg_pushed(tmp_path, registry, servers, wkg):
    ref = f"{registry.host}/tools/echo:wkg"
    printed = wkg("oci", "push", "--insecure", registry.host, ref, plugin_path("echo"))
    [digest] = re.findall(r"digest: (sha256:[0-9a-f]{64})", printed)
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + source("remote", f"oci://{ref}", digest))
    assert tools(s) == ["echo", "wordcount"]
    call_echo(s, "pushed by wkg")
    assert problems(s) == []
    # The layer Hangar stored is the file wkg pushed.
    stored = list((tmp_path / "srv/cache/oci/sha256").iterdir())
    assert any(p.read_bytes() == plugin_path("echo").read_bytes() for p in stored)
    out = hangar("check", "--config", s.config_path, "--plugins", s.plugins_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"digest {digest}" in out.stdout
    assert "requests nothing stated (no dev.hangar.requests annotation)" in out.stdout


def test_wkg_can_push_the_requests_annotation(tmp_path, registry, servers, wkg):
    """`wkg oci push --annotation` carries a component's requested grants as `hangar push --requests` does."""
    ref = f"{registry.host}/tools/echo:asks"
    printed = wkg("oci", "push", "--insecure", registry.host,
                  "--annotation", 'dev.hangar.requests={"http":["api.example.com"]}',
                  ref, plugin_path("echo"))
    [digest] = re.findall(r"digest: (sha256:[0-9a-f]{64})", printed)
    s = servers(tmp_path / "srv", [],
                config=registries(registry) + source("remote", f"oci://{ref}", digest))
    assert tools(s) == ["echo"]
    out = hangar("check", "--config", s.config_path, "--plugins", s.plugins_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "requests http api.example.com\n" in out.stdout
    assert "granted: none; not granted: http api.example.com" in out.stdout
