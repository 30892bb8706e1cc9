"""Signed plugins from an OCI registry (issue #42: `[trust]`, cosign key-based
signatures, `hangar push --sign`).

A real registry (Debian's `docker-registry`, see test_oci_sources.py), keys made
by `openssl`, and one signature built by this test alone (openssl + plain HTTP,
in cosign's layout) so the verifier is not checked only against Hangar's signer.
"""

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from test_oci_sources import (Registry, call_echo, hangar, problems, registries,  # noqa: F401
                              registry, servers, source, tools)
from conftest import plugin_path

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


GENPKEY = {
    "p256": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "ed25519": ["-algorithm", "ed25519"],
    "rsa": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
}


def keypair(folder: Path, name: str, algorithm: str = "p256") -> tuple[Path, Path, str]:
    """A key pair as openssl writes it (ECDSA P-256 unless told); returns
    (private, public, key id)."""
    folder.mkdir(parents=True, exist_ok=True)
    key, pub = folder / f"{name}.key", folder / f"{name}.pub"
    subprocess.run(["openssl", "genpkey", *GENPKEY[algorithm], "-out", key], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True,
                   capture_output=True)
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", pub, "-outform", "DER"], check=True,
                         capture_output=True).stdout
    return key, pub, f"{name}.pub (SHA256:{hashlib.sha256(der).hexdigest()[:16]})"


@pytest.fixture
def keys(tmp_path):
    return {n: keypair(tmp_path / "keys", n) for n in ("team", "other")}


def trust(keys, require="signed", *names) -> str:
    files = ", ".join(f'"{keys[n][1]}"' for n in (names or ("team",)))
    return f'[trust]\nkeys = [{files}]\nrequire = "{require}"\n'


def push(tmp_path, registry, name, ref, sign: Path | None = None) -> str:
    cfg = tmp_path / "push.toml"
    cfg.write_text(registries(registry))
    args = ["push", plugin_path(name), f"oci://{registry.host}/{ref}", "--config", cfg]
    if sign:
        args += ["--sign", sign]
    out = hangar(*args)
    assert out.returncode == 0, out.stderr
    digest = out.stdout.strip().splitlines()[-1]
    assert digest.startswith("sha256:") and len(digest) == 71, out.stdout
    if sign:
        assert f"signed: {digest.replace(':', '-')}.sig" in out.stderr
    return digest


def put_blob(registry, repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    base = f"http://{registry.host}"
    r = httpx.post(f"{base}/v2/{repo}/blobs/uploads/")
    assert r.status_code == 202, r.text
    location = r.headers["location"]
    url = location if location.startswith("http") else base + location
    sep = "&" if "?" in url else "?"
    r = httpx.put(f"{url}{sep}digest={digest}", content=data,
                  headers={"content-type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return digest


def put_manifest(registry, repo: str, tag: str, body: bytes):
    r = httpx.put(f"http://{registry.host}/v2/{repo}/manifests/{tag}", content=body,
                  headers={"content-type": OCI_MANIFEST})
    assert r.status_code == 201, r.text


def get_manifest(registry, repo: str, tag: str) -> bytes:
    r = httpx.get(f"http://{registry.host}/v2/{repo}/manifests/{tag}",
                  headers={"accept": OCI_MANIFEST})
    assert r.status_code == 200, r.text
    return r.content


def sig_tag(digest: str) -> str:
    return digest.replace(":", "-") + ".sig"


def cosign_sign_by_hand(registry, repo: str, digest: str, key: Path, workdir: Path):
    """A cosign signature made without Hangar: the simple-signing payload signed by
    `openssl dgst -sha256 -sign`, pushed as cosign lays it out."""
    payload = json.dumps({
        "critical": {"identity": {"docker-reference": f"{registry.host}/{repo}"},
                     "image": {"docker-manifest-digest": digest},
                     "type": "cosign container image signature"},
        "optional": {"creator": "a test"},
    }, separators=(",", ":")).encode()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "payload.json").write_bytes(payload)
    if "ed25519" in key.name:  # Ed25519 signs the message itself, no digest first
        sign = ["openssl", "pkeyutl", "-sign", "-rawin", "-inkey", key, "-in", workdir / "payload.json"]
    else:  # ECDSA P-256 / RSA PKCS#1 v1.5 over SHA-256, as cosign does
        sign = ["openssl", "dgst", "-sha256", "-sign", key, workdir / "payload.json"]
    sig = subprocess.run(sign, check=True, capture_output=True).stdout
    layer = put_blob(registry, repo, payload)
    config = b'{"architecture":"","config":{},"os":"","rootfs":{"type":"layers","diff_ids":[]}}'
    config_digest = put_blob(registry, repo, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": SIMPLE_SIGNING, "digest": layer, "size": len(payload),
                    "annotations": {"dev.cosignproject.cosign/signature":
                                    base64.b64encode(sig).decode()}}],
    }
    put_manifest(registry, repo, sig_tag(digest), json.dumps(manifest).encode())


def check(server):
    return hangar("check", "--config", server.config_path, "--plugins", server.plugins_dir)


def health(server) -> dict:
    return httpx.get(server.url + "/healthz", timeout=10).json()


def only_problem(server, plugin: str, ref: str) -> str:
    """The one problem line, which names the plugin and the reference."""
    [p] = problems(server)
    assert p["path"] == ref, p
    assert f'"{plugin}"' in p["error"] and ref in p["error"], p
    return p["error"]


def test_signed_and_pinned_is_served_and_check_shows_the_key(tmp_path, registry, servers, keys):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0", sign=keys["team"][0])
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"], config=registries(registry)
                + trust(keys, "signed", "other", "team") + source("remote", ref, digest))
    assert tools(s) == ["echo", "wordcount"]
    call_echo(s)
    assert problems(s) == []
    team_id = keys["team"][2]
    assert health(s)["plugins"] == {"remote": {
        "source": ref, "digest": digest, "from": "registry",
        "signature": f"signed by {team_id}", "key": team_id}}
    out = check(s)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"digest {digest}" in out.stdout
    assert f"signature signed by {team_id}" in out.stdout
    # A file in plugins/ is the operator's own: shown, not verified.
    assert "signature local file (unverified)" in out.stdout
    # The signature sits beside the artifact under cosign's tag.
    sig = json.loads(get_manifest(registry, "tools/echo", sig_tag(digest)))
    [layer] = sig["layers"]
    assert layer["mediaType"] == SIMPLE_SIGNING
    assert "dev.cosignproject.cosign/signature" in layer["annotations"]


def test_a_signature_made_without_hangar_is_accepted(tmp_path, registry, servers, keys):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    cosign_sign_by_hand(registry, "tools/echo", digest, keys["team"][0], tmp_path / "by-hand")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + trust(keys) + source("remote", ref))
    assert tools(s) == ["echo", "wordcount"]
    call_echo(s)
    assert problems(s) == []
    assert health(s)["plugins"]["remote"]["signature"] == f"signed by {keys['team'][2]}"


def test_unsigned_is_refused_under_signed(tmp_path, registry, servers, keys):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + trust(keys) + source("remote", ref, digest))
    assert tools(s) == ["wordcount"]
    assert "unsigned" in only_problem(s, "remote", ref)
    assert "plugins" not in health(s)
    # With keys but no requirement it serves, and says it is unsigned.
    s2 = servers(tmp_path / "srv2", ["wordcount"],
                 config=registries(registry) + trust(keys, "none") + source("remote", ref))
    assert tools(s2) == ["echo", "wordcount"]
    assert problems(s2) == []
    assert health(s2)["plugins"]["remote"]["signature"] == "unsigned"
    out = check(s2)
    assert "signature unsigned" in out.stdout, out.stdout


def test_a_signature_by_another_key_is_refused(tmp_path, registry, servers, keys):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0", sign=keys["other"][0])
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + trust(keys) + source("remote", ref, digest))
    assert tools(s) == ["wordcount"]
    error = only_problem(s, "remote", ref)
    assert "none by a trusted key" in error and keys["team"][2] in error, error


def test_a_tampered_layer_is_refused_in_one_line(tmp_path, registry, servers, keys):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0", sign=keys["team"][0])
    layer = "sha256:" + hashlib.sha256(plugin_path("echo").read_bytes()).hexdigest()
    blob = registry.blob_file(layer)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF
    blob.write_bytes(bytes(data))
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + trust(keys) + source("remote", ref, digest))
    assert tools(s) == ["wordcount"]
    error = only_problem(s, "remote", ref)
    assert f"layer {layer}" in error and "got sha256:" in error, error


def test_a_moved_tag_is_refused(tmp_path, registry, servers, keys):
    first = push(tmp_path, registry, "echo", "tools/echo:1.0", sign=keys["team"][0])
    # The tag is moved to other bytes, and the old signature copied beside them.
    moved = push(tmp_path, registry, "typed-echo", "tools/echo:1.0")
    assert moved != first
    put_manifest(registry, "tools/echo", sig_tag(moved),
                 get_manifest(registry, "tools/echo", sig_tag(first)))
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + trust(keys) + source("remote", ref))
    assert tools(s) == ["wordcount"]
    error = only_problem(s, "remote", ref)
    assert f"covers {first}, not the served {moved}" in error, error
    # Pinned to what was signed: the moved tag is refused by the pin.
    s2 = servers(tmp_path / "srv2", ["wordcount"],
                 config=registries(registry) + trust(keys) + source("remote", ref, first))
    assert tools(s2) == ["wordcount"]
    assert f"does not match the pinned {first}" in only_problem(s2, "remote", ref)


def test_an_unpinned_source_is_refused_under_pinned(tmp_path, registry, servers, keys):
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    s = servers(tmp_path / "srv", ["wordcount"],
                config=registries(registry) + '[trust]\nrequire = "pinned"\n'
                + source("remote", ref))
    assert tools(s) == ["wordcount"]
    assert 'require = "pinned"' in only_problem(s, "remote", ref)
    s2 = servers(tmp_path / "srv2", ["wordcount"],
                 config=registries(registry) + '[trust]\nrequire = "pinned"\n'
                 + source("remote", ref, digest))
    assert tools(s2) == ["echo", "wordcount"]
    assert problems(s2) == []
    assert health(s2)["plugins"]["remote"]["signature"] == "not checked"


def test_offline_restart_from_the_cache_keeps_the_verdict(tmp_path, registry, servers, keys):
    signed = push(tmp_path, registry, "echo", "tools/echo:1.0", sign=keys["team"][0])
    unsigned = push(tmp_path, registry, "typed-echo", "tools/typed:1.0")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    typed = f"oci://{registry.host}/tools/typed:1.0"
    cache = tmp_path / "cache"
    online = registries(registry) + source("remote", ref, signed) + source("typed", typed, unsigned)
    s = servers(tmp_path / "srv", [], config=online + trust(keys, "none"), cache_dir=cache)
    assert problems(s) == []
    assert health(s)["plugins"]["typed"]["signature"] == "unsigned"
    s.stop()
    registry.stop()
    # Offline, requiring signatures: the signed one is judged again from the cache.
    s = servers(tmp_path / "srv2", ["wordcount"], config=online + trust(keys), cache_dir=cache)
    assert "echo" in tools(s) and "wordcount" in tools(s)
    call_echo(s)
    plugins = health(s)["plugins"]
    assert plugins["remote"]["from"] == "cache"
    assert plugins["remote"]["signature"] == f"signed by {keys['team'][2]}"
    assert "typed" not in plugins
    lines = {p["path"]: p["error"] for p in problems(s)}
    assert "registry unreachable, serving the cached " + signed in lines[ref]
    assert "unsigned" in lines[typed] and '"typed"' in lines[typed]
    out = check(s)
    assert f"signature signed by {keys['team'][2]}" in out.stdout, out.stdout


def test_a_bad_key_file_is_a_config_error_naming_it(tmp_path, keys):
    bad = tmp_path / "keys/bad.pub"
    bad.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    cfg = tmp_path / "hangar.toml"
    cfg.write_text('[trust]\nkeys = ["keys/bad.pub"]\nrequire = "signed"\n')
    out = hangar("check", "--config", cfg, "--plugins", tmp_path)
    assert out.returncode != 0
    assert "bad.pub" in out.stderr and "[trust] keys" in out.stderr, out.stderr
    # Signing refuses a public key before anything is pushed.
    out = hangar("push", plugin_path("echo"), "oci://127.0.0.1:9/x/y:1", "--sign", keys["team"][1])
    assert out.returncode != 0 and "team.pub" in out.stderr, out.stderr


@pytest.mark.parametrize("algorithm", ["ed25519", "rsa"])
def test_ed25519_and_rsa_keys_verify_and_refuse(tmp_path, registry, servers, algorithm):
    """Signatures made by openssl with an Ed25519 or RSA key: accepted under
    that key, refused under a P-256 key that did not sign."""
    key, pub, key_id = keypair(tmp_path / "keys", algorithm, algorithm)
    _, other_pub, _ = keypair(tmp_path / "keys", "other")
    digest = push(tmp_path, registry, "echo", "tools/echo:1.0")
    cosign_sign_by_hand(registry, "tools/echo", digest, key, tmp_path / "by-hand")
    ref = f"oci://{registry.host}/tools/echo:1.0"
    good = servers(tmp_path / "good", ["wordcount"], config=registries(registry)
                   + f'[trust]\nkeys = ["{pub}"]\nrequire = "signed"\n' + source("remote", ref))
    assert tools(good) == ["echo", "wordcount"]
    call_echo(good)
    assert health(good)["plugins"]["remote"]["signature"] == f"signed by {key_id}"
    bad = servers(tmp_path / "bad", ["wordcount"], config=registries(registry)
                  + f'[trust]\nkeys = ["{other_pub}"]\nrequire = "signed"\n' + source("remote", ref))
    assert tools(bad) == ["wordcount"]
    assert "none by a trusted key" in only_problem(bad, "remote", ref)


def test_hangar_push_signs_with_an_ed25519_key(tmp_path, registry, servers):
    key, pub, key_id = keypair(tmp_path / "keys", "ed", "ed25519")
    digest = push(tmp_path, registry, "echo", "tools/echo:ed", sign=key)
    ref = f"oci://{registry.host}/tools/echo:ed"
    s = servers(tmp_path / "srv", [], config=registries(registry)
                + f'[trust]\nkeys = ["{pub}"]\nrequire = "signed"\n' + source("remote", ref, digest))
    assert tools(s) == ["echo"]
    assert health(s)["plugins"]["remote"]["signature"] == f"signed by {key_id}"
