"""Guests that trap, loop, hog memory or recurse get a -32000 error naming the
cause, and the server goes on serving everyone else."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import Mcp

CONFIG = """
[[tools]]
name = "spin"
limits = { fuel = 200_000_000, deadline = "30s" }

[[tools]]
name = "spin_wait"
limits = { deadline = "1s" }

[[tools]]
name = "hog"
limits = { memory_mib = 16 }
"""

# A CPU-bound runaway that only the deadline stops.
RUNAWAY_CONFIG = """
[limits]
fuel = 1_000_000_000_000
deadline = "3s"
"""


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(config=CONFIG)


@pytest.fixture
def mcp(server):
    c = Mcp(server.url)
    c.initialize()
    return c


def echo_ok(mcp, text="after"):
    r = mcp.call("echo", {"text": text})
    assert r["result"]["content"][0]["text"] == text, r


@pytest.mark.parametrize("tool, message", [
    ("spin", "handler: fuel exhausted (limit 200000000)"),
    ("spin_wait", "handler: deadline of 1000 ms exceeded"),
    ("hog", "handler: memory limit of 16 MiB exceeded"),
    ("panic", "handler: guest panicked: misbehave panicked on purpose"),
])
def test_misbehaving_guest_gets_its_error_and_the_server_goes_on(mcp, server, tool, message):
    r = mcp.call(tool, {})
    assert r["error"]["code"] == -32000, r
    assert r["error"]["message"] == message
    assert r["error"]["data"]["stage"] == "handler"
    assert len(r["error"]["data"]["trace_id"]) == 32
    assert server.alive()
    echo_ok(mcp)


def test_deep_recursion_traps(mcp, server):
    r = mcp.call("recurse", {})
    assert r["error"]["code"] == -32000
    assert r["error"]["message"].startswith("handler: guest trapped: ")
    assert server.alive()
    echo_ok(mcp)


def test_guest_stderr_goes_to_the_host_log_tagged_with_the_plugin(mcp, server):
    mcp.call("panic", {})
    lines = [l for l in server.log_text().splitlines() if "misbehave panicked on purpose" in l]
    assert lines and all('plugin="misbehave"' in l for l in lines)


def test_no_state_leaks_between_calls(mcp):
    # Every call gets a fresh instance: `counter` counts its calls in the
    # instance's memory, so it answers 1 each time (a reused instance
    # answers 2, 3, …: test_reuse.py), and a hog that filled its memory
    # leaves nothing behind for the next call of the same plugin.
    def counter():
        r = mcp.call("counter", {})
        assert "result" in r, r
        return r["result"]["content"][0]["text"]

    for _ in range(3):
        assert counter() == "1"
        assert mcp.call("hog", {})["error"]["message"] == "handler: memory limit of 16 MiB exceeded"
        assert counter() == "1"


def test_fifty_runaway_calls_do_not_stop_echo(start_server):
    server = start_server(config=RUNAWAY_CONFIG)
    c = Mcp(server.url)
    c.initialize()
    finished = []

    def runaway(_):
        r = Mcp(server.url).call("spin", {})
        finished.append(r)
        return r

    with ThreadPoolExecutor(max_workers=50) as pool:
        futures = [pool.submit(runaway, i) for i in range(50)]
        # Let the runaways get going, then call echo while they spin.
        threading.Event().wait(0.5)
        answered_while_busy = 0
        for i in range(5):
            echo_ok(c, f"echo {i}")
            if len(finished) < 50:
                answered_while_busy += 1
        results = [f.result() for f in futures]
    assert answered_while_busy == 5, "echo waited for the runaways"
    assert all(r["error"]["message"] == "handler: deadline of 3000 ms exceeded" for r in results)
    echo_ok(c)


def test_cancelled_call_stops_the_guest_and_gets_no_response(start_server):
    server = start_server(config="[limits]\ndeadline = \"60s\"\nfuel = 1_000_000_000_000\n")
    c = Mcp(server.url)
    c.initialize()
    reply = {}

    def call():
        reply.update(c.call("spin", {}, id="call-to-cancel"))

    t = threading.Thread(target=call)
    t.start()
    threading.Event().wait(0.5)
    assert t.is_alive(), "the call ended before it was cancelled"
    c.notify("notifications/cancelled", {"requestId": "call-to-cancel", "reason": "test"})
    t.join(timeout=20)
    assert not t.is_alive(), "cancellation did not stop the guest"
    assert "result" not in reply and "error" not in reply, reply
    echo_ok(c)


def epoch_thread_switches(pid):
    """Context switches of the server's epoch ticker thread so far (it sleeps
    a tick at a time, so each tick it runs is a switch)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == "hangar-epoch":
            status = (task / "status").read_text()
            return sum(int(line.split()[1]) for line in status.splitlines()
                       if "ctxt_switches:" in line)
    pytest.fail("no hangar-epoch thread")


def test_an_idle_server_parks_its_ticker_and_a_runaway_after_the_idle_spell_is_still_stopped(start_server):
    server = start_server(config=RUNAWAY_CONFIG.replace('"3s"', '"1s"'))
    pid = server.proc.pid
    # Idle: no guest has run for longer than the ticker lingers (100 ms).
    time.sleep(0.5)
    before = epoch_thread_switches(pid)
    time.sleep(1.0)
    idle = epoch_thread_switches(pid) - before
    # A ticking thread switches about 1000 times a second.
    assert idle < 20, f"the idle ticker switched {idle} times in a second"

    # The first guest after the idle spell wakes it: a CPU-bound runaway is
    # stopped at its deadline, not left spinning.
    started = time.monotonic()
    r = Mcp(server.url).call("spin", {})
    took = time.monotonic() - started
    # The message is the proof (with the ticker left parked, the runaway
    # spins on for minutes, to its fuel's end); the 30 s are against a hang.
    assert r["error"]["message"] == "handler: deadline of 1000 ms exceeded", r
    assert took < 30, f"the runaway ran {took:.1f} s"
    # It ticked while the guest ran.
    assert epoch_thread_switches(pid) - before - idle > 300
