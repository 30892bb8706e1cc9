"""The container image (`scripts/image`), run with podman (`scripts/podman`).

The module builds the image once from the suite's binary, then holds it to:

* what it says of itself: the OCI labels (version, revision, source, the
  MCP server name of server.json), a non-root user, the `HANGAR_*`
  defaults, the cache volume, the health check on /livez; `--version`
  names the commit; no shell in it (only the binary and its libraries);
* the shipped config it carries passing `hangar check` in the container;
* a container run with a read-only root and a mounted plugins folder and
  config: it serves MCP (list, call), runs as uid 10001 with `/` mounted
  read-only, passes its health check; `/readyz` answers 503 while a
  reload rebuilds the catalog and 200 after, with the new tool;
* `podman stop` (SIGTERM): the call running finishes with its answer, the
  container exits 0;
* `scripts/image --push --sign`: the image in a registry (Debian's
  docker-registry), its manifest digest signed as `hangar push --sign`
  signs, the signature checked by openssl with the public key alone;
* three containers behind nginx with the suite's Redis (`scripts/cluster
  --image`), on the Kubernetes ConfigMap's hangar.toml: a ConfigMap-style
  `..data` swap reaches all three, and a session goes on through the
  balancer when the container serving it is killed.
"""

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from test_deploy import configmap_hangar_toml
from test_metrics import scrape, value
from conftest import (HANGAR_BIN, REDIS_URL, ROOT, TEST_PLUGINS, Mcp, free_port, plugin_path,
                      wait_for)

RUN = uuid.uuid4().hex[:10]
TAG = f"localhost/hangar-test:{RUN}"
PODMAN = str(ROOT / "scripts" / "podman")
UID = 10001


def podman(*args, timeout=300, check=True) -> subprocess.CompletedProcess:
    out = subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert out.returncode == 0, f"podman {' '.join(args)}: {out.stderr}"
    return out


def workspace_version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    return re.search(r'^\[workspace\.package\][^\[]*?^version = "([^"]+)"', text, re.M | re.S)[1]


@pytest.fixture(scope="module")
def image():
    out = subprocess.run(["bash", str(ROOT / "scripts" / "image"), "--bin", str(HANGAR_BIN),
                          "--tag", TAG], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    yield TAG
    podman("rmi", "-f", TAG, check=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One compiled cache for the module's containers, writable by the image's user."""
    d = tmp_path_factory.mktemp("image-cache")
    os.chown(d, UID, UID)
    return d


class Container:
    """One `podman run` of the image on the host network, at a port of its own."""

    def __init__(self, image, workdir: Path, cache: Path, mounts=(), args=("serve",)):
        self.name = f"hangar-test-{RUN}-{uuid.uuid4().hex[:6]}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{self.name}.log"
        volumes = [f"{cache}:/var/cache/hangar"] + list(mounts)
        cmd = [PODMAN, "run", "--name", self.name, "--network", "host", "--read-only",
               "-e", "NO_COLOR=1", "-e", f"HANGAR_LISTEN=127.0.0.1:{self.port}"]
        for v in volumes:
            cmd += ["-v", v]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([*cmd, image, *args], stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait_ready(self):
        def ready():
            assert self.proc.poll() is None, f"the container exited:\n{self.log_text()}"
            try:
                return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False
        # First starts compile components (the shipped Python and JavaScript
        # ones take ~15 s of CPU each): 600 s is against a hang only.
        wait_for(ready, 600, f"{self.name} to be ready")
        return self

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def inspect(self, fmt: str) -> str:
        return podman("inspect", "--format", fmt, self.name).stdout.strip()

    def remove(self):
        podman("rm", "-f", "-t", "0", self.name, check=False)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def containers(image, cache, tmp_path_factory):
    made = []

    def run(mounts=(), args=("serve",)):
        c = Container(image, tmp_path_factory.mktemp("container"), cache, mounts, args)
        made.append(c)
        return c
    yield run
    for c in made:
        c.remove()


def test_the_image_says_what_it_is(image):
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    config = info["Config"]
    labels = config["Labels"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    server_json = json.loads((ROOT / "server.json").read_text())
    assert labels["org.opencontainers.image.version"] == workspace_version()
    assert labels["org.opencontainers.image.revision"] == head
    assert labels["org.opencontainers.image.source"]
    assert labels["io.modelcontextprotocol.server.name"] == server_json["name"]
    assert config["User"] == f"{UID}:{UID}"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["HANGAR_CONFIG"] == "/etc/hangar/hangar.toml"
    assert env["HANGAR_LISTEN"] == "0.0.0.0:8080"
    assert env["HANGAR_PLUGINS"] == "/plugins"
    assert "/var/cache/hangar" in config["Volumes"]
    assert "8080/tcp" in config["ExposedPorts"]
    assert config["Entrypoint"] == ["/usr/local/bin/hangar"]
    assert config["Cmd"] == ["serve"]
    # Exec form: a scratch image has no shell to run a CMD-SHELL.
    assert info["Healthcheck"]["Test"] == ["CMD", "/usr/local/bin/hangar", "probe", "--path",
                                           "/livez"], info["Healthcheck"]

    version = podman("run", "--rm", image, "--version").stdout.strip()
    assert version == f"hangar {workspace_version()} ({head[:12]})"
    # Only the binary and what it links: nothing else to run.
    no_shell = podman("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true", check=False)
    assert no_shell.returncode != 0


def some_plugins(folder: Path, *names) -> Path:
    folder.mkdir()
    for name in names:
        shutil.copy(plugin_path(name), folder / f"{name}.wasm")
    return folder


def test_the_shipped_config_passes_hangar_check_in_the_container(image, cache, tmp_path):
    # Three of the image's plugins (the ones it names and two more): the
    # others are the same files test_examples.py serves, and compiling the
    # Python and JavaScript ones costs minutes of the suite's two cores.
    plugins = some_plugins(tmp_path / "plugins", "csv-report", "echo", "units")
    out = podman("run", "--rm", "--read-only", "-v", f"{cache}:/var/cache/hangar",
                 "-v", f"{plugins}:/plugins:ro", "-e", "NO_COLOR=1", image, "check", timeout=900)
    assert "0 problems" in out.stdout, out.stdout
    assert "config: /etc/hangar/hangar.toml" in out.stdout
    assert "plugins: /plugins" in out.stdout
    for tool in ("echo", "units.to-celsius", "demo.products.search"):
        assert f"  tool  {tool} " in out.stdout, out.stdout


def configmap_style(folder: Path, text: str, version: int) -> Path:
    """Writes `text` as Kubernetes writes a ConfigMap: the file in a
    timestamped folder, `..data` pointing at it (swapped by a rename), and
    `hangar.toml` pointing through `..data`."""
    data = folder / f"..v{version}"
    data.mkdir()
    (data / "hangar.toml").write_text(text)
    tmp = folder / "..data_tmp"
    tmp.symlink_to(data.name)
    os.replace(tmp, folder / "..data")
    link = folder / "hangar.toml"
    if not link.is_symlink():
        link.symlink_to("..data/hangar.toml")
    return link


@pytest.fixture(scope="module")
def mounted(containers, tmp_path_factory):
    """A container of the image with its plugins folder and config mounted read-only."""
    root = tmp_path_factory.mktemp("mounted")
    plugins = some_plugins(root / "plugins", "echo", "abuse")
    config = root / "config"
    config.mkdir()
    configmap_style(config, '[server]\ncache_dir = "/var/cache/hangar"\nshutdown_grace = "30s"\n', 1)
    c = containers(mounts=(f"{plugins}:/plugins:ro", f"{config}:/etc/hangar:ro")).wait_ready()
    c.plugins, c.config = plugins, config
    return c


def tool_names(url) -> set:
    c = Mcp(url)
    c.initialize()
    return {t["name"] for t in c.request("tools/list")["result"]["tools"]}


def test_a_container_serves_mcp_as_a_non_root_user_on_a_read_only_root(mounted):
    c = Mcp(mounted.url)
    c.initialize()
    assert {"echo", "sleep_once"} <= tool_names(mounted.url)
    r = c.call("echo", {"text": "from the container"})
    assert r["result"]["content"][0]["text"] == "from the container", r

    pid = mounted.inspect("{{.State.Pid}}")
    status = Path(f"/proc/{pid}/status").read_text()
    uids = re.search(r"^Uid:\s+(.*)$", status, re.M)[1].split()
    gids = re.search(r"^Gid:\s+(.*)$", status, re.M)[1].split()
    assert uids == [str(UID)] * 4 and gids == [str(UID)] * 4, status
    # The container's own root mount, as its process sees it.
    root = [line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
            if line.split()[4] == "/"]
    assert root and "ro" in root[0][5].split(","), root
    health = podman("healthcheck", "run", mounted.name, check=False)
    assert health.returncode == 0, health.stdout + health.stderr


def test_readyz_answers_503_while_a_reload_rebuilds_and_200_with_the_new_tool(mounted):
    assert httpx.get(mounted.url + "/readyz", timeout=5).status_code == 200
    # A Python component: compiling it takes seconds, so the rebuild is seen.
    shutil.copy(plugin_path("py-greet"), mounted.plugins / "py-greet.wasm")
    seen = set()

    def rebuilt():
        r = httpx.get(mounted.url + "/readyz", timeout=5)
        seen.add(r.status_code)
        if r.status_code == 503:
            assert r.json()["waiting_for"] == ["reloading"], r.text
        return 503 in seen and r.status_code == 200
    wait_for(rebuilt, 600, "/readyz to say the reload, then ready")
    assert "py.greet" in tool_names(mounted.url)
    # The config too, swapped as Kubernetes swaps a ConfigMap.
    configmap_style(mounted.config, '[server]\ncache_dir = "/var/cache/hangar"\n'
                    'shutdown_grace = "30s"\ncatalog = "both"\n', 2)
    wait_for(lambda: "search_tools" in tool_names(mounted.url), 120, "the swapped config")


def test_podman_stop_lets_the_running_call_finish_and_exits_0(mounted):
    def in_use():
        return value(scrape(mounted), "hangar_wasm_instances_in_use", pool="tools")
    idle = in_use()
    reply = {}

    def call():
        r = httpx.post(mounted.url + "/tools/sleep_once/call", json={"seconds": 3}, timeout=120)
        reply["status"], reply["body"] = r.status_code, r.json()
    t = threading.Thread(target=call, daemon=True)
    t.start()
    wait_for(lambda: in_use() > idle, 30, "the call to run")
    stop = podman("stop", "-t", "30", mounted.name, timeout=120)
    t.join(60)
    assert reply.get("status") == 200, reply
    assert reply["body"]["content"][0]["text"] == "slept 3 s"
    assert mounted.inspect("{{.State.ExitCode}}") == "0", stop.stderr
    assert mounted.proc.wait(30) == 0


def with_server_key(toml: str, line: str) -> str:
    """`toml` with `line` as the first key of its [server] table."""
    assert "\n[server]\n" in "\n" + toml, toml
    return re.sub(r"^\[server\]\n", "[server]\n" + line + "\n", toml, count=1, flags=re.M)


@pytest.fixture(scope="module")
def cluster(image, cache, tmp_path_factory):
    root = tmp_path_factory.mktemp("container-cluster")
    config = root / "config"
    config.mkdir()
    link = configmap_style(config, configmap_hangar_toml(), 1)
    # The plugins it names, and echo (see the check test above for why not all).
    plugins = some_plugins(root / "plugins", "csv-report", "echo")
    port = free_port()
    env = {**os.environ, "HANGAR_REDIS_URL": REDIS_URL,
           "HANGAR_SIGNING_KEY": secrets.token_hex(16)}
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "cluster"), "--image", image, "--config", str(link),
         "--listen", f"127.0.0.1:{port}", "--dir", str(root / "run"), "--cache-dir", str(cache),
         "--plugins", str(plugins), "--redis", REDIS_URL],
        stdout=open(root / "cluster.log", "w"), stderr=subprocess.STDOUT, env=env,
        start_new_session=True)

    def up():
        assert proc.poll() is None, (root / "cluster.log").read_text()
        return (root / "run" / "ready").exists()
    wait_for(up, 900, "the cluster of containers")
    run = root / "run"
    yield {"url": f"http://127.0.0.1:{port}", "run": run, "config": config,
           "replicas": [(run / f"replica-{i}.addr").read_text().strip() for i in (1, 2, 3)],
           "names": [(run / f"replica-{i}.name").read_text().strip() for i in (1, 2, 3)]}
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    for name in (run / f"replica-{i}.name" for i in (1, 2, 3)):
        if name.exists():
            podman("rm", "-f", "-t", "0", name.read_text().strip(), check=False)


def test_a_configmap_swap_reaches_every_container(cluster):
    for addr in cluster["replicas"]:
        assert "search_tools" not in tool_names(f"http://{addr}")
    swapped = with_server_key(configmap_hangar_toml(), 'catalog = "both"')
    configmap_style(cluster["config"], swapped, 2)
    for addr in cluster["replicas"]:
        wait_for(lambda: "search_tools" in tool_names(f"http://{addr}"), 120,
                 f"the swapped config on {addr}")


def served_by(access: Path, session: str) -> str:
    """The replica that answered the session's last request, by nginx's
    access log (`upstream=a, b` when a was tried first and b answered)."""
    last = [line for line in access.read_text().splitlines() if session in line][-1]
    return re.search(r"upstream=(.*?) session=", last)[1].split(",")[-1].strip()


def test_a_session_goes_on_when_the_container_serving_it_is_killed(cluster):
    c = Mcp(cluster["url"])
    c.initialize()
    access = cluster["run"] / "access.log"
    r = c.call("echo", {"text": "before"})
    assert r["result"]["content"][0]["text"] == "before", r
    # The replica that served that call, by nginx's log.
    addr = served_by(access, c.session)
    victim = cluster["names"][cluster["replicas"].index(addr)]
    podman("kill", "--signal", "KILL", victim)
    wait_for(lambda: podman("container", "exists", victim, check=False).returncode != 0
             or podman("inspect", "--format", "{{.State.Running}}", victim,
                       check=False).stdout.strip() != "true", 60, "the container to die")
    # Every call of the session is answered, by the two left.
    served = set()
    for i in range(6):
        r = c.call("echo", {"text": f"after {i}"})
        assert r["result"]["content"][0]["text"] == f"after {i}", r
        served.add(served_by(access, c.session))
    assert addr not in served and len(served) == 2, served


def test_the_image_is_pushed_and_signed_as_hangar_push_signs(image, tmp_path):
    from test_oci_signatures import keypair, sig_tag
    from test_oci_sources import Registry
    registry = Registry(tmp_path / "registry").start()
    try:
        key, pub, _ = keypair(tmp_path / "keys", "release")
        target = f"oci://{registry.host}/hangar:{workspace_version()}"
        out = subprocess.run(["bash", str(ROOT / "scripts" / "image"), "--bin", str(HANGAR_BIN),
                              "--tag", image, "--push-only", "--push", target, "--insecure",
                              "--sign", str(key)], capture_output=True, text=True, timeout=600,
                             cwd=ROOT)
        assert out.returncode == 0, out.stderr
        # The digest of the manifest the registry serves for the tag is the one signed.
        base = f"http://{registry.host}/v2/hangar"
        accept = {"accept": "application/vnd.docker.distribution.manifest.v2+json, "
                            "application/vnd.oci.image.manifest.v1+json"}
        manifest = httpx.get(f"{base}/manifests/{workspace_version()}", headers=accept)
        assert manifest.status_code == 200, manifest.text
        digest = "sha256:" + hashlib.sha256(manifest.content).hexdigest()
        assert digest in out.stdout.split(), out.stdout
        assert f"signed: {sig_tag(digest)}" in out.stderr
        sig = httpx.get(f"{base}/manifests/{sig_tag(digest)}", headers={
            "accept": "application/vnd.oci.image.manifest.v1+json"}).json()
        layer = sig["layers"][0]
        payload = httpx.get(f"{base}/blobs/{layer['digest']}").content
        claims = json.loads(payload)["critical"]
        assert claims["image"]["docker-manifest-digest"] == digest
        assert claims["identity"]["docker-reference"] == f"{registry.host}/hangar"
        # Checked by openssl with the public key alone, as cosign verifies.
        (tmp_path / "payload").write_bytes(payload)
        signature = base64.b64decode(
            layer["annotations"]["dev.cosignproject.cosign/signature"])
        (tmp_path / "sig").write_bytes(signature)
        verify = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature",
                                 tmp_path / "sig", tmp_path / "payload"], capture_output=True,
                                text=True)
        assert verify.returncode == 0 and "Verified OK" in verify.stdout, verify
        # And a payload changed by one byte is not.
        (tmp_path / "payload").write_bytes(payload.replace(b"sha256:", b"sha256;", 1))
        tampered = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature",
                                   tmp_path / "sig", tmp_path / "payload"], capture_output=True)
        assert tampered.returncode != 0
    finally:
        registry.stop()
