"""Scale out (`[cluster]`): three replicas behind nginx, sharing state in Redis.

`scripts/cluster` starts everything (Redis if none answers, three `hangar
serve` replicas, nginx on a port of the test's); every request here goes
through nginx, which sends consecutive requests to the replicas in turn, so
one session's requests land on all of them. What the tests hold Hangar to:

* a session opened on one replica is served by every one of them (nginx's
  access log names the replica of each request);
* `notifications/cancelled` sent through the balancer stops the call on
  the replica running it (Redis pub/sub);
* a rate limit and a kv counter hold across replicas, and the DB result
  cache's second tier serves one replica what another fetched;
* `kill -9` of a replica with calls in flight: each of its callers gets the
  balancer's 502 at once, the others their answers, nobody waits;
* `kill -9` of a replica mid-run: nginx skips it and the session goes on
  with no failed call;
* SIGTERM to `scripts/cluster` stops every process it started.
"""

import base64
import json
import queue
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from urllib.parse import urlsplit

from conftest import (DATABASE_URL, HANGAR_BIN, REDIS_URL, ROOT, Mcp, Server, ask_and_answer,
                      free_port, plugin_path, psql, refused, run_hangar, wait_for)

RUN = uuid.uuid4().hex[:10]
PREFIX = f"hangar-test-cluster:{RUN}"
SCHEMA = f"hangar_cluster_{RUN}"
CLUSTER_DIR = ROOT / "target" / "cluster"
REPLICAS = 3


def redis_cli(*args) -> str:
    u = urlsplit(REDIS_URL)
    out = subprocess.run(["redis-cli", "-h", u.hostname, "-p", str(u.port or 6379), *args],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# Users' own accounts: sealed with one key on every replica.
ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode()


def config(workdir: Path, cache: Path, url: str) -> str:
    return f"""
[server]
cache_dir = "{cache}"
plugins = "{workdir / 'plugins'}"
public_url = "{url}"

[credentials]
encryption_key = "{ENCRYPTION_KEY}"

[credentials.paste]
kind = "user-key"
sources = ["user"]

[plugins.http-fetch]
grants = {{ credentials = ["paste"] }}

[cluster]
redis = "{REDIS_URL}"
prefix = "{PREFIX}"

# One key on every replica: a download URL one signs, another checks.
[artifacts]
signing_key = "hangar-test-cluster-signing-key"

[limits]
deadline = "60s"
fuel = 1_000_000_000_000

[[tools]]
name = "test_simple_text"
rate_limit = "5/m"

[[tools]]
name = "slow_compute"
task = "optional"

[connectors.main]
kind = "postgres"
url = "{DATABASE_URL}"
pool_size = 2

[[tools]]
name = "pg.cluster.user"
description = "A user by id, cached a minute"
use = "main"
statement = "SELECT id, name FROM {SCHEMA}.users WHERE id = {{{{ inputs.id }}}}"
inputs.id = {{ type = "integer", required = true }}
cache = {{ ttl = "60s" }}
"""


class Cluster:
    def __init__(self, workdir: Path, cache: Path):
        (workdir / "plugins").mkdir()
        for name in ("echo", "everything", "misbehave", "kv-counter", "wordcount", "csv-report",
                     "http-fetch"):
            (workdir / "plugins" / f"{name}.wasm").write_bytes(plugin_path(name).read_bytes())
        self.addr = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.addr}"
        self.config = workdir / "hangar.toml"
        self.config.write_text(config(workdir, cache, self.url))
        self.log = open(workdir / "cluster.log", "w")
        self.proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "cluster"), "--replicas", str(REPLICAS),
             "--listen", self.addr, "--config", str(self.config)],
            stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "HANGAR_BIN": str(HANGAR_BIN)})
        self.log_path = workdir / "cluster.log"
        deadline = time.monotonic() + 300
        while not (CLUSTER_DIR / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scripts/cluster did not start:\n{self.log_path.read_text()}")
            time.sleep(0.1)

    def pid(self, i: int) -> int:
        return int((CLUSTER_DIR / f"replica-{i}.pid").read_text())

    def replica_url(self, i: int) -> str:
        return "http://" + (CLUSTER_DIR / f"replica-{i}.addr").read_text().strip()

    def tries(self, session: str) -> list[list[str]]:
        """The replicas nginx tried for each request of `session`, in the
        order it logged them (the last one answered)."""
        lines = (CLUSTER_DIR / "access.log").read_text().splitlines()
        return [line.split("upstream=")[1].rsplit(" session=", 1)[0].split(", ")
                for line in lines if line.endswith(f"session={session}")]

    def upstreams(self, session: str) -> list[str]:
        """The replica that answered each request of `session`."""
        return [tried[-1] for tried in self.tries(session)]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.log.close()
        return code


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, shared_cache):
    psql(f"""DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA};
             CREATE TABLE {SCHEMA}.users (id int PRIMARY KEY, name text);
             INSERT INTO {SCHEMA}.users VALUES (1, 'ada'), (2, 'brian');""")
    c = Cluster(tmp_path_factory.mktemp("cluster"), shared_cache)
    yield c
    if c.proc.poll() is None:
        c.stop()
    psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    keys = redis_cli("--scan", "--pattern", f"{PREFIX}:*").split()
    if keys:
        redis_cli("DEL", *keys)


def session(cluster) -> Mcp:
    c = Mcp(cluster.url)
    c.initialize()
    return c


def text(reply) -> str:
    assert "result" in reply, reply
    assert not reply["result"].get("isError"), reply
    return reply["result"]["content"][0]["text"]


def test_every_replica_reaches_redis(cluster):
    for i in range(1, REPLICAS + 1):
        health = httpx.get(cluster.replica_url(i) + "/healthz").json()
        assert health["status"] == "ok", health
        assert health["cluster"]["redis"] == "ok", health
    nodes = {httpx.get(cluster.replica_url(i) + "/healthz").json()["cluster"]["node"]
             for i in range(1, REPLICAS + 1)}
    assert len(nodes) == REPLICAS


def test_one_session_is_served_by_every_replica(cluster):
    c = session(cluster)
    for i in range(12):
        assert text(c.call("echo", {"text": f"hi {i}"})) == f"hi {i}"
    # The session lives in Redis, with the session timeout as its TTL.
    assert int(redis_cli("PTTL", f"{PREFIX}:session:{c.session}")) > 0
    used = cluster.upstreams(c.session)
    assert len(used) == 13  # initialized, 12 calls (initialize has no session yet)
    assert len(set(used)) == REPLICAS, used
    # Each replica counted some of the calls.
    for i in range(1, REPLICAS + 1):
        metrics = httpx.get(cluster.replica_url(i) + "/metrics").text
        line = [m for m in metrics.splitlines()
                if m.startswith('hangar_calls_total{tool="echo",stage="-",outcome="ok"}')]
        assert line and float(line[0].split()[-1]) >= 1, (i, line)


def test_a_session_ended_on_one_replica_is_gone_on_all(cluster):
    c = session(cluster)
    assert text(c.call("echo", {"text": "x"})) == "x"
    r = c.http.delete("/mcp", headers={"mcp-session-id": c.session})
    assert r.status_code == 200
    for _ in range(REPLICAS):
        r = c.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        assert r.status_code == 404, r.text
    assert redis_cli("EXISTS", f"{PREFIX}:session:{c.session}") == "0"


def test_log_level_set_on_one_replica_holds_on_the_others(cluster):
    c = session(cluster)

    def messages():
        reply = c.call("test_tool_with_logging")
        assert "result" in reply, reply
        return len([e for e in reply["_events"] if e.get("method") == "notifications/message"])

    # The tool logs three messages at info: none at level "error", all three
    # at "info", whichever replica runs the call.
    for level, expected in (("error", 0), ("info", 3)):
        assert "result" in c.request("logging/setLevel", {"level": level})
        assert redis_cli("HGET", f"{PREFIX}:session:{c.session}", "level") == level
        assert [messages() for _ in range(REPLICAS)] == [expected] * REPLICAS


def test_a_cancellation_through_the_balancer_stops_the_call_on_another_replica(cluster):
    c = session(cluster)
    reply = {}

    def call():
        reply.update(c.call("spin", {}, id="cluster-cancel"))

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.5)
    assert t.is_alive(), "the call ended before it was cancelled"
    c.notify("notifications/cancelled", {"requestId": "cluster-cancel", "reason": "test"})
    t.join(timeout=30)
    assert not t.is_alive(), "cancellation did not stop the guest (deadline is 60 s)"
    assert "result" not in reply and "error" not in reply, reply
    # The call and the cancellation went to two different replicas.
    call_and_cancel = cluster.upstreams(c.session)[-2:]
    assert len(set(call_and_cancel)) == 2, call_and_cancel


def test_an_answer_to_an_elicitation_reaches_the_replica_that_asked(cluster):
    c = Mcp(cluster.url)
    r = c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                                 "clientInfo": {"name": "cluster-test", "version": "0"}})
    assert "result" in r, r
    c.notify("notifications/initialized")
    asked, final = ask_and_answer(
        cluster, c, "test_elicitation", {"message": "Who are you?"},
        lambda req: {"jsonrpc": "2.0", "id": req["id"],
                     "result": {"action": "accept", "content": {"username": "ada", "email": "a@b.c"}}})
    assert asked["method"] == "elicitation/create"
    assert final["result"]["content"][0]["text"] == \
        'User response: action=accept, content={"email":"a@b.c","username":"ada"}'
    # The answer (logged first: it ended first) went to another replica
    # than the call; pub/sub took it to the one that asked.
    answer, call = cluster.upstreams(c.session)[-2:]
    assert answer != call


def test_resource_updates_reach_a_stream_on_another_replica(cluster):
    c = session(cluster)
    messages = queue.Queue()
    http = httpx.Client(base_url=cluster.url, timeout=httpx.Timeout(5, read=None))
    stream = http.send(http.build_request("GET", "/mcp", headers={
        "accept": "text/event-stream", "mcp-session-id": c.session}), stream=True)
    assert stream.status_code == 200

    def read():
        try:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    messages.put(json.loads(line[6:])["params"]["uri"])
        except httpx.HTTPError:
            pass

    threading.Thread(target=read, daemon=True).start()
    try:
        watched, static, other = "test://watched-resource", "test://static-text", "test://not-subscribed"
        # Subscribed through other replicas than the stream's.
        for uri in (watched, static):
            assert c.request("resources/subscribe", {"uri": uri})["result"] == {}
        # Announced by guests on every replica in turn.
        for uri in (watched, other, static, watched):
            assert not c.call("test_touch_resource", {"uri": uri})["result"]["isError"]
        got = sorted(messages.get(timeout=10) for _ in range(3))
        assert got == sorted([watched, static, watched])
        # Nothing else came (no copy, not the unsubscribed one): the next is this marker.
        assert not c.call("test_touch_resource", {"uri": static})["result"]["isError"]
        assert messages.get(timeout=10) == static
        assert len(set(cluster.upstreams(c.session)[-5:])) == REPLICAS
    finally:
        stream.close()
        http.close()


def test_a_rate_limit_holds_across_replicas(cluster):
    c = session(cluster)
    outcomes = []
    for i in range(8):
        r = c.call("test_simple_text")
        outcomes.append("ok" if "result" in r and not r["result"].get("isError")
                        else r.get("error", {}).get("data", {}).get("stage"))
    # Five per minute in all, though the calls went to three replicas.
    assert outcomes == ["ok"] * 5 + ["rate_limit"] * 3, outcomes
    assert len(set(cluster.upstreams(c.session)[-8:])) == REPLICAS


def test_a_kv_counter_is_shared(cluster):
    c = session(cluster)
    key = f"visits-{RUN}"
    counts = [text(c.call("incr", {"key": key})) for _ in range(6)]
    assert counts == [str(n) for n in range(1, 7)], counts
    assert len(set(cluster.upstreams(c.session)[-6:])) == REPLICAS
    # In the cluster's Redis (no [kv] table: kv defaults to it).
    assert redis_cli("GET", f"hangar:kv:{{kv-counter}}:{key}") == "6"
    redis_cli("DEL", f"hangar:kv:{{kv-counter}}:{key}")
    redis_cli("ZREM", "hangar:kv:{kv-counter}", key)


def test_a_task_runs_on_one_replica_and_is_read_on_every_one(cluster):
    """MCP 2026-07-28 tasks keep their records in the shared kv (Redis): a
    tasks/get that lands on a replica not running the task sees it working,
    not lost, and then sees its result."""
    from types import SimpleNamespace

    from test_mcp_2026 import modern

    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    lb = SimpleNamespace(url=cluster.url)
    r = modern(lb, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 2, "label": "shared"}},
               caps=caps)
    task_id = r["result"]["taskId"]
    seen = []

    def ended():
        g = modern(lb, "tasks/get", {"taskId": task_id}, caps=caps, headers={"mcp-name": task_id})
        seen.append(g["result"]["status"])
        return g["result"] if seen[-1] != "working" else None

    done = wait_for(ended, 60, f"task {task_id} to end")
    assert done["status"] == "completed", (done, seen)
    assert done["result"]["content"][0]["text"] == "shared: computed after 2 s"
    # Round robin sent the polls to every replica while the task ran.
    assert seen.count("working") >= REPLICAS, seen


def test_the_result_cache_is_shared(cluster):
    def rows(url):
        c = Mcp(url)
        c.initialize()
        return json.loads(text(c.call("pg.cluster.user", {"id": 2})))

    def stats(i):
        return httpx.get(cluster.replica_url(i) + "/healthz").json()["result_cache"]["pg.cluster.user"]

    assert rows(cluster.replica_url(1)) == [{"id": 2, "name": "brian"}]
    psql(f"UPDATE {SCHEMA}.users SET name = 'changed' WHERE id = 2")
    # Replica 2 has never run the query: the first replica's result, from Redis.
    assert rows(cluster.replica_url(2)) == [{"id": 2, "name": "brian"}]
    assert stats(2) == {"hits": 0, "misses": 1, "shared_hits": 1}
    assert stats(1)["shared_hits"] == 0


def test_files_move_between_replicas(cluster):
    """Upload through one replica, call through another, download through a
    third: the replicas share the files' directory and the signing key."""
    c = session(cluster)
    r1, r2, r3 = (cluster.replica_url(i) for i in (1, 2, 3))
    up = httpx.post(r1 + "/uploads", headers={"mcp-session-id": c.session}, timeout=30,
                    files=[("file", ("notes.txt", b"one two three\nfour", "text/plain"))])
    assert up.status_code == 201, up.text
    [handle] = [u["handle"] for u in up.json()["uploads"]]
    # Listed, and usable by a tool, on a replica that did not store it.
    listed = httpx.get(r3 + "/uploads", headers={"mcp-session-id": c.session}).json()["uploads"]
    assert handle in [u["handle"] for u in listed], listed
    on2 = Mcp(r2)
    on2.session = c.session
    r = on2.call("wordcount", {"files": [handle]})
    assert r["result"]["isError"] is False, r
    assert r["result"]["structuredContent"]["files"][0]["words"] == 4, r
    # Another session still cannot use it, on any replica.
    other = Mcp(r3)
    other.initialize()
    r = other.call("wordcount", {"files": [handle]})
    assert r.get("result", {}).get("isError") or "error" in r, r
    # An artifact made on replica 2: listed and read on 3, downloaded from 1.
    r = on2.call("csv_report", {"rows": [{"a": 1}]})
    assert r["result"]["isError"] is False, r
    [meta] = r["result"]["_meta"]["hangar/artifacts"]
    on3 = Mcp(r3)
    on3.session = c.session
    assert meta["uri"] in [x["uri"] for x in on3.request("resources/list")["result"]["resources"]]
    [item] = on3.request("resources/read", {"uri": meta["uri"]})["result"]["contents"]
    assert item["text"] == "a\r\n1\r\n", item
    url = urlsplit(meta["url"])
    download = httpx.get(r1 + url.path + "?" + url.query)
    assert download.status_code == 200 and download.content == b"a\r\n1\r\n", download.text
    # An altered signature is refused there too.
    assert httpx.get(r1 + url.path + "?" + url.query.replace("sig=", "sig=00")).status_code == 403


def hangar_token(cluster, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(HANGAR_BIN), "token", *args, "--config", str(cluster.config)],
                          capture_output=True, text=True, timeout=60)


def pasted(url: str, headers: dict) -> tuple[bool, str]:
    """What the guest's `credentials.get("paste")` gives a call to `url`."""
    c = Mcp(url)
    c.http.headers.update(headers)
    r = c.call("credential", {"provider": "paste"})
    assert "result" in r, r
    return r["result"]["isError"], r["result"]["content"][0]["text"]


def test_a_token_and_a_connection_made_through_one_replica_serve_every_replica(cluster):
    """Issue 63: a personal token made with `hangar token` (kv in the
    cluster's Redis) is taken by every replica; a key connected through
    replica 1 is what a guest on replica 2 gets; disconnecting on replica 3
    and revoking the token take effect everywhere."""
    made = hangar_token(cluster, "create", f"ada-{RUN}")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("hgr_"), made.stdout
    bearer = {"authorization": f"Bearer {token}"}
    one, two, three = (cluster.replica_url(i) for i in (1, 2, 3))
    # Not connected yet, on any replica.
    is_error, text = pasted(two, bearer)
    assert is_error and 'no credentials for "paste"' in text, text
    r = httpx.post(f"{one}/connect/paste", json={"key": f"ada-key-{RUN}"}, headers=bearer)
    assert r.status_code == 200, r.text
    assert pasted(two, bearer) == (False, f"ada-key-{RUN}")
    listed = httpx.get(f"{three}/connect", headers=bearer).json()["providers"]
    assert [(p["name"], p["connected"]) for p in listed] == [("paste", True)], listed
    # Disconnected through replica 3: gone on replica 2 once what it read
    # lately (5 s) is stale.
    assert httpx.delete(f"{three}/connect/paste", headers=bearer).status_code == 200
    wait_for(lambda: time.sleep(0.25) or pasted(two, bearer)[0], 15,
             "replica 2 to see the disconnection")
    # The store holds no key in the clear, and no token.
    keys = redis_cli("--scan", "--pattern", f"{PREFIX}:*").split()
    for key in keys:
        if redis_cli("TYPE", key) == "string":
            value = redis_cli("GET", key)
            assert token[4:] not in value and f"ada-key-{RUN}" not in value, key
    # Revoked with the command: refused by every replica at once.
    revoked = hangar_token(cluster, "revoke", f"ada-{RUN}")
    assert revoked.returncode == 0, revoked.stderr
    for url in (one, two, three):
        r = httpx.get(f"{url}/connect", headers=bearer)
        assert r.status_code == 401, (url, r.status_code, r.text)


def test_calls_in_flight_on_a_killed_replica_end_with_an_answer_or_an_error_never_a_hang(cluster):
    """Nine slow calls (no session: each POST stands alone) started one by
    one, so the balancer's round robin gives each replica three; one
    replica is killed while they run. Each caller hears back within the
    call's own time plus a margin: the balancer's error for the calls the
    dead replica held, the answer for the others. None hangs, and the
    others keep serving."""
    victim = cluster.pid(3)
    victim_addr = cluster.replica_url(3).removeprefix("http://")
    results = queue.Queue()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "slow_compute", "arguments": {"seconds": 3}}}

    def slow(i):
        started = time.monotonic()
        try:
            r = httpx.post(cluster.url + "/mcp", json=body, timeout=60,
                           headers={"accept": "application/json, text/event-stream",
                                    "mcp-protocol-version": "2025-11-25"})
            outcome = "answer" if r.status_code == 200 and "computed after 3" in r.text else f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            outcome = f"failed {type(e).__name__}"
        results.put((i, outcome, time.monotonic() - started))

    threads = [threading.Thread(target=slow, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    time.sleep(1)
    os.kill(victim, signal.SIGKILL)
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a caller hung after the replica died"
    got = sorted(results.queue)
    assert len(got) == 9
    # Every caller heard back before its client's 60 s timeout (a hang ends
    # there, as a ReadTimeout); 30 s is 10 times the call's own 3 s.
    assert all(took < 30 for _, _, took in got), got
    answered = [g for g in got if g[1] == "answer"]
    failed = [g for g in got if g[1] != "answer"]
    assert len(answered) >= 4 and failed, got
    assert all(g[1] == "HTTP 502" for g in failed), got
    wait_for(lambda: refused(victim_addr), 10, "the killed replica's port to refuse connections")
    # The others keep serving new calls through the balancer.
    c = session(cluster)
    for i in range(6):
        assert text(c.call("echo", {"text": f"after {i}"})) == f"after {i}"


def test_a_replica_killed_mid_run_costs_the_session_no_call(cluster):
    c = session(cluster)
    for i in range(6):
        assert text(c.call("echo", {"text": f"before {i}"})) == f"before {i}"
    victim = cluster.pid(2)
    victim_addr = cluster.replica_url(2).removeprefix("http://")
    os.kill(victim, signal.SIGKILL)
    # Gone when its port refuses connections (a killed process's threads
    # take a moment to exit; a request sent before that fails with it).
    wait_for(lambda: refused(victim_addr), 10, "the killed replica's port to refuse connections")
    for i in range(12):
        assert text(c.call("echo", {"text": f"after {i}"})) == f"after {i}"
    # nginx noticed the replica was gone by trying it once and passing that
    # request on to the next one; from then on it sends it nothing.
    tries = cluster.tries(c.session)[-12:]
    noticed = [i for i, t in enumerate(tries) if len(t) > 1 and t[0] == victim_addr]
    assert noticed, tries
    served_after = [t[-1] for t in tries[noticed[0]:]]
    assert victim_addr not in served_after, tries
    assert len(set(served_after)) == REPLICAS - 2, tries
    # The balancer still answers for the cluster.
    assert httpx.get(cluster.url + "/healthz").status_code == 200


def test_sigterm_stops_everything_the_script_started(cluster):
    pids = [cluster.pid(i) for i in range(1, REPLICAS + 1)]
    nginx = int((CLUSTER_DIR / "nginx.pid").read_text())
    assert cluster.stop() == 0, cluster.log_path.read_text()

    def dead(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return " Z " in Path(f"/proc/{pid}/stat").read_text()

    for pid in pids + [nginx]:
        assert wait_for(lambda: dead(pid), 10, f"pid {pid} to stop")
    assert not (CLUSTER_DIR / "ready").exists()


def test_a_bad_cluster_table_is_a_config_error(tmp_path):
    cfg = tmp_path / "hangar.toml"
    cfg.write_text('[cluster]\nredis = "http://127.0.0.1:6379"\n')
    r = run_hangar("check", "--config", str(cfg))
    assert r.returncode != 0
    assert "[cluster] redis must be a redis:// or rediss:// URL" in r.stderr + r.stdout
    cfg.write_text('[cluster]\nredis = "redis://127.0.0.1:6379"\nreplicas = 3\n')
    r = run_hangar("check", "--config", str(cfg))
    assert r.returncode != 0
    assert "replicas" in r.stderr + r.stdout
    # Without one signing key for all, a download URL signed on one replica
    # would fail on the next: start-up refuses.
    cfg.write_text('[cluster]\nredis = "redis://127.0.0.1:6379"\n')
    r = run_hangar("check", "--config", str(cfg))
    assert r.returncode != 0
    assert "[cluster] needs [artifacts] signing_key" in r.stderr + r.stdout
    r = run_hangar("serve", "--config", str(cfg), "--listen", "127.0.0.1:0")
    assert r.returncode != 0
    assert "[cluster] needs [artifacts] signing_key" in r.stderr + r.stdout


def test_a_replica_that_loses_redis_serves_on_and_says_it_is_degraded(tmp_path, shared_cache):
    """No balancer here: one replica, and a Redis of the test's own it kills."""
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                              "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = None
    try:
        wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                        text=True).stdout.strip() == "PONG", 10, "redis to start")
        server = Server(tmp_path, ["echo"], f'[cluster]\nredis = "redis://127.0.0.1:{port}"\n'
                        '[artifacts]\nsigning_key = "hangar-test-cluster-signing-key"\n',
                        cache_dir=shared_cache).start()
        c = Mcp(server.url)
        c.initialize()
        assert text(c.call("echo", {"text": "shared"})) == "shared"
        assert httpx.get(server.url + "/healthz").json()["cluster"]["redis"] == "ok"
        redis.kill()
        redis.wait(10)
        # The session it holds, and calls that need nothing shared, go on.
        assert text(c.call("echo", {"text": "alone"})) == "alone"
        health = httpx.get(server.url + "/healthz").json()
        assert health["status"] == "degraded", health
        assert health["cluster"]["redis"] == "unreachable", health
        assert "127.0.0.1:" + str(port) in health["cluster"]["error"]
        # A new session is kept on this replica only, and works.
        d = Mcp(server.url)
        d.initialize()
        assert text(d.call("echo", {"text": "new"})) == "new"
    finally:
        if server:
            server.stop()
        if redis.poll() is None:
            redis.kill()
            redis.wait(10)
