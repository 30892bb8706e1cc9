"""`scripts/release` makes what a user downloads: an archive with one folder
that unpacks anywhere and serves the example config from there, with no
checkout, no build and no environment of the suite's; a CycloneDX SBOM that
lists the host's crates; and a SHA256SUMS that checks both.

The script runs once for the module, shipping the suite's binary
(`--bin $HANGAR_BIN`) into a temp folder."""

import json
import platform
import stat
import subprocess
import tarfile
import tomllib

import httpx
import pytest

from conftest import HANGAR_BIN, ROOT, Mcp, free_port, wait_for

WORKSPACE = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]
VERSION = WORKSPACE["package"]["version"]
NAME = f"hangar-{VERSION}"
ARCHIVE = f"{NAME}-{platform.machine()}-linux-gnu.tar.gz"
SBOM = f"{NAME}.cdx.json"
# What the archive's folder holds: the binary, the docs a user reads first,
# the example config and what it loads (its plugins, the SQL the demo
# database is created from, not a database).
TOP_LEVEL = {"bin", "README.md", "LICENSE", "hangar.toml", "plugins", "examples"}
PLUGINS = {p.name for p in (ROOT / "plugins").glob("*.wasm")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([str(ROOT / "scripts/release"), "--bin", str(HANGAR_BIN), "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ARCHIVE in r.stdout and SBOM in r.stdout, r.stdout
    return out


def unpack(dist, into):
    """The archive unpacked into `into`, a new empty folder; its one folder."""
    into.mkdir()
    with tarfile.open(dist / ARCHIVE) as tar:
        tar.extractall(into, filter="data")
    assert [p.name for p in into.iterdir()] == [NAME]
    return into / NAME


def test_checksums_cover_what_was_written_and_verify(dist):
    assert sorted(p.name for p in dist.iterdir()) == sorted([ARCHIVE, SBOM, "SHA256SUMS"])
    listed = [line.split()[1] for line in (dist / "SHA256SUMS").read_text().splitlines()]
    assert sorted(listed) == sorted([ARCHIVE, SBOM])
    r = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_sbom_is_cyclonedx_and_lists_the_hosts_crates(dist):
    bom = json.loads((dist / SBOM).read_text())
    assert bom["bomFormat"] == "CycloneDX"
    assert bom["specVersion"] == "1.5"
    component = bom["metadata"]["component"]
    assert (component["name"], component["version"]) == ("hangar", VERSION)
    # Made on a copy of the workspace, its references name the checkout.
    assert component["bom-ref"] == f"path+file://{ROOT}/host#hangar@{VERSION}"
    names = {c["name"] for c in bom["components"]}
    assert len(bom["components"]) > 100, len(bom["components"])
    assert {"wasmtime", "wasmtime-wasi", "axum", "tokio"} <= names
    # The host's crates (hangar and the three beneath it) and no other
    # member of the workspace (the SDK, the plugins, the test guests).
    host = {"hangar-config", "hangar-core", "hangar-runtime"}
    assert host <= names, host - names
    members = {tomllib.loads((ROOT / m / "Cargo.toml").read_text())["package"]["name"]
               for m in WORKSPACE["members"]} - {"hangar"} - host
    assert "hangar-sdk" in members and not names & members, names & members


def test_archive_holds_one_folder_with_the_binary_config_plugins_and_examples(dist, tmp_path):
    top = unpack(dist, tmp_path / "unpacked")
    assert {p.name for p in top.iterdir()} == TOP_LEVEL
    assert [p.name for p in (top / "bin").iterdir()] == ["hangar"]
    assert (top / "bin/hangar").stat().st_mode & stat.S_IXUSR
    # The suite's binary, its debug line tables stripped and its symbols kept.
    version = [subprocess.run([b, "--version"], capture_output=True, text=True).stdout
               for b in (top / "bin/hangar", HANGAR_BIN)]
    assert version[0] == version[1] and version[0].startswith("hangar "), version
    sections = subprocess.run(["readelf", "-S", "-W", top / "bin/hangar"], capture_output=True,
                              text=True, check=True).stdout
    assert ".symtab" in sections and ".debug_line" not in sections
    assert PLUGINS and {p.name for p in (top / "plugins").iterdir()} == PLUGINS
    # hangar.toml's connector creates examples/demo.db from examples/demo.sql.
    assert {p.name for p in (top / "examples").iterdir()} == {"demo.sql"}
    for f in ("README.md", "LICENSE", "hangar.toml", "examples/demo.sql"):
        assert (top / f).read_bytes() == (ROOT / f).read_bytes(), f
    assert "Apache License\n                           Version 2.0" in (top / "LICENSE").read_text()


def test_unpacked_folder_serves_the_examples_on_its_own(dist, tmp_path, shared_cache):
    top = unpack(dist, tmp_path / "unpacked")
    # The shipped cache_dir, .cache/hangar beside the config, is the run's
    # shared compiled cache (a link: nothing is copied). Cold, this start
    # compiles every example plugin, the 7 Python and JavaScript ones at
    # 15-60 s each: 230 s here on 2 cores beside other work, so a wait of
    # 180 s failed. Entries are keyed by content and engine; the other
    # tests that serve the examples (test_examples, test_polyglot) share
    # them, so only the first to start compiles.
    (top / ".cache").mkdir()
    (top / ".cache/hangar").symlink_to(shared_cache, target_is_directory=True)
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "hangar.log", "w")
    # No variable of the suite's (HANGAR_*, DATABASE_URL, ...): a user's
    # fresh shell, in the unpacked folder, running the archive's binary.
    proc = subprocess.Popen(
        ["bin/hangar", "serve", "--config", "hangar.toml", "--listen", f"127.0.0.1:{port}"],
        cwd=top, env={"HOME": str(home), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        stdout=log, stderr=subprocess.STDOUT)

    def ready():
        if proc.poll() is not None:
            pytest.fail(f"hangar exited {proc.returncode}")
        try:
            return httpx.get(url + "/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        # Long enough for a cold cache (this module run on its own).
        try:
            wait_for(ready, 600, "the unpacked server to become ready")
        except pytest.fail.Exception as e:
            pytest.fail(f"{e}:\n{(tmp_path / 'hangar.log').read_text()}")
        c = Mcp(url)
        c.initialize()
        names = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
        assert {"echo", "wordcount", "units.to-celsius", "demo.products.search",
                "demo.products.get", "demo.products.restock"} <= names, names
        r = c.call("echo", {"text": "from the archive"})
        assert r["result"]["content"][0]["text"] == "from the archive", r
        # The SQL demo: its database created from the shipped examples/demo.sql.
        r = c.call("demo.products.search", {"query": "jacket"})
        assert r["result"]["structuredContent"]["rows"] == [
            {"id": 2, "name": "Rain jacket", "category": "outerwear", "price": 189.5, "in_stock": 3}], r
        assert (top / "examples/demo.db").exists()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
