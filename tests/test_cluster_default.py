"""`scripts/cluster` with no `--config`: the shipped hangar.toml, shared.

The script writes the shipped config with a `[cluster]` table (and its
`[kv]` moved to Redis) naming the Redis it uses, beside hangar.toml so its
relative paths (plugins/, the demo SQLite file) keep their meaning, and
runs three replicas of it behind nginx. One MCP session goes on through
every replica, also after one is killed.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conftest import HANGAR_BIN, REDIS_URL, ROOT, Mcp, free_port, refused, wait_for

REPLICAS = 3
GENERATED = ROOT / ".hangar-cluster.toml"


class DefaultCluster:
    def __init__(self, workdir: Path, cache: Path):
        self.cache = cache
        self.dir = workdir / "cluster"
        self.addr = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.addr}"
        self.log_path = workdir / "cluster.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "cluster"), "--replicas", str(REPLICAS),
             "--listen", self.addr, "--dir", str(self.dir),
             # The run's compiled components: what one test server compiled,
             # the replicas do not compile again, and the other way round.
             "--cache-dir", str(cache)],
            stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "HANGAR_BIN": str(HANGAR_BIN), "REDIS_URL": REDIS_URL})
        # Against a hang only: the replicas compile the shipped plugins
        # (Python and JavaScript ones too) on a cold cache, which under
        # scripts/stress's load passed 300 s.
        deadline = time.monotonic() + 900
        while not (self.dir / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scripts/cluster did not start:\n{self.log_path.read_text()}")
            time.sleep(0.1)

    def replica_addr(self, i: int) -> str:
        return (self.dir / f"replica-{i}.addr").read_text().strip()

    def served(self, session: str) -> list[str]:
        """The replica that answered each request of `session` (nginx's log)."""
        lines = (self.dir / "access.log").read_text().splitlines()
        return [line.split("upstream=")[1].rsplit(" session=", 1)[0].split(", ")[-1]
                for line in lines if line.endswith(f"session={session}")]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.log.close()
        return code


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, shared_cache):
    c = DefaultCluster(tmp_path_factory.mktemp("default-cluster"), shared_cache)
    yield c
    if c.proc.poll() is None:
        c.stop()
    GENERATED.unlink(missing_ok=True)


def text(reply) -> str:
    assert "result" in reply, reply
    assert not reply["result"].get("isError"), reply
    return reply["result"]["content"][0]["text"]


def test_the_generated_config_is_the_shipped_one_with_a_cluster_table(cluster):
    generated = GENERATED.read_text()
    shipped = (ROOT / "hangar.toml").read_text()
    assert f'[cluster]\nredis = "{REDIS_URL}"' in generated
    assert 'backend = "redis"' in generated
    # Everything else is the shipped file, line for line.
    kept = [line for line in shipped.splitlines()
            if not line.startswith(("backend =", "url =", "cache_dir ="))]
    assert all(line in generated.splitlines() for line in kept)
    # --cache-dir: the run's compiled components.
    assert f'cache_dir = "{cluster.cache}"' in generated.splitlines()
    for i in range(1, REPLICAS + 1):
        health = httpx.get(f"http://{cluster.replica_addr(i)}/healthz").json()
        assert health["cluster"]["redis"] == "ok", health


def test_a_session_goes_on_through_every_replica_and_after_one_is_killed(cluster):
    c = Mcp(cluster.url)
    c.initialize()
    for i in range(12):
        assert text(c.call("echo", {"text": f"hi {i}"})) == f"hi {i}"
    # The shipped config's DB tool works on every replica too.
    for _ in range(REPLICAS):
        reply = c.call("demo.products.get", {"id": 1})
        assert "result" in reply and not reply["result"].get("isError"), reply
    assert len(set(cluster.served(c.session))) == REPLICAS, cluster.served(c.session)

    victim = int((cluster.dir / "replica-2.pid").read_text())
    os.kill(victim, signal.SIGKILL)
    # Gone when its port refuses connections (a request sent while the
    # killed process's threads are exiting fails with them).
    wait_for(lambda: refused(cluster.replica_addr(2)), 10,
             "the killed replica's port to refuse connections")
    for i in range(12):
        assert text(c.call("echo", {"text": f"after {i}"})) == f"after {i}"
    after = cluster.served(c.session)[-12:]
    assert cluster.replica_addr(2) not in after[-6:], after


def test_sigterm_stops_the_cluster(cluster):
    assert cluster.stop() == 0, cluster.log_path.read_text()
    assert not (cluster.dir / "ready").exists()
