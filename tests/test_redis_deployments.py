"""`[cluster]` against the Redis setups real deployments use: TLS with a
private CA (and a client certificate), a password (`requirepass`, given
through `{{ env.X }}`), an ACL user, and a Redis Cluster of three masters.

Every Redis here is a `redis-server` the test starts on ports of its own
(Debian's is linked with OpenSSL); the certificates come from `trustme`.
Each working setup serves two replicas, and the test shows what they share
through it: a session opened on one is served by the other, a kv counter
counts on both, an elicitation answered on the other replica reaches the
one that asked (pub/sub), and a rate limit counts calls on both. Each
setting that cannot work (an untrusted certificate, a wrong password, a
Redis Cluster node named as one server) stops `hangar serve` at start-up
with an error naming the server, never the password.
"""

import json
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from conftest import PROTOCOL, Mcp, Server, free_port, wait_for

RUN = uuid.uuid4().hex[:8]
PASSWORD = f"pw-{RUN}-do-not-print"
ACL_PASSWORD = f"acl-{RUN}-do-not-print"
PLUGINS = ("echo", "everything", "kv-counter")


class RedisServer:
    """One `redis-server` on a free port, no persistence, in `workdir`."""

    def __init__(self, workdir: Path, *args: str, tls: bool = False, port: int | None = None):
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        ports = ["--port", "0", "--tls-port", str(self.port)] if tls else ["--port", str(self.port)]
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", *ports, "--save", "", "--appendonly", "no",
             "--dir", str(workdir), *args],
            stdout=open(workdir / "redis.log", "w"), stderr=subprocess.STDOUT)
        wait_for(self.listening, 10, f"redis-server on {self.port}")

    def listening(self) -> bool:
        assert self.proc.poll() is None, "redis-server exited"
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def cli(self, *args: str) -> str:
        out = subprocess.run(["redis-cli", "-p", str(self.port), *args],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def cluster_table(redis, extra: str = "") -> str:
    urls = json.dumps(redis) if isinstance(redis, list) else f'"{redis}"'
    return f"""
[cluster]
redis = {urls}
prefix = "hangar-test-deploy:{RUN}"
{extra}

[artifacts]
signing_key = "hangar-test-cluster-signing-key"

[[tools]]
name = "test_simple_text"
rate_limit = "3/m"
"""


def replicas(tmp_path: Path, cache: Path, config: str, env=None, n=2) -> list[Server]:
    started = []
    try:
        for i in range(n):
            started.append(Server(tmp_path / f"replica-{i}", PLUGINS, config, cache, env).start())
    except Exception:
        for s in started:
            s.stop()
        raise
    return started


def start_fails(tmp_path: Path, cache: Path, config: str, env=None) -> str:
    """Starts one replica that must not start; returns what it printed."""
    s = Server(tmp_path / f"refused-{uuid.uuid4().hex[:6]}", PLUGINS, config, cache, env)
    try:
        s.start()
    except RuntimeError as e:
        return str(e)
    s.stop()
    pytest.fail(f"hangar started:\n{s.log_text()}")


def text(reply) -> str:
    assert "result" in reply, reply
    assert not reply["result"].get("isError"), reply
    return reply["result"]["content"][0]["text"]


def elicit_across(asker: Server, answerer: Server) -> dict:
    """A call on `asker` asks the client a question; the answer is posted to
    `answerer`. Returns the call's final message."""
    c = Mcp(asker.url)
    r = c.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {"elicitation": {}},
                                 "clientInfo": {"name": "deploy-test", "version": "0"}})
    assert "result" in r, r
    c.notify("notifications/initialized")
    http = httpx.Client(timeout=30)
    headers = {"accept": "application/json, text/event-stream", "mcp-session-id": c.session}
    body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}}}
    final = None
    with http.stream("POST", asker.url + "/mcp", json=body, headers=headers) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            msg = json.loads(line[6:])
            if msg.get("method") == "elicitation/create":
                answer = {"jsonrpc": "2.0", "id": msg["id"],
                          "result": {"action": "accept", "content": {"username": "ada", "email": "a@b.c"}}}
                posted = http.post(answerer.url + "/mcp", json=answer, headers=headers)
                assert posted.status_code == 202, posted.text
            elif msg.get("id") == 99:
                final = msg
    http.close()
    return final


def shares_state(a: Server, b: Server):
    """What two replicas over one Redis share, each shown across them."""
    for s in (a, b):
        health = httpx.get(s.url + "/healthz").json()
        assert health["cluster"]["redis"] == "ok", health
    # A session opened on `a` is served by `b`.
    c = Mcp(a.url)
    c.initialize()
    on_b = Mcp(b.url)
    on_b.session = c.session
    assert text(on_b.call("echo", {"text": "from b"})) == "from b"
    # A kv counter counts on both.
    key = f"n-{uuid.uuid4().hex[:8]}"
    counts = [text(Mcp(s.url).call("incr", {"key": key})) for s in (a, b, a, b)]
    assert counts == ["1", "2", "3", "4"], counts
    # An answer posted to `b` reaches the call waiting on `a` (pub/sub).
    final = elicit_across(a, b)
    assert final and final["result"]["content"][0]["text"] == \
        'User response: action=accept, content={"email":"a@b.c","username":"ada"}', final
    # "3/m" across both replicas.
    outcomes = []
    for s in (a, b, a, b, a):
        r = Mcp(s.url).call("test_simple_text")
        outcomes.append("ok" if "result" in r and not r["result"].get("isError")
                        else r.get("error", {}).get("data", {}).get("stage"))
    assert outcomes == ["ok"] * 3 + ["rate_limit"] * 2, outcomes


def stop_all(servers):
    for s in servers:
        s.stop()


def assert_never_printed(secret: str, servers):
    for s in servers:
        assert secret not in s.log_text(), s.log_text()
        assert secret not in httpx.get(s.url + "/healthz").text


# ---------------------------------------------------------------------- TLS

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    import trustme

    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server = ca.issue_cert("127.0.0.1")
    server.private_key_pem.write_to_path(str(d / "server.key"))
    (d / "server.pem").write_bytes(b"".join(b.bytes() for b in server.cert_chain_pems))
    client = ca.issue_cert("hangar-replica")
    client.private_key_pem.write_to_path(str(d / "client.key"))
    (d / "client.pem").write_bytes(b"".join(b.bytes() for b in client.cert_chain_pems))
    return d


def tls_redis(workdir: Path, pki: Path, auth_clients: str) -> RedisServer:
    return RedisServer(workdir, "--tls-cert-file", str(pki / "server.pem"),
                       "--tls-key-file", str(pki / "server.key"),
                       "--tls-ca-cert-file", str(pki / "ca.pem"),
                       "--tls-auth-clients", auth_clients, tls=True)


def test_rediss_with_a_private_ca_serves_two_replicas(tmp_path, shared_cache, pki):
    redis = tls_redis(tmp_path / "redis", pki, "no")
    servers = []
    try:
        url = f"rediss://127.0.0.1:{redis.port}"
        servers = replicas(tmp_path, shared_cache,
                           cluster_table(url, f'ca_file = "{pki / "ca.pem"}"'))
        shares_state(*servers)
    finally:
        stop_all(servers)
        redis.stop()


def test_rediss_with_an_untrusted_certificate_stops_the_start(tmp_path, shared_cache, pki):
    redis = tls_redis(tmp_path / "redis", pki, "no")
    try:
        # No ca_file: the system roots do not know the test's CA.
        out = start_fails(tmp_path, shared_cache,
                          cluster_table(f"rediss://127.0.0.1:{redis.port}"))
        assert f"[cluster] redis at 127.0.0.1:{redis.port}" in out, out
        assert "certificate" in out and "UnknownIssuer" in out, out
    finally:
        redis.stop()


def test_a_redis_that_asks_for_a_client_certificate(tmp_path, shared_cache, pki):
    redis = tls_redis(tmp_path / "redis", pki, "yes")
    servers = []
    try:
        url = f"rediss://127.0.0.1:{redis.port}"
        ca = f'ca_file = "{pki / "ca.pem"}"'
        out = start_fails(tmp_path, shared_cache, cluster_table(url, ca))
        assert f"[cluster] redis at 127.0.0.1:{redis.port}" in out, out
        servers = replicas(tmp_path, shared_cache, cluster_table(
            url, f'{ca}\nclient_cert = "{pki / "client.pem"}"\nclient_key = "{pki / "client.key"}"'))
        shares_state(*servers)
    finally:
        stop_all(servers)
        redis.stop()


# ------------------------------------------------------------- AUTH and ACL

def test_requirepass_through_an_env_placeholder(tmp_path, shared_cache):
    redis = RedisServer(tmp_path / "redis", "--requirepass", PASSWORD)
    servers = []
    try:
        url = f"redis://:{{{{ env.HANGAR_TEST_REDIS_PASSWORD }}}}@127.0.0.1:{redis.port}"
        servers = replicas(tmp_path, shared_cache, cluster_table(url),
                           env={"HANGAR_TEST_REDIS_PASSWORD": PASSWORD})
        shares_state(*servers)
        assert_never_printed(PASSWORD, servers)
        # A wrong password, and none at all, stop the start, and say why.
        wrong = f"{PASSWORD}-wrong"
        out = start_fails(tmp_path, shared_cache, cluster_table(url),
                          env={"HANGAR_TEST_REDIS_PASSWORD": wrong})
        assert f"[cluster] redis at 127.0.0.1:{redis.port}" in out, out
        assert "authentication failed" in out.lower(), out
        assert wrong not in out and PASSWORD not in out, out
        out = start_fails(tmp_path, shared_cache, cluster_table(f"redis://127.0.0.1:{redis.port}"))
        assert "NOAUTH" in out, out
        # An unset variable is named, and nothing is connected.
        out = start_fails(tmp_path, shared_cache, cluster_table(url))
        assert "HANGAR_TEST_REDIS_PASSWORD" in out, out
    finally:
        stop_all(servers)
        redis.stop()


def test_an_acl_user(tmp_path, shared_cache):
    redis = RedisServer(tmp_path / "redis", "--user", "default", "off",
                        "--user", "hangar", "on", f">{ACL_PASSWORD}", "~*", "&*", "+@all")
    servers = []
    try:
        url = f"redis://hangar:{ACL_PASSWORD}@127.0.0.1:{redis.port}"
        servers = replicas(tmp_path, shared_cache, cluster_table(url))
        shares_state(*servers)
        assert_never_printed(ACL_PASSWORD, servers)
        # The wrong password for the user.
        bad = f"redis://hangar:{ACL_PASSWORD}x@127.0.0.1:{redis.port}"
        out = start_fails(tmp_path, shared_cache, cluster_table(bad))
        assert "authentication failed" in out.lower(), out
        assert ACL_PASSWORD not in out, out
        # Redis gone: /healthz says so, and still without the password.
        redis.stop()
        health = wait_for(lambda: (h := httpx.get(servers[0].url + "/healthz").json())
                          ["cluster"]["redis"] == "unreachable" and h, 10, "degraded")
        assert f"127.0.0.1:{redis.port}" in health["cluster"]["error"], health
        assert_never_printed(ACL_PASSWORD, servers)
    finally:
        stop_all(servers)
        redis.stop()


# ------------------------------------------------------------ Redis Cluster

def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is a free port too."""
    while True:
        port = free_port()
        if port + 10000 <= 65535:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 10000))
                    return port
                except OSError:
                    pass


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("redis-cluster")
    nodes = []
    try:
        for i in range(3):
            nodes.append(RedisServer(d / f"node-{i}", "--cluster-enabled", "yes",
                                     "--cluster-config-file", str(d / f"node-{i}" / "nodes.conf"),
                                     "--cluster-node-timeout", "2000", port=cluster_port()))
        made = subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in nodes],
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stdout + made.stderr
        for n in nodes:
            wait_for(lambda: "cluster_state:ok" in n.cli("CLUSTER", "INFO"), 30, "cluster_state:ok")
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def test_a_redis_cluster_of_three_masters(tmp_path, shared_cache, redis_cluster):
    # Two of the three nodes named: the third is found from them.
    urls = [f"redis://127.0.0.1:{n.port}" for n in redis_cluster[:2]]
    servers = []
    try:
        servers = replicas(tmp_path, shared_cache, cluster_table(urls))
        shares_state(*servers)
        # A session's hash is under the `{sessions}` hash tag (`-c` follows MOVED).
        c = Mcp(servers[0].url)
        c.initialize()
        key = f"hangar-test-deploy:{RUN}:{{sessions}}:session:{c.session}"
        assert redis_cluster[0].cli("-c", "EXISTS", key) == "1"
    finally:
        stop_all(servers)


def test_a_cluster_node_named_as_one_server_stops_the_start(tmp_path, shared_cache, redis_cluster):
    port = redis_cluster[0].port
    out = start_fails(tmp_path, shared_cache, cluster_table(f"redis://127.0.0.1:{port}"))
    assert f"redis at 127.0.0.1:{port} is a node of a Redis Cluster" in out, out


def test_a_list_naming_a_server_that_is_no_cluster_stops_the_start(tmp_path, shared_cache):
    redis = RedisServer(tmp_path / "redis")
    try:
        out = start_fails(tmp_path, shared_cache, cluster_table([f"redis://127.0.0.1:{redis.port}"]))
        assert f"[cluster] redis at 127.0.0.1:{redis.port}" in out, out
        assert "cluster support disabled" in out, out
    finally:
        redis.stop()
