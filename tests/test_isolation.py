"""Isolation: one plugin, one call or one guest cannot take the server from
everyone else.

What these tests hold the host to (see docs and `hangar.toml` for the keys):

* **Concurrency caps.** `max_concurrent` (in `[limits]`, on a plugin, or on a
  tool, where it gives that tool a cap of its own) bounds the calls of one
  plugin running at once. A call over the cap waits up to `queue_timeout`,
  then fails with a JSON-RPC -32000 error whose message starts with `busy:`
  and whose `data.stage` is `handler`; over REST it is HTTP 503 with a
  `Retry-After` header. Other plugins are not held back.
* **Slots of their own for auth and mappers.** `[server] stage_instances`
  (default a quarter of `max_instances`, at least 2) are kept for auth checks
  and mappers, so tool calls that fill the instance pool make the next call
  fail `busy:`, never `Unauthorized` or `Tool not found`, and a wrong key is
  still refused.
* **Deadlines reach a guest blocked in one host call** (`sleep_once`), and so
  does `notifications/cancelled`.
* **A component whose `list-tools` hangs** is skipped at start-up and shown in
  `/healthz` as a problem; the other plugins are served.
* **Event budgets.** `max_events` / `max_event_bytes` bound the log and
  progress notifications of one call; the rest are dropped and counted in one
  last `notifications/message` (level `warning`, logger `hangar`, data
  `dropped N events ...`) before the result. Guest log lines in the host log
  are truncated and rate-limited per plugin.
* **Stderr floods** are cut, not fatal: the call answers, the host log says
  bytes were dropped.
* **Output caps.** `max_output_bytes` / `max_content_blocks` bound a result,
  from a handler or from an output mapper.
* **Huge WASI requests** (4 GiB of random bytes, ten million pollables) fail
  the call, not the server.
* **Runaways** do not starve short calls, even with one long-running slot.

No test here asserts a duration: timing figures belong to RELIABILITY.md
(`scripts/abuse`). Tests wait for conditions by polling, with short guest
deadlines so they stay fast, and generous HTTP timeouts so that a hang fails a
test instead of passing it.
"""

import os
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import httpx
import pytest

from conftest import Mcp, client, parse_reply, plugin_path, run_hangar, wait_for

# --- helpers ------------------------------------------------------------------------------


def call(server, tool, arguments=None, **kw):
    """One call on a client of its own (safe to run from a worker thread)."""
    return client(server).call(tool, arguments if arguments is not None else {}, **kw)


def is_busy(r):
    return "error" in r and r["error"]["message"].startswith("busy:")


def assert_busy(r):
    assert "error" in r, r
    assert r["error"]["code"] == -32000, r
    assert r["error"]["message"].startswith("busy:"), r
    assert r["error"]["data"]["stage"] == "handler", r


def handler_error(r):
    assert "error" in r, r
    assert r["error"]["code"] == -32000, r
    assert r["error"]["data"]["stage"] == "handler", r
    return r["error"]["message"]


def text_of(r):
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]["content"][0]["text"]


def echo_ok(c, text="still here"):
    assert text_of(c.call("echo", {"text": text})) == text


def deadline_error(ms):
    return f"handler: deadline of {ms} ms exceeded"


def probe_until_busy(c, tool, timeout, what):
    """Calls `tool` (one that ends at once when it runs) until it is refused busy.

    A probe that gets a permit returns it straight away, so probing never
    keeps the long calls it waits for out of their slots."""
    def refused():
        r = c.call(tool, {})
        return r if is_busy(r) else None

    return wait_for(refused, timeout, what)


def answer_once_free(c, tool, arguments, **kw):
    """Calls `tool` until it is not refused busy (permits may be given back
    just after the answers of the calls that held them)."""
    def answered():
        r = c.call(tool, arguments, **kw)
        return None if is_busy(r) else r

    return wait_for(answered, 5, f"{tool} to answer once the long calls ended")


# --- 1. per-plugin and per-tool concurrency caps ----------------------------------------------

# The spin_wait calls run to a 4 s deadline: the checks made while they hold
# their permits must fit inside it also when other test workers load the
# cores (with 2 s, a probe window of 1.5 s was once too short). They wait
# for their permits as long as it takes: a probe holds one while it runs,
# and on a loaded machine a probe ran past the 100 ms the probes wait, so a
# spin_wait with that wait was refused and the cap never filled.
PLUGIN_CAP_CONFIG = """
[plugins.misbehave]
limits = { max_concurrent = 2, queue_timeout = "100ms" }

[[tools]]
name = "spin_wait"
limits = { deadline = "4s", queue_timeout = "10s" }
"""


def test_a_plugin_at_its_cap_answers_busy_and_others_go_on(start_server):
    server = start_server(plugins=("echo", "misbehave"), config=PLUGIN_CAP_CONFIG)
    c = client(server)
    with ThreadPoolExecutor(max_workers=2) as pool:
        spinning = [pool.submit(call, server, "spin_wait") for _ in range(2)]
        # Any other misbehave call now waits 100 ms for a permit, then fails.
        r = probe_until_busy(c, "counter", 3, "two spin_wait calls to fill misbehave's cap of 2")
        assert_busy(r)

        # Another plugin is not held back by misbehave's cap.
        echo_ok(c)

        # REST says the same as a 503 with Retry-After.
        rest = httpx.post(server.url + "/tools/counter/call", json={}, timeout=30)
        assert rest.status_code == 503, rest.text
        assert "retry-after" in rest.headers
        body = rest.json()
        assert body["isError"] is True
        assert body["content"][0]["text"].startswith("busy:"), body

        assert not any(f.done() for f in spinning), "the spin_wait calls ended before the checks"
        results = [f.result() for f in spinning]
    # The two that held the permits ran to their deadline: neither was refused.
    assert [r["error"]["message"] for r in results] == [deadline_error(4000)] * 2

    # Permits are given back: misbehave answers again (a fresh instance counts 1).
    assert text_of(answer_once_free(c, "counter", {})) == "1"


TOOL_CAP_CONFIG = """
[[tools]]
name = "spin_wait"
limits = { deadline = "4s", max_concurrent = 1, queue_timeout = "100ms" }
"""


def test_a_tool_cap_holds_that_tool_only(start_server):
    server = start_server(plugins=("echo", "misbehave"), config=TOOL_CAP_CONFIG)
    c = client(server)
    with ThreadPoolExecutor(max_workers=2) as pool:
        calls = [pool.submit(call, server, "spin_wait") for _ in range(2)]
        # One of the two gets spin_wait's only permit; the other is refused
        # after its 100 ms wait, long before the 4 s deadline.
        done, _ = wait(calls, timeout=3, return_when=FIRST_COMPLETED)
        assert len(done) == 1, "neither spin_wait call was refused"
        refused = next(iter(done)).result()
        assert_busy(refused)
        running = next(f for f in calls if f not in done)

        # Another tool of the same plugin has no cap: it answers meanwhile.
        for _ in range(3):
            assert text_of(c.call("counter", {})) == "1"
        assert not running.done(), "spin_wait ended before counter was checked"
        assert running.result()["error"]["message"] == deadline_error(4000)


# --- 2. auth and mappers have instance slots of their own -------------------------------------

API_KEY = "k-" + os.urandom(8).hex()

STAGE_SLOTS_CONFIG = f"""max_instances = 8

[limits]
queue_timeout = "200ms"

[plugins.api-key]
config = {{ keys = "alice={API_KEY}, bob=other-key" }}

[[tools]]
name = "echo"
auth = {{ plugin = "api-key", policy = {{ header = "x-api-key" }} }}

# The spin_wait calls wait for their slots as long as it takes (a probe
# holds one while it runs); see PLUGIN_CAP_CONFIG.
[[tools]]
name = "spin_wait"
limits = {{ deadline = "4s", queue_timeout = "10s" }}
"""


def test_a_full_instance_pool_makes_calls_busy_never_unauthorized(start_server):
    # max_instances 8, stage_instances by default max(8 / 4, 2) = 2: six tool slots.
    server = start_server(plugins=("echo", "misbehave", "api-key"), config=STAGE_SLOTS_CONFIG)
    c = client(server)
    good = {"x-api-key": API_KEY}
    assert text_of(c.call("echo", {"text": "before"}, headers=good)) == "before"

    with ThreadPoolExecutor(max_workers=6) as pool:
        spinning = [pool.submit(call, server, "spin_wait") for _ in range(6)]
        assert_busy(probe_until_busy(c, "counter", 3, "six spin_wait calls to fill the tool slots"))

        # The key is checked (in a stage slot) and accepted; the handler finds no slot.
        r = c.call("echo", {"text": "x"}, headers=good)
        assert_busy(r)
        assert r["error"]["message"] != "Unauthorized"
        assert "not found" not in r["error"]["message"].lower()

        # Auth still runs, in its own slots: a bad key is refused as ever.
        for headers in ({"x-api-key": "wrong"}, {}):
            refused = c.call("echo", {"text": "x"}, headers=headers)
            assert refused["error"]["message"] == "Unauthorized", refused
            assert refused["error"]["data"]["stage"] == "auth", refused

        rest = httpx.post(server.url + "/tools/echo/call", json={"text": "x"}, headers=good, timeout=30)
        assert rest.status_code == 503, rest.text
        assert rest.json()["content"][0]["text"].startswith("busy:")

        assert not any(f.done() for f in spinning), "the spin_wait calls ended before the checks"
        results = [f.result() for f in spinning]
    # All six ran to their deadline: tool calls got exactly the non-stage slots.
    assert [r["error"]["message"] for r in results] == [deadline_error(4000)] * 6

    assert text_of(answer_once_free(c, "echo", {"text": "after"}, headers=good)) == "after"


# --- 3. deadline and cancellation reach a guest blocked in a host call ------------------------

SLEEP_CONFIG = """
[[tools]]
name = "sleep_once"
limits = { deadline = "1s" }
"""


def test_a_guest_blocked_in_one_host_call_meets_its_deadline(start_server):
    server = start_server(plugins=("echo", "abuse"), config=SLEEP_CONFIG)
    # Ten seconds of patience: a 30 s sleep that runs out fails the test.
    c = client(server, timeout=10)
    r = c.call("sleep_once", {"seconds": 30})
    assert handler_error(r) == deadline_error(1000)
    assert server.alive()
    echo_ok(c)
    # The timer does not touch calls that end in time.
    assert text_of(c.call("sleep_once", {"seconds": 0})) == "slept 0 s"


def test_cancelling_a_guest_blocked_in_a_host_call(start_server):
    server = start_server(plugins=("echo", "abuse"),
                          config='[[tools]]\nname = "sleep_once"\nlimits = { deadline = "60s" }\n')
    c = client(server)
    c.initialize()
    caller = client(server, timeout=20)
    caller.session = c.session
    reply, failure = {}, []

    def sleep():
        try:
            reply.update(caller.call("sleep_once", {"seconds": 30}, id="sleep-to-cancel"))
        except Exception as e:  # a timeout here must fail the test, not look like "no response"
            failure.append(e)

    t = threading.Thread(target=sleep)
    t.start()
    threading.Event().wait(0.5)
    assert t.is_alive(), "the call ended before it was cancelled"
    c.notify("notifications/cancelled", {"requestId": "sleep-to-cancel", "reason": "test"})
    t.join(timeout=10)
    assert not t.is_alive(), "cancellation did not stop a guest blocked in a host call"
    assert not failure, failure
    assert "result" not in reply and "error" not in reply, reply
    echo_ok(c)


# --- 4. a list-tools that never returns --------------------------------------------------------

def test_a_plugin_whose_list_tools_hangs_is_skipped(start_server):
    # Start-up itself must end: Server.start waits for /healthz to answer.
    server = start_server(plugins=("echo", "stuck-list"), config='[limits]\ndeadline = "1s"\n')

    def degraded():
        h = httpx.get(server.url + "/healthz", timeout=10).json()
        return h if h["problems"] else None

    health = wait_for(degraded, 15, "/healthz to report stuck-list")
    assert health["status"] == "degraded"
    assert len(health["problems"]) == 1, health
    problem = health["problems"][0]
    assert "list-tools" in problem["error"], problem
    assert "stuck-list" in problem.get("path", "") + problem["error"], problem
    assert health["tools"] == 1  # echo's
    echo_ok(client(server))
    assert httpx.get(server.url + "/tools/echo", timeout=10).status_code == 200


# --- 5. event budgets, and guest log lines in the host log -------------------------------------

EVENTS_CONFIG = """
[limits]
max_events = 100
max_event_bytes = 100000
"""


@pytest.fixture(scope="module")
def events_server(start_server):
    return start_server(plugins=("echo", "abuse"), config=EVENTS_CONFIG)


@pytest.fixture
def listening(events_server):
    """A session that asked for every log level, so every guest log is an event."""
    c = client(events_server)
    c.initialize()
    assert c.request("logging/setLevel", {"level": "debug"})["result"] == {}
    return c


def dropped_notice(events):
    """Checks the last event is the one `dropped N events` warning; returns N and the rest."""
    assert events, "no events at all"
    *kept, last = events
    assert last["method"] == "notifications/message", last
    params = last["params"]
    assert params["level"] == "warning" and params["logger"] == "hangar", params
    assert isinstance(params["data"], str), params
    m = re.match(r"dropped (\d+) events", params["data"])
    assert m, params["data"]
    assert not any(e["method"] == "notifications/message" and e["params"].get("logger") == "hangar"
                   for e in kept), "more than one notice"
    return int(m.group(1)), kept


def test_a_log_flood_is_cut_at_max_events(listening):
    r = listening.call("log_flood", {"count": 5000})
    assert text_of(r) == "logged 5000"
    assert len(r["_events"]) <= 101
    dropped, kept = dropped_notice(r["_events"])
    assert all(e["method"] == "notifications/message" for e in kept)
    assert 1 <= len(kept) <= 100
    assert kept[0]["params"]["data"].startswith("0 ")  # the first ones are kept
    assert dropped == 5000 - len(kept)


def test_a_progress_flood_is_cut_at_max_events(listening):
    r = listening.request("tools/call", {"name": "progress_flood", "arguments": {"count": 5000},
                                         "_meta": {"progressToken": "flood"}})
    assert text_of(r) == "reported 5000"
    assert len(r["_events"]) <= 101
    dropped, kept = dropped_notice(r["_events"])
    assert all(e["method"] == "notifications/progress" for e in kept)
    assert all(e["params"]["progressToken"] == "flood" for e in kept)
    assert 1 <= len(kept) <= 100
    assert dropped == 5000 - len(kept)


def test_big_log_messages_are_cut_at_max_event_bytes(listening):
    # 50 events is under max_events (100); 50 x 10 kB is five times max_event_bytes.
    r = listening.call("log_flood", {"count": 50, "size": 10000})
    assert text_of(r) == "logged 50"
    dropped, kept = dropped_notice(r["_events"])
    assert 1 <= len(kept) < 50
    assert sum(len(e["params"]["data"]) for e in kept) <= 100000
    assert dropped == 50 - len(kept)


def test_a_call_nobody_listens_to_gets_plain_json(events_server):
    c = client(events_server)
    c.initialize()  # no logging/setLevel: log events are not wanted, nor any notice of them
    raw = c.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "log_flood", "arguments": {"count": 5000}}})
    assert raw.headers["content-type"].startswith("application/json"), raw.headers
    r = parse_reply(raw)
    assert r["_events"] == []
    assert text_of(r) == "logged 5000"


def log_lines_with(server, marker):
    return [line for line in server.log_text().splitlines() if marker in line]


def test_guest_log_lines_are_rate_limited_in_the_host_log(start_server):
    server = start_server(plugins=("abuse",))  # a server of its own: a fresh rate budget
    assert text_of(call(server, "log_flood", {"count": 5000, "size": 123})) == "logged 5000"
    lines = log_lines_with(server, "x" * 123)
    assert lines, "no guest log line reached the host log at all"
    assert len(lines) <= 1000, f"{len(lines)} of 5000 guest log lines in the host log"


def test_guest_log_lines_are_truncated_in_the_host_log(start_server):
    server = start_server(plugins=("abuse",))
    assert text_of(call(server, "log_flood", {"count": 3, "size": 100000})) == "logged 3"
    lines = log_lines_with(server, "x" * 200)
    assert lines, "no guest log line reached the host log at all"
    assert max(len(line) for line in lines) <= 2048


# --- 6-8. stderr, output caps and huge WASI requests, on default limits ------------------------

@pytest.fixture(scope="module")
def abuse_server(start_server):
    return start_server(plugins=("echo", "abuse"))


@pytest.fixture
def abuse(abuse_server):
    return client(abuse_server, timeout=30)


def test_a_stderr_flood_is_cut_not_fatal(abuse, abuse_server):
    # First in this server, so no earlier guest logging has used up its log budget.
    r = abuse.call("stderr_flood", {})
    m = re.fullmatch(r"wrote (\d+) bytes", text_of(r))
    assert m and int(m.group(1)) >= 1 << 20, r
    lines = [line.lower() for line in abuse_server.log_text().splitlines()]
    assert any("stderr" in line and "dropped" in line for line in lines), "no word of the dropped stderr"
    echo_ok(abuse)


def test_a_result_over_the_default_output_cap_is_refused(abuse, abuse_server):
    msg = handler_error(abuse.call("big_output", {}))
    m = re.fullmatch(r"handler: output of (\d+) bytes exceeds the limit of 8388608 bytes", msg)
    assert m and int(m.group(1)) > 8388608, msg
    assert abuse_server.alive()
    echo_ok(abuse)


def test_too_many_content_blocks_are_refused(abuse):
    msg = handler_error(abuse.call("many_blocks", {}))
    m = re.fullmatch(r"handler: output of (\d+) content blocks exceeds the limit of 1000 blocks", msg)
    assert m and int(m.group(1)) > 1000, msg
    assert len(abuse.call("many_blocks", {"count": 10})["result"]["content"]) == 10
    echo_ok(abuse)


@pytest.mark.parametrize("tool, args, cause", [
    ("random_flood", {}, "handler: guest failed: requested len 4294967296 exceeds limit 1048576"),
    # 20,000 pollables: past Hangar's cap of 10,000, well within wasmtime's default of 1,000,000.
    ("table_flood", {"count": 20000}, "handler: guest failed: resource table has no free keys"),
])
def test_a_huge_wasi_request_fails_the_call_not_the_server(abuse, abuse_server, tool, args, cause):
    msg = handler_error(abuse.call(tool, args))
    # Stopped by the host's cap on what it asked, named in the message — not
    # by running into its deadline, fuel or memory.
    assert msg == cause, msg
    assert abuse_server.alive()
    echo_ok(abuse)


OUTPUT_CAP_CONFIG = """
[[tools]]
name = "big_output"
limits = { max_output_bytes = 1000 }

[[tools]]
name = "many_blocks"
limits = { max_content_blocks = 5 }
"""


def test_output_caps_set_on_a_tool(start_server):
    server = start_server(plugins=("abuse",), config=OUTPUT_CAP_CONFIG)
    c = client(server)
    msg = handler_error(c.call("big_output", {"bytes": 2000}))
    assert re.fullmatch(r"handler: output of \d+ bytes exceeds the limit of 1000 bytes", msg), msg
    assert text_of(c.call("big_output", {"bytes": 500})) == "o" * 500
    msg = handler_error(c.call("many_blocks", {"count": 6}))
    assert re.fullmatch(r"handler: output of \d+ content blocks exceeds the limit of 5 blocks", msg), msg
    assert [b["text"] for b in c.call("many_blocks", {"count": 5})["result"]["content"]] == list("01234")


HUGE_MAPPER_CONFIG = """
[plugins.bad-mapper]
config = { mode = "huge" }

[[tools]]
name = "echo"
mappers = { output = "bad-mapper" }
"""


def test_an_output_mapper_over_the_output_cap_is_refused(start_server):
    server = start_server(plugins=("echo", "bad-mapper"), config=HUGE_MAPPER_CONFIG)
    r = client(server).call("echo", {"text": "small"})
    assert "error" in r, r
    assert r["error"]["code"] == -32000
    assert r["error"]["data"]["stage"] == "output_map"
    msg = r["error"]["message"]
    assert msg.startswith("output_map:") and "bad-mapper" in msg, msg
    assert "exceeds the limit of 8388608 bytes" in msg, msg
    assert server.alive()


# --- 9. runaways do not starve short calls -----------------------------------------------------

# One long-running slot: nineteen of the twenty runaways wait at each epoch
# tick, and must still be stopped by their deadline.
RUNAWAY_CONFIG = """long_running_slots = 1

[limits]
fuel = 1_000_000_000_000
deadline = "2s"
"""


def test_twenty_runaways_end_at_their_deadline_and_echo_answers_meanwhile(start_server):
    server = start_server(plugins=("echo", "misbehave"), config=RUNAWAY_CONFIG)
    c = client(server)
    with ThreadPoolExecutor(max_workers=20) as pool:
        runaways = [pool.submit(call, server, "spin") for _ in range(20)]
        threading.Event().wait(0.3)  # let them get going
        answered_while_busy = 0
        for i in range(5):
            echo_ok(c, f"echo {i}")
            if not all(f.done() for f in runaways):
                answered_while_busy += 1
        results = [f.result() for f in runaways]
    assert answered_while_busy == 5, "echo waited for the runaways"
    assert [r["error"]["message"] for r in results] == [deadline_error(2000)] * 20
    echo_ok(c)


# --- the new keys are accepted everywhere they are documented ---------------------------------

def test_check_accepts_the_isolation_keys(tmp_path, shared_cache):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for name in ("echo", "misbehave"):
        (plugins / f"{name}.wasm").write_bytes(plugin_path(name).read_bytes())
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f"""[server]
cache_dir = "{shared_cache}"
max_instances = 64
stage_instances = 4
long_running_slots = 2
long_running_after = "20ms"

[limits]
max_concurrent = 8
queue_timeout = "1s"
max_events = 1000
max_event_bytes = 1048576
max_output_bytes = 8388608
max_content_blocks = 1000

[plugins.misbehave]
limits = {{ max_concurrent = 2, queue_timeout = "100ms", max_events = 10, max_event_bytes = 1000, max_output_bytes = 1000, max_content_blocks = 10 }}

[[tools]]
name = "spin_wait"
limits = {{ max_concurrent = 1, queue_timeout = "50ms", max_events = 5, max_event_bytes = 500, max_output_bytes = 500, max_content_blocks = 5 }}
""")
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(plugins))
    assert out.returncode == 0, out.stdout + out.stderr
