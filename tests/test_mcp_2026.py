"""MCP 2026-07-28 on /mcp beside the 2025 revisions: stateless requests that carry their
version and capabilities in _meta, server/discover, mirrored headers, modern results,
per-request logging and subscriptions/listen. Raw HTTP, so every status and code is seen."""

import json
import threading

import httpx
import pytest

from conftest import Mcp, parse_reply, wait_for

V = "2026-07-28"
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def meta(caps=None, **extra):
    return {"io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientInfo": {"name": "hangar-tests", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": caps or {}, **extra}


def headers_for(method, params):
    h = {"accept": "application/json, text/event-stream", "content-type": "application/json",
         "mcp-protocol-version": V, "mcp-method": method}
    if method in NAMED and NAMED[method] in params:
        h["mcp-name"] = params[NAMED[method]]
    return h


def modern(server, method, params=None, headers=None, id=1, caps=None, raw=False):
    """One modern request; `headers` override the mirrored ones (None values drop them)."""
    params = dict(params or {})
    params.setdefault("_meta", meta(caps))
    h = headers_for(method, params)
    for k, v in (headers or {}).items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    r = httpx.post(server.url + "/mcp", headers=h, timeout=30,
                   content=json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    return r if raw else parse_reply(r)


@pytest.fixture(scope="module")
def server(start_server):
    # A cache of its own: the kv store lives there, and the diagnostic tools
    # test_trigger_tool_change / test_trigger_prompt_change flip the everything
    # plugin's lists in it, which servers sharing the cache would see.
    return start_server(plugins=("echo", "everything"), cache=False)


def test_discover_names_both_revisions_and_the_server(server):
    r = modern(server, "server/discover")
    assert r["_status"] == 200, r
    result = r["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"][0] == V and "2025-11-25" in result["supportedVersions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hangar"
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert "logging" not in result["capabilities"]
    assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")


@pytest.mark.parametrize("bad_meta", [
    None,
    {"io.modelcontextprotocol/clientCapabilities": {}},
    {"io.modelcontextprotocol/protocolVersion": V},
    {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": []},
])
def test_a_request_without_its_meta_is_invalid_params_400(server, bad_meta):
    params = {} if bad_meta is None else {"_meta": bad_meta}
    h = headers_for("tools/list", params)
    r = httpx.post(server.url + "/mcp", headers=h, timeout=30,
                   json={"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": params})
    assert r.status_code == 400
    body = r.json()
    assert body["id"] == 7 and body["error"]["code"] == -32602, body


def test_client_info_is_optional(server):
    m = meta()
    del m["io.modelcontextprotocol/clientInfo"]
    r = modern(server, "tools/list", {"_meta": m})
    assert r["_status"] == 200 and "tools" in r["result"]


@pytest.mark.parametrize("headers,why", [
    ({"mcp-protocol-version": None}, "MCP-Protocol-Version"),
    ({"mcp-method": None}, "Mcp-Method"),
    ({"mcp-method": "prompts/list"}, "Mcp-Method"),
    ({"mcp-name": None}, "Mcp-Name"),
    ({"mcp-name": "other"}, "Mcp-Name"),
])
def test_headers_must_mirror_the_body(server, headers, why):
    r = modern(server, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, headers=headers)
    assert r["_status"] == 400
    assert r["error"]["code"] == -32020 and why in r["error"]["message"], r


def test_an_encoded_name_header_is_decoded(server):
    r = modern(server, "tools/call", {"name": "echo", "arguments": {"text": "x"}},
               headers={"mcp-name": "=?base64?ZWNobw==?="})
    assert r["_status"] == 200 and r["result"]["content"][0]["text"] == "x", r


def test_header_and_meta_versions_must_agree(server):
    params = {"_meta": meta()}
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    r = modern(server, "server/discover", params)
    assert (r["_status"], r["error"]["code"]) == (400, -32020), r


def test_an_unsupported_version_lists_the_supported_ones(server):
    params = {"_meta": meta()}
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    r = modern(server, "server/discover", params, headers={"mcp-protocol-version": "v999.0.0"}, id=301)
    assert (r["_status"], r["id"], r["error"]["code"]) == (400, 301, -32022), r
    assert r["error"]["data"]["requested"] == "v999.0.0"
    assert V in r["error"]["data"]["supported"] and "2025-11-25" in r["error"]["data"]["supported"]


@pytest.mark.parametrize("method", ["unknown/method", "initialize", "ping", "logging/setLevel",
                                    "resources/subscribe", "resources/unsubscribe"])
def test_unknown_and_removed_methods_are_404(server, method):
    r = modern(server, method, id=500)
    assert (r["_status"], r["id"], r["error"]["code"]) == (404, 500, -32601), r


def test_lists_and_reads_carry_result_type_and_cache_hints(server):
    for method, key in [("tools/list", "tools"), ("prompts/list", "prompts"),
                        ("resources/list", "resources"), ("resources/templates/list", "resourceTemplates")]:
        r = modern(server, method)
        result = r["result"]
        assert result["resultType"] == "complete" and isinstance(result[key], list), (method, r)
        assert result["ttlMs"] >= 0 and result["cacheScope"] == "public", (method, result)
    read = modern(server, "resources/read", {"uri": "test://static-text"})["result"]
    assert read["contents"][0]["text"].startswith("This is the content")
    assert (read["resultType"], read["ttlMs"], read["cacheScope"]) == ("complete", 0, "private")


def test_tools_list_order_is_stable(server):
    names = [[t["name"] for t in modern(server, "tools/list")["result"]["tools"]] for _ in range(3)]
    assert names[0] == names[1] == names[2] and "echo" in names[0]


def test_a_call_is_a_complete_result_and_mints_no_session(server):
    r = modern(server, "tools/call", {"name": "echo", "arguments": {"text": "hi", "times": 2}}, raw=True)
    assert r.status_code == 200 and "mcp-session-id" not in r.headers
    result = parse_reply(r)["result"]
    assert result["content"][0]["text"] == "hi hi"
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hangar"
    assert "ttlMs" not in result


def test_a_session_id_on_a_modern_request_is_ignored(server):
    r = modern(server, "tools/list", headers={"mcp-session-id": "nonsense"}, raw=True)
    assert r.status_code == 200 and "mcp-session-id" not in r.headers
    assert parse_reply(r)["result"]["resultType"] == "complete"


def test_an_unknown_resource_is_invalid_params(server):
    r = modern(server, "resources/read", {"uri": "test://nothing-here"})
    assert r["error"]["code"] == -32602 and r["error"]["data"]["uri"] == "test://nothing-here", r


def test_logs_flow_only_to_a_request_that_set_a_log_level(server):
    quiet = modern(server, "tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    assert "result" in quiet and not [e for e in quiet["_events"] if e["method"] == "notifications/message"]
    loud = modern(server, "tools/call", {"name": "test_tool_with_logging", "arguments": {},
                                         "_meta": meta(**{"io.modelcontextprotocol/logLevel": "debug"})})
    logs = [e for e in loud["_events"] if e["method"] == "notifications/message"]
    assert "result" in loud and logs, loud


def listen(server, notifications, frames, ready, id=41):
    """Reads a subscriptions/listen stream into `frames` until it ends or the test closes it."""
    params = {"_meta": meta(), "notifications": notifications}
    with httpx.Client(timeout=httpx.Timeout(30, read=60)) as http:
        with http.stream("POST", server.url + "/mcp", headers=headers_for("subscriptions/listen", params),
                         json={"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
                               "params": params}) as r:
            frames.append({"_status": r.status_code, "_type": r.headers.get("content-type")})
            for line in r.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    ready.set()
                if len(frames) > 3:
                    return


def test_listen_acknowledges_then_sends_only_what_was_asked(server):
    frames, ready = [], threading.Event()
    t = threading.Thread(target=listen, daemon=True, args=(
        server, {"resourceSubscriptions": ["test://watched-resource"], "promptsListChanged": True},
        frames, ready))
    t.start()
    assert ready.wait(30), frames
    assert frames[0]["_status"] == 200 and frames[0]["_type"].startswith("text/event-stream")
    ack = frames[1]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 41
    assert ack["params"]["notifications"] == {"promptsListChanged": True,
                                              "resourceSubscriptions": ["test://watched-resource"]}
    for uri in ("test://other", "test://watched-resource"):
        r = modern(server, "tools/call", {"name": "test_touch_resource", "arguments": {"uri": uri}})
        assert "result" in r, r
    wait_for(lambda: len(frames) > 2, 30, "the resource update on the listen stream")
    update = frames[2]
    assert update["method"] == "notifications/resources/updated", frames
    assert update["params"]["uri"] == "test://watched-resource"
    assert update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 41


def test_a_bad_filter_is_invalid_params(server):
    r = modern(server, "subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}})
    assert (r["_status"], r["error"]["code"]) == (200, -32602), r


def test_clients_of_2025_are_served_as_before(server):
    c = Mcp(server.url)
    init = c.initialize()
    assert init["result"]["protocolVersion"] == "2025-11-25" and c.session
    r = c.call("echo", {"text": "old"})
    assert r["result"]["content"][0]["text"] == "old" and "resultType" not in r["result"]
    # A 2025 request with no session and no version header is still the 2025 revision.
    bare = Mcp(server.url).request("tools/list")
    assert "tools" in bare["result"] and "resultType" not in bare["result"]


def test_a_guest_names_its_questions_and_asks_for_the_clients_roots(server):
    caps = {"elicitation": {}, "sampling": {}, "roots": {}}
    call = {"name": "test_input_required_result_multiple_inputs", "arguments": {}}
    first = modern(server, "tools/call", call, caps=caps)
    asked = first["result"]["inputRequests"]
    assert first["result"]["resultType"] == "input_required", first
    # The keys are the guest's own names (client.elicit-as and friends), not numbers.
    assert {k: v["method"] for k, v in asked.items()} == {
        "user_name": "elicitation/create", "greeting": "sampling/createMessage", "client_roots": "roots/list"}
    assert asked["client_roots"]["params"] == {}
    answers = {
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hello there!"},
                     "model": "m", "stopReason": "endTurn"},
        "client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}, {"uri": "file:///b"}]},
    }
    done = modern(server, "tools/call", {**call, "inputResponses": answers,
                                         "requestState": first["result"]["requestState"]}, caps=caps)
    assert done["result"]["resultType"] == "complete", done
    assert done["result"]["content"][0]["text"] == \
        "Hello there!, Alice (roots: Test Root (file:///test/root), file:///b)"
    # A client that cannot list its roots is told which capability the tool needs.
    r = modern(server, "tools/call", {"name": "test_input_required_result_list_roots", "arguments": {}},
               caps={"elicitation": {}})
    assert (r["_status"], r["error"]["code"]) == (400, -32021), r
    assert r["error"]["data"]["requiredCapabilities"] == {"roots": {}}


def tool_names(server):
    names, cursor = [], None
    while True:
        r = modern(server, "tools/list", {"cursor": cursor} if cursor else {})
        names += [t["name"] for t in r["result"]["tools"]]
        cursor = r["result"].get("nextCursor")
        if not cursor:
            return names


def test_a_guest_that_changes_its_tool_list_is_listed_again_and_listeners_hear_it(server):
    assert "test_changed_tool" not in tool_names(server)
    frames, ready = [], threading.Event()
    t = threading.Thread(target=listen, daemon=True, args=(server, {"toolsListChanged": True}, frames, ready))
    t.start()
    assert ready.wait(30), frames
    r = modern(server, "tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    assert r["result"]["content"][0]["text"] == "test_changed_tool listed", r
    wait_for(lambda: len(frames) > 2, 30, "tools/list_changed on the listen stream")
    assert frames[2]["method"] == "notifications/tools/list_changed", frames
    # The catalog is swapped before clients hear of it: the new tool is listed and callable.
    assert "test_changed_tool" in tool_names(server)
    r = modern(server, "tools/call", {"name": "test_changed_tool", "arguments": {}})
    assert r["result"]["content"][0]["text"] == "changed tool called", r
    # A 2025 session sees the same list.
    old = Mcp(server.url)
    old.initialize()
    assert "test_changed_tool" in [t["name"] for t in old.request("tools/list")["result"]["tools"]]
    # Flipped back: gone again.
    r = modern(server, "tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    assert r["result"]["content"][0]["text"] == "test_changed_tool removed", r
    wait_for(lambda: "test_changed_tool" not in tool_names(server), 30, "the tool to be removed")


ADMIN_KEY, USER_KEY = "admin-key-0123456789abcdef0123", "user-key-0123456789abcdef01234"

PRIVATE = f"""
[plugins.api-key]
config = {{ keys = "admin={ADMIN_KEY},user={USER_KEY}" }}

[auth]
plugin = "api-key"

[[tools]]
name = "echo"
visible_to = {{ sub = ["admin"] }}
"""


def test_a_listing_shaped_by_who_asks_is_private(start_server):
    """With an x-api-key auth plugin and `visible_to`, a listing depends on who asks: its
    cacheScope is never "public" (a shared cache would hand the admin's list to anyone)."""
    s = start_server(plugins=("echo", "everything", "api-key"), config=PRIVATE)
    params = {"_meta": meta()}
    for method, key in (("tools/list", "tools"), ("resources/list", "resources"),
                        ("resources/templates/list", "resourceTemplates"),
                        ("prompts/list", "prompts")):
        for who in ({"x-api-key": ADMIN_KEY}, {"x-api-key": USER_KEY}, {}):
            r = httpx.post(s.url + "/mcp", headers={**headers_for(method, params), **who},
                           content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                               "params": params})).json()
            result = r["result"]
            if method == "tools/list":
                admin = who.get("x-api-key") == ADMIN_KEY
                assert ("echo" in [t["name"] for t in result[key]]) is admin, (who, result)
            assert result["cacheScope"] == "private", (method, who, result)


# --- subscriptions/listen asks what resources/subscribe asks -----------------

GUARDED_RESOURCE = """
[plugins.api-key]
config = { keys = "reader=r3ad" }

[[resources]]
uri = "test://watched-resource"
auth = { plugin = "api-key" }

[[resources]]
uri = "test://static-binary"
auth = { plugin = "api-key" }
visible_to = { sub = ["admin"] }

[toolsets.text]
resources = ["test://static-text"]
"""


@pytest.fixture(scope="module")
def guarded(start_server):
    return start_server(plugins=("everything", "api-key"), config=GUARDED_RESOURCE, cache=False)


def listen_at(server, path, notifications, frames, ready, headers=None, id=42):
    params = {"_meta": meta(), "notifications": notifications}
    with httpx.Client(timeout=httpx.Timeout(30, read=60)) as http:
        with http.stream("POST", server.url + path,
                         headers={**headers_for("subscriptions/listen", params), **(headers or {})},
                         json={"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
                               "params": params}) as r:
            frames.append({"_status": r.status_code})
            for line in r.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    ready.set()
                if len(frames) > 2:
                    return


def start_listening(server, notifications, path="/mcp", headers=None):
    frames, ready = [], threading.Event()
    threading.Thread(target=listen_at, daemon=True,
                     args=(server, path, notifications, frames, ready, headers)).start()
    assert ready.wait(30), frames
    assert frames[1]["method"] == "notifications/subscriptions/acknowledged", frames
    return frames


ALL = ["test://watched-resource", "test://static-binary", "test://static-text"]


def touch(server, uri):
    r = modern(server, "tools/call", {"name": "test_touch_resource", "arguments": {"uri": uri}})
    assert "result" in r, r


def test_listen_leaves_out_what_the_listener_may_not_read(guarded):
    # Anonymous: the resources behind an auth check are not watched, as if
    # they did not exist.
    frames = start_listening(guarded, {"resourceSubscriptions": ALL})
    assert frames[1]["params"]["notifications"] == {"resourceSubscriptions": ["test://static-text"]}
    # Their updates are not sent: the first update on the stream is the
    # readable one's, touched after the others.
    touch(guarded, "test://watched-resource")
    touch(guarded, "test://static-binary")
    touch(guarded, "test://static-text")
    wait_for(lambda: len(frames) > 2, 30, "an update on the listen stream")
    assert frames[2]["params"]["uri"] == "test://static-text", frames


def test_listen_with_the_key_watches_what_the_key_may_read(guarded):
    # The key passes both checks; `static-binary` is shown only to `admin`.
    frames = start_listening(guarded, {"resourceSubscriptions": ALL}, headers={"x-api-key": "r3ad"})
    assert sorted(frames[1]["params"]["notifications"]["resourceSubscriptions"]) == [
        "test://static-text", "test://watched-resource"]
    touch(guarded, "test://watched-resource")
    wait_for(lambda: len(frames) > 2, 30, "an update on the listen stream")
    assert frames[2]["params"]["uri"] == "test://watched-resource", frames


def test_listen_through_a_toolset_watches_only_its_resources(guarded):
    frames = start_listening(guarded, {"resourceSubscriptions": ALL}, path="/mcp/text",
                             headers={"x-api-key": "r3ad"})
    assert frames[1]["params"]["notifications"] == {"resourceSubscriptions": ["test://static-text"]}
