"""Opt-in warm-instance reuse: instances are kept between calls only when
the plugin asks, and thrown away after max_calls, a trap, or idleness."""

import time

from conftest import Mcp


def count(c):
    return int(c.call("counter", {})["result"]["content"][0]["text"])


def test_fresh_instances_by_default(start_server):
    c = Mcp(start_server(plugins=("misbehave",)).url)
    assert [count(c) for _ in range(4)] == [1, 1, 1, 1]


def test_reuse_until_max_calls_then_fresh(start_server):
    config = '[plugins.misbehave]\ninstances = { reuse = true, max_calls = 3, max_idle = "60s" }\n'
    c = Mcp(start_server(plugins=("misbehave",), config=config).url)
    assert [count(c) for _ in range(7)] == [1, 2, 3, 1, 2, 3, 1]


def test_a_trap_or_idleness_retires_the_instance(start_server):
    config = '[plugins.misbehave]\ninstances = { reuse = true, max_calls = 100, max_idle = "300ms" }\n'
    c = Mcp(start_server(plugins=("misbehave",), config=config).url)
    assert [count(c) for _ in range(3)] == [1, 2, 3]
    assert c.call("panic", {})["error"]["data"]["stage"] == "handler"
    # The pool had one instance; the panic used it and it was thrown away.
    assert count(c) == 1
    time.sleep(0.5)
    assert count(c) == 1


def test_limits_apply_to_every_reused_call(start_server):
    config = ('[plugins.misbehave]\ninstances = { reuse = true }\nlimits = { fuel = 50_000_000 }\n')
    c = Mcp(start_server(plugins=("misbehave",), config=config).url)
    for _ in range(3):
        # counter leaves a warm instance; spin takes it, runs out of the
        # fuel it was re-armed with, and the instance is thrown away.
        assert [count(c), count(c)] == [1, 2]
        r = c.call("spin", {})
        assert r["error"]["message"] == "handler: fuel exhausted (limit 50000000)"


# Auth checks and mappers: the same opt-in, the same rules. count-mapper
# appends how many payloads its instance has mapped to the text it maps.
MAPPED_ECHO = '[[tools]]\nname = "echo"\nmappers = { input = "count-mapper" }\n'


def mapped(c):
    reply = c.call("echo", {"text": "hi"})
    assert reply["result"]["isError"] is False, reply
    return reply["result"]["content"][0]["text"]


def test_a_mapper_gets_a_fresh_instance_by_default(start_server):
    c = Mcp(start_server(plugins=("echo", "count-mapper"), config=MAPPED_ECHO).url)
    assert [mapped(c) for _ in range(3)] == ["hi #1", "hi #1", "hi #1"]


def test_a_mapper_opted_into_reuse_keeps_its_instance_until_max_calls(start_server):
    config = MAPPED_ECHO + '[plugins.count-mapper]\ninstances = { reuse = true, max_calls = 3 }\n'
    c = Mcp(start_server(plugins=("echo", "count-mapper"), config=config).url)
    assert [mapped(c) for _ in range(5)] == ["hi #1", "hi #2", "hi #3", "hi #1", "hi #2"]
