"""State: the `hangar:plugin/kv` import, one namespace per plugin.

What these tests hold the host to (the `kv-counter` test guest has tools
`incr {key, by?}`, `get {key}`, `set {key, value, ttl_ms?}` and `del {key}`,
answering text, `(absent)` for a missing key, and a tool error
`kv error: <kind>: <message>` when the host answers a kv error):

* **State outlives a call**: a counter counts across calls (each call is a
  fresh instance), and with the embedded backend across a restart on the
  same `cache_dir`.
* **One namespace per plugin**: the same component under two file names
  sees two sets of keys.
* **TTL**: a key set with `ttl_ms` reads as absent once that has passed.
* **Bounds**: a key over `max_key_bytes`, a value over `max_value_bytes`, a
  key past `max_keys` are typed errors the guest reports (`too-large`,
  `quota`): a tool error with isError true; the server keeps serving.
* **Redis**: with `[kv] backend = "redis"` two Hangar processes share a
  plugin's counter and its `max_keys`.
* **Config**: a bad `[kv]` is a problem `hangar check` reports.

The Redis tests use the suite's Redis (tests/services.py: REDIS_URL or
127.0.0.1:6379 when it answers, else a private one) under a key prefix
unique to the run, and delete only their own keys. No test asserts a duration; the TTL test
waits for the TTL to pass.
"""

import shutil
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import REDIS_URL, Mcp, Server, plugin_path, run_hangar

PLUGIN = "kv-counter"
TWIN = "kv-twin"  # the same component under another name: another namespace
RUN = uuid.uuid4().hex[:12]
REDIS_PREFIX = f"hangar-test:{RUN}"


# --- a minimal Redis client, for set-up and clean-up only ---------------------------------


def redis_command(*args):
    """Sends one command (RESP) to REDIS_URL; answers the decoded reply."""
    u = urlsplit(REDIS_URL)
    with socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=5) as s:
        out = f"*{len(args)}\r\n".encode()
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)
        return _read_reply(s.makefile("rb"))


def _read_reply(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind in (b"+", b":"):
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [_read_reply(f) for _ in range(int(rest))]
    raise RuntimeError(f"unexpected reply {line!r}")


def redis_keys(pattern):
    keys, cursor = [], "0"
    while True:
        cursor, batch = redis_command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        keys += batch
        if cursor in ("0", b"0"):
            return keys


# --- servers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launch(tmp_path_factory, shared_cache):
    """Starts servers whose plugins folder holds `kv-counter` (and `kv-twin`,
    a copy with tools prefixed `twin.`); stops them when the module ends."""
    servers = []

    def start(config="", twin=False, cache_dir=None, workdir=None):
        workdir = workdir or tmp_path_factory.mktemp("hangar-kv")
        if twin:
            config += f'\n[plugins.{TWIN}]\nprefix = "twin."\n'
        server = Server(workdir, ("echo", PLUGIN), config, cache_dir or shared_cache)
        if twin:
            shutil.copy(plugin_path(PLUGIN), server.plugins_dir / f"{TWIN}.wasm")
        servers.append(server.start())
        return server

    yield start
    for s in servers:
        s.stop()
    for key in redis_keys(f"{REDIS_PREFIX}*"):
        redis_command("DEL", key)


def redis_config(prefix=REDIS_PREFIX, extra=""):
    return f'\n[kv]\nbackend = "redis"\nurl = "{REDIS_URL}"\nprefix = "{prefix}"\n{extra}'


BACKENDS = ["embedded", "redis"]


def backend_config(backend, extra=""):
    if backend == "redis":
        return redis_config(extra=extra)
    return f"\n[kv]\n{extra}" if extra else ""


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, launch, tmp_path_factory):
    """Default bounds, with the twin plugin; its own kv file (embedded)."""
    return launch(backend_config(request.param), twin=True,
                  cache_dir=tmp_path_factory.mktemp("kv-cache"))


BOUNDS = "max_key_bytes = 16\nmax_value_bytes = 64\nmax_keys = 3\n"


@pytest.fixture(scope="module", params=BACKENDS)
def bounded(request, launch, tmp_path_factory):
    """Small bounds, and a namespace no other test writes to."""
    prefix = f"{REDIS_PREFIX}:bounded"
    config = (redis_config(prefix, BOUNDS) if request.param == "redis"
              else backend_config("embedded", BOUNDS))
    return launch(config, cache_dir=tmp_path_factory.mktemp("kv-cache"))


# --- helpers ------------------------------------------------------------------------------


def call(server, tool, **arguments):
    c = Mcp(server.url)
    c.http.timeout = httpx.Timeout(30)
    return c.call(tool, arguments)


def text(server, tool, **arguments):
    r = call(server, tool, **arguments)
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]["content"][0]["text"]


def kv_error(server, tool, **arguments):
    """The text of a kv error the guest reported as a tool error."""
    r = call(server, tool, **arguments)
    assert "result" in r, r
    assert r["result"].get("isError") is True, r
    message = r["result"]["content"][0]["text"]
    assert message.startswith("kv error: "), message
    return message


def unique(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def still_serving(server):
    assert server.alive()
    assert text(server, "echo", text="still here") == "still here"


# --- 1. state outlives a call -------------------------------------------------------------


def test_a_counter_survives_calls(server):
    key = unique("hits")
    assert [text(server, "incr", key=key) for _ in range(3)] == ["1", "2", "3"]
    assert text(server, "incr", key=key, by=10) == "13"
    assert text(server, "incr", key=key, by=-20) == "-7"
    assert text(server, "get", key=key) == "-7"


def test_concurrent_increments_are_not_lost(server):
    key = unique("busy")
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: text(server, "incr", key=key), range(40)))
    assert sorted(int(a) for a in answers) == list(range(1, 41))
    assert text(server, "get", key=key) == "40"


def test_set_get_and_delete(server):
    key = unique("greeting")
    assert text(server, "get", key=key) == "(absent)"
    assert text(server, "set", key=key, value="héllo") == "ok"
    assert text(server, "get", key=key) == "héllo"
    assert text(server, "set", key=key, value="again") == "ok"
    assert text(server, "get", key=key) == "again"
    assert text(server, "del", key=key) == "ok"
    assert text(server, "get", key=key) == "(absent)"
    assert text(server, "del", key=key) == "ok"  # deleting an absent key is fine


def test_incrementing_a_value_that_is_not_an_integer_is_invalid(server):
    key = unique("word")
    text(server, "set", key=key, value="seven")
    assert kv_error(server, "incr", key=key).startswith("kv error: invalid:")
    assert text(server, "get", key=key) == "seven"
    assert kv_error(server, "get", key="").startswith("kv error: invalid:")


def test_a_counter_survives_a_restart_with_the_embedded_store(launch, tmp_path_factory):
    cache = tmp_path_factory.mktemp("kv-restart-cache")
    workdir = tmp_path_factory.mktemp("kv-restart")
    first = launch(cache_dir=cache, workdir=workdir)
    assert text(first, "incr", key="boots") == "1"
    assert text(first, "incr", key="boots") == "2"
    first.stop()
    second = launch(cache_dir=cache, workdir=workdir)
    assert text(second, "incr", key="boots") == "3"
    assert (cache / "kv.sqlite3").exists()


# --- 2. one namespace per plugin ----------------------------------------------------------


def test_two_plugins_with_the_same_key_are_isolated(server):
    key = unique("shared-name")
    assert text(server, "incr", key=key, by=5) == "5"
    assert text(server, "twin.get", key=key) == "(absent)"
    assert text(server, "twin.incr", key=key) == "1"
    assert text(server, "get", key=key) == "5"
    text(server, "twin.del", key=key)
    assert text(server, "get", key=key) == "5"


# --- 3. TTL -------------------------------------------------------------------------------


def test_a_key_expires_after_its_ttl(server):
    key, kept = unique("short-lived"), unique("kept")
    assert text(server, "set", key=key, value="soon gone", ttl_ms=1500) == "ok"
    assert text(server, "set", key=kept, value="stays") == "ok"
    assert text(server, "get", key=key) == "soon gone"
    end = time.monotonic() + 30
    while text(server, "get", key=key) != "(absent)":
        assert time.monotonic() < end, "the key never expired"
        time.sleep(0.25)
    assert text(server, "get", key=kept) == "stays"
    # An expired counter starts again from zero.
    text(server, "set", key=key, value="41", ttl_ms=300)
    time.sleep(0.6)
    assert text(server, "incr", key=key) == "1"


def test_a_zero_ttl_is_invalid(server):
    message = kv_error(server, "set", key=unique("zero"), value="x", ttl_ms=0)
    assert message.startswith("kv error: invalid:"), message


# --- 4. bounds ----------------------------------------------------------------------------


def test_an_oversized_key_is_a_typed_error(bounded):
    message = kv_error(bounded, "set", key="k" * 17, value="x")
    assert message == "kv error: too-large: key of 17 bytes exceeds the limit of 16 bytes"
    assert kv_error(bounded, "incr", key="k" * 17).startswith("kv error: too-large:")
    assert kv_error(bounded, "get", key="k" * 17).startswith("kv error: too-large:")
    assert text(bounded, "get", key="k" * 16) == "(absent)"
    still_serving(bounded)


def test_an_oversized_value_is_a_typed_error(bounded):
    message = kv_error(bounded, "set", key="big", value="v" * 65)
    assert message == "kv error: too-large: value of 65 bytes exceeds the limit of 64 bytes"
    assert text(bounded, "get", key="big") == "(absent)"
    still_serving(bounded)


def test_too_many_keys_is_a_quota_error(bounded):
    for k in ("a", "b", "c"):
        assert text(bounded, "set", key=k, value=k) == "ok"
    assert kv_error(bounded, "set", key="d", value="d").startswith("kv error: quota:")
    assert kv_error(bounded, "incr", key="d").startswith("kv error: quota:")
    # Replacing or incrementing a key the plugin holds adds nothing.
    assert text(bounded, "set", key="a", value="again") == "ok"
    assert text(bounded, "set", key="b", value="1") == "ok"
    assert text(bounded, "incr", key="b") == "2"
    # Deleting one makes room for another.
    text(bounded, "del", key="c")
    assert text(bounded, "set", key="d", value="d") == "ok"
    still_serving(bounded)
    for k in ("a", "b", "d"):
        text(bounded, "del", key=k)


# --- 5. Redis: two processes, one state ---------------------------------------------------


@pytest.fixture(scope="module")
def redis_pair(launch):
    config = redis_config(f"{REDIS_PREFIX}:pair", "max_keys = 3\n")
    return launch(config), launch(config)


def test_two_processes_share_a_counter_through_redis(redis_pair):
    a, b = redis_pair
    key = unique("shared")
    assert text(a, "incr", key=key) == "1"
    assert text(b, "incr", key=key) == "2"
    assert text(a, "incr", key=key, by=5) == "7"
    assert text(b, "get", key=key) == "7"
    text(b, "del", key=key)
    assert text(a, "get", key=key) == "(absent)"


def test_concurrent_increments_from_two_processes_add_up(redis_pair):
    key = unique("both")
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: text(redis_pair[i % 2], "incr", key=key), range(40)))
    assert text(redis_pair[0], "get", key=key) == "40"
    text(redis_pair[1], "del", key=key)


def test_two_processes_share_max_keys_through_redis(redis_pair):
    a, b = redis_pair
    keys = [unique("q") for _ in range(4)]
    assert text(a, "set", key=keys[0], value="1") == "ok"
    assert text(b, "set", key=keys[1], value="2") == "ok"
    assert text(a, "set", key=keys[2], value="3") == "ok"
    assert kv_error(b, "set", key=keys[3], value="4").startswith("kv error: quota:")
    for k in keys[:3]:
        text(a, "del", key=k)


def test_redis_keys_carry_the_prefix_and_the_plugin(redis_pair):
    a, _ = redis_pair
    key = unique("layout")
    text(a, "set", key=key, value="v")
    assert redis_command("GET", f"{REDIS_PREFIX}:pair:{{{PLUGIN}}}:{key}") == b"v"
    text(a, "del", key=key)
    assert redis_command("EXISTS", f"{REDIS_PREFIX}:pair:{{{PLUGIN}}}:{key}") == "0"


# --- 6. config ----------------------------------------------------------------------------


def check(tmp_path, kv):
    plugins = tmp_path / "plugins"
    plugins.mkdir(exist_ok=True)
    shutil.copy(plugin_path(PLUGIN), plugins / f"{PLUGIN}.wasm")
    config = tmp_path / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{tmp_path / "cache"}"\n[kv]\n{kv}')
    return run_hangar("check", "--config", str(config), "--plugins", str(plugins))


def test_check_reports_a_bad_kv_section(tmp_path):
    out = check(tmp_path, "max_keys = 100\n")
    assert out.returncode == 0, out.stdout + out.stderr

    out = check(tmp_path, "max_keys = 0\n")
    assert out.returncode != 0
    assert "error kv: max_keys must be at least 1" in out.stdout, out.stdout

    out = check(tmp_path, 'backend = "redis"\nurl = "http://user:secret@example.org"\n')
    assert out.returncode != 0
    assert "error kv: url is not a Redis URL" in out.stdout, out.stdout
    assert "secret" not in out.stdout + out.stderr

    out = check(tmp_path, 'backend = "memcached"\n')
    assert out.returncode != 0
    assert "memcached" in out.stdout + out.stderr


def test_an_unreachable_redis_is_a_problem_and_calls_fail_typed(launch, tmp_path):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    closed = port.getsockname()[1]
    port.close()
    out = check(tmp_path, f'backend = "redis"\nurl = "redis://127.0.0.1:{closed}"\n')
    assert out.returncode != 0
    assert f"error kv: redis at 127.0.0.1:{closed}" in out.stdout, out.stdout

    server = launch(f'\n[kv]\nbackend = "redis"\nurl = "redis://127.0.0.1:{closed}"\n')
    assert kv_error(server, "incr", key="n").startswith("kv error: unavailable:")
    still_serving(server)
