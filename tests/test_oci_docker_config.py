"""Registry credentials from a Docker `config.json` (`[registries] docker_config`, issue #42 item 1).

A registry with htpasswd auth (as in test_oci_sources.py). The file's `auths`
entries (`auth` = base64 of user:password, or `username` / `password`) are used
for registries `[registries.auth]` does not name; `[registries.auth]` wins over
it. Credential helpers (`credsStore`, `credHelpers`) are not run: a clear error.
Hangar reads no `~/.docker/config.json` unless `docker_config` names it.
"""

import base64
import os
import shutil
import json

import bcrypt
import pytest

from conftest import plugin_path
from test_oci_sources import (  # noqa: F401 (fixtures)
    Registry, hangar, problems, registries, servers, source, tools, call_echo)

PASSWORD = "s3cret-pass"


@pytest.fixture
def private(tmp_path):
    htpasswd = tmp_path / "htpasswd"
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=5)).decode()
    htpasswd.write_text(f"hangar:{hashed}\n")
    r = Registry(tmp_path / "registry", htpasswd=htpasswd).start()
    yield r
    r.stop()


def docker_config(tmp_path, auths: dict, **more) -> str:
    path = tmp_path / "docker" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"auths": auths, **more}))
    # Relative to hangar.toml's folder (the test's folder).
    return "docker/config.json"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_docker_config_auths_push_and_pull(tmp_path, private, servers):
    rel = docker_config(tmp_path, {private.host: {"auth": b64(f"hangar:{PASSWORD}")}})
    settings = registries(private) + f'docker_config = "{tmp_path / rel}"\n'
    cfg = tmp_path / "push.toml"
    cfg.write_text(registries(private) + f'docker_config = "{rel}"\n')
    ref = f"oci://{private.host}/tools/echo:1.0"
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg)
    assert out.returncode == 0, out.stderr
    digest = out.stdout.strip()
    s = servers(tmp_path / "srv", [], config=settings + source("remote", ref, digest))
    assert tools(s) == ["echo"]
    call_echo(s)
    assert problems(s) == []
    # The username / password form of an entry, keyed by URL as `docker login` may write it.
    docker_config(tmp_path, {f"https://{private.host}/v2/": {"username": "hangar",
                                                             "password": PASSWORD}})
    s = servers(tmp_path / "srv2", [], config=settings + source("remote", ref, digest))
    assert tools(s) == ["echo"]
    assert problems(s) == []


def test_registries_auth_wins_over_docker_config(tmp_path, private, servers):
    rel = docker_config(tmp_path, {private.host: {"auth": b64(f"hangar:{PASSWORD}")}})
    ref = f"oci://{private.host}/tools/echo:1.0"
    good = registries(private) + f'docker_config = "{tmp_path / rel}"\n'
    cfg = tmp_path / "push.toml"
    cfg.write_text(good)
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg)
    assert out.returncode == 0, out.stderr
    wrong = good + f'[registries.auth."{private.host}"]\nusername = "hangar"\npassword = "wrong"\n'
    s = servers(tmp_path / "srv", ["wordcount"], config=wrong + source("remote", ref))
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert "Not authorized" in p["error"], p


def test_credential_helpers_and_bad_files_are_clear_errors(tmp_path, private, servers):
    ref = f"oci://{private.host}/tools/echo:1.0"
    # Only a credential store: Hangar does not run it, and says so.
    rel = docker_config(tmp_path, {private.host: {}}, credsStore="desktop")
    base = registries(private) + f'docker_config = "{tmp_path / rel}"\n'
    cfg = tmp_path / "push.toml"
    cfg.write_text(base)
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg)
    assert out.returncode == 1
    assert 'credential helper (credsStore = "desktop"), which Hangar does not run' in out.stderr
    s = servers(tmp_path / "srv", ["wordcount"], config=base + source("remote", ref))
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert '"remote"' in p["error"] and "does not run" in p["error"], p
    # A file that is not there, or not JSON: named in the error.
    missing = registries(private) + f'docker_config = "{tmp_path / "nope.json"}"\n'
    cfg.write_text(missing)
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg)
    assert out.returncode == 1 and "[registries] docker_config" in out.stderr \
        and "nope.json" in out.stderr, out.stderr
    (tmp_path / "docker/config.json").write_text("not json")
    cfg.write_text(base)
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg)
    assert out.returncode == 1 and "not a Docker config.json" in out.stderr, out.stderr


def test_no_docker_config_is_read_unless_named(tmp_path, private, servers):
    """`$DOCKER_CONFIG` / `~/.docker/config.json` holding the right credentials are not used by default."""
    docker_config(tmp_path, {private.host: {"auth": b64(f"hangar:{PASSWORD}")}})
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    shutil.copy(tmp_path / "docker/config.json", home / ".docker/config.json")
    env = {"DOCKER_CONFIG": str(tmp_path / "docker"), "HOME": str(home)}
    ref = f"oci://{private.host}/tools/echo:1.0"
    cfg = tmp_path / "push.toml"
    cfg.write_text(registries(private))
    out = hangar("push", plugin_path("echo"), ref, "--config", cfg, env={**os.environ, **env})
    assert out.returncode == 1 and "authentication required" in out.stderr, out.stderr
    # Anonymous, so refused before the registry says whether the tag exists.
    s = servers(tmp_path / "srv", ["wordcount"], config=registries(private) + source("remote", ref),
                env=env)
    assert tools(s) == ["wordcount"]
    [p] = problems(s)
    assert "Not authorized" in p["error"], p
