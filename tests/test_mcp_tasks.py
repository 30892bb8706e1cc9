"""The tasks extension (io.modelcontextprotocol/tasks) of MCP 2026-07-28: tools marked
`[[tools]] task = "optional" | "required"` become tasks for a client that declares the
extension; tasks/get, tasks/cancel, tasks/update; the required-task error; task records
in the kv store, so a restarted server still answers tasks/get."""

import json
import re
import threading

import httpx
import pytest

from conftest import wait_for
from test_mcp_2026 import headers_for, meta, modern

EXT = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {EXT: {}}}

CONFIG = """
[[tools]]
name = "echo"
task = "optional"

[[tools]]
name = "test_error_handling"
task = "optional"

[[tools]]
name = "panic"
task = "optional"

[[tools]]
name = "spin_wait"
task = "required"
limits = { deadline = "60s" }

[[tools]]
name = "confirm_delete"
task = "optional"
limits = { deadline = "60s" }
"""

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("echo", "everything", "misbehave"), config=CONFIG)


def call(server, name, arguments=None, caps=WITH_TASKS, headers=None):
    return modern(server, "tools/call", {"name": name, "arguments": arguments or {}}, caps=caps,
                  headers=headers)


def task_request(server, method, task_id, caps=WITH_TASKS, headers=None, **params):
    """A tasks/* request; Mcp-Name mirrors the taskId."""
    return modern(server, method, {"taskId": task_id, **params}, caps=caps,
                  headers={"mcp-name": task_id, **(headers or {})})


def settled(server, task_id, headers=None):
    """Polls tasks/get until the task leaves `working`."""
    seen = {}

    def done():
        seen["r"] = task_request(server, "tasks/get", task_id, headers=headers)
        return seen["r"]["result"]["status"] != "working"

    wait_for(done, 60, f"task {task_id} to settle")
    return seen["r"]["result"]


def test_discover_advertises_the_extension(server):
    r = modern(server, "server/discover")
    assert r["result"]["capabilities"]["extensions"] == {EXT: {}}
    assert "tasks" not in r["result"]["capabilities"]


def test_a_task_tool_creates_a_task_and_tasks_get_inlines_the_result(server):
    created = call(server, "echo", {"text": "later", "times": 2})["result"]
    assert created["resultType"] == "task", created
    assert created["status"] == "working"
    assert ISO.match(created["createdAt"]) and ISO.match(created["lastUpdatedAt"])
    assert created["ttlMs"] == 3600000 and created["pollIntervalMs"] == 500
    for absent in ("result", "error", "task", "ttl", "pollInterval"):
        assert absent not in created
    done = settled(server, created["taskId"])
    assert done["resultType"] == "complete" and done["taskId"] == created["taskId"]
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "later later"
    assert done["result"]["isError"] is False


def test_without_the_extension_an_optional_tool_is_a_plain_call(server):
    r = call(server, "echo", {"text": "now"}, caps={})
    assert r["result"]["resultType"] == "complete"
    assert r["result"]["content"][0]["text"] == "now" and "taskId" not in r["result"]


def test_a_required_task_tool_refuses_a_client_without_the_extension(server):
    r = call(server, "spin_wait", caps={})
    assert (r["_status"], r["error"]["code"]) == (400, -32021), r
    assert r["error"]["data"]["requiredCapabilities"] == {"extensions": {EXT: {}}}


def test_task_methods_need_the_extension_and_a_known_task(server):
    r = task_request(server, "tasks/get", "nope", caps={})
    assert (r["_status"], r["error"]["code"]) == (400, -32021), r
    r = task_request(server, "tasks/get", "no-such-task")
    assert r["error"]["code"] == -32602 and "Unknown task" in r["error"]["message"], r
    r = task_request(server, "tasks/cancel", "no-such-task")
    assert r["error"]["code"] == -32602, r
    # Mcp-Name must mirror the taskId.
    r = task_request(server, "tasks/get", "a", headers={"mcp-name": "b"})
    assert (r["_status"], r["error"]["code"]) == (400, -32020), r
    for removed in ("tasks/result", "tasks/list"):
        r = modern(server, removed, {"taskId": "x"}, caps=WITH_TASKS)
        assert r["error"]["code"] == -32601, r


def test_tool_errors_complete_and_protocol_errors_fail(server):
    tool_error = settled(server, call(server, "test_error_handling")["result"]["taskId"])
    assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True
    crashed = settled(server, call(server, "panic")["result"]["taskId"])
    assert crashed["status"] == "failed" and "result" not in crashed
    assert crashed["error"]["code"] == -32000 and "panicked" in crashed["error"]["message"]


def test_cancel_stops_a_running_task_and_is_idempotent(server):
    task_id = call(server, "spin_wait")["result"]["taskId"]
    assert task_request(server, "tasks/get", task_id)["result"]["status"] == "working"
    ack = task_request(server, "tasks/cancel", task_id)
    assert ack["result"]["resultType"] == "complete"
    assert not {"taskId", "status", "result", "error"} & set(ack["result"]), ack
    assert settled(server, task_id)["status"] == "cancelled"
    again = task_request(server, "tasks/cancel", task_id)
    assert again["result"]["resultType"] == "complete"
    assert task_request(server, "tasks/get", task_id)["result"]["status"] == "cancelled"


def test_a_question_parks_the_task_until_tasks_update_answers_it(server):
    caps = {"elicitation": {}, **WITH_TASKS}
    task_id = call(server, "confirm_delete", {"filename": "notes.txt"}, caps=caps)["result"]["taskId"]
    seen = {}

    def parked():
        seen["r"] = task_request(server, "tasks/get", task_id, caps=caps)["result"]
        return seen["r"]["status"] == "input_required"

    wait_for(parked, 30, "the task to wait for input")
    asked = seen["r"]["inputRequests"]
    assert list(asked) == ["elicitation-1"], asked
    assert asked["elicitation-1"]["method"] == "elicitation/create"
    assert asked["elicitation-1"]["params"]["message"] == "Delete notes.txt?"
    # An answer under a key nobody asked is ignored; the right one resumes the guest.
    ack = task_request(server, "tasks/update", task_id, caps=caps, inputResponses={
        "nobody-asked": {"action": "decline"},
        "elicitation-1": {"action": "accept", "content": {"confirm": True}}})
    assert ack["result"]["resultType"] == "complete", ack
    done = settled(server, task_id)
    assert done["status"] == "completed" and "inputRequests" not in done
    assert done["result"]["content"][0]["text"] == "Deleted notes.txt"


def test_a_task_cannot_ask_what_its_client_did_not_declare(server):
    # No elicitation capability: the guest's question fails inside it, and it says so.
    done = settled(server, call(server, "confirm_delete", {"filename": "x"})["result"]["taskId"])
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert "did not declare the elicitation capability" in done["result"]["content"][0]["text"]


def test_update_is_acknowledged_and_checked(server):
    task_id = call(server, "echo", {"text": "u"})["result"]["taskId"]
    ack = task_request(server, "tasks/update", task_id, inputResponses={"x": {"action": "accept"}})
    assert ack["result"]["resultType"] == "complete", ack
    bad = task_request(server, "tasks/update", task_id, inputResponses=[1])
    assert bad["error"]["code"] == -32602, bad


def test_only_the_credentials_that_created_a_task_see_it(server):
    mine = {"authorization": "Bearer alice"}
    task_id = call(server, "echo", {"text": "private"}, headers=mine)["result"]["taskId"]
    assert settled(server, task_id, headers=mine)["status"] == "completed"
    r = task_request(server, "tasks/get", task_id, headers={"authorization": "Bearer mallory"})
    assert r["error"]["code"] == -32602, r
    r = task_request(server, "tasks/get", task_id)
    assert r["error"]["code"] == -32602, r


def listen_for_tasks(server, task_ids, frames, ready):
    """Reads a subscriptions/listen stream for `task_ids` into `frames` (the ack, then one more)."""
    params = {"_meta": meta(WITH_TASKS), "notifications": {"taskIds": task_ids}}
    with httpx.Client(timeout=httpx.Timeout(30, read=60)) as http:
        with http.stream("POST", server.url + "/mcp", headers=headers_for("subscriptions/listen", params),
                         json={"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                               "params": params}) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    ready.set()
                if len(frames) > 1:
                    return


def test_listeners_hear_a_task_end(server):
    r = modern(server, "subscriptions/listen", {"notifications": {"taskIds": ["t"]}})
    assert (r["_status"], r["error"]["code"]) == (400, -32021), r
    task_id = call(server, "spin_wait")["result"]["taskId"]
    frames, ready = [], threading.Event()
    t = threading.Thread(target=listen_for_tasks, daemon=True, args=(server, [task_id], frames, ready))
    t.start()
    assert ready.wait(30), frames
    assert frames[0]["method"] == "notifications/subscriptions/acknowledged"
    assert frames[0]["params"]["notifications"] == {"taskIds": [task_id]}
    task_request(server, "tasks/cancel", task_id)
    wait_for(lambda: len(frames) > 1, 30, "notifications/tasks on the listen stream")
    note = frames[1]
    assert note["method"] == "notifications/tasks", frames
    assert note["params"]["taskId"] == task_id and note["params"]["status"] == "cancelled"
    assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7


def test_tasks_survive_a_restart(start_server):
    s = start_server(plugins=("echo", "misbehave"), config=CONFIG)
    done_id = call(s, "echo", {"text": "kept"})["result"]["taskId"]
    assert settled(s, done_id)["status"] == "completed"
    lost_id = call(s, "spin_wait")["result"]["taskId"]
    s.stop()
    s.start()
    kept = task_request(s, "tasks/get", done_id)["result"]
    assert kept["status"] == "completed" and kept["result"]["content"][0]["text"] == "kept"
    # A task the stopped process was running cannot finish: it is reported failed.
    lost = task_request(s, "tasks/get", lost_id)["result"]
    assert lost["status"] == "failed" and "restarted" in lost["error"]["message"], lost
