"""Resources, prompts, completion, subscriptions and questions to the client
(elicitation, sampling, roots) over raw MCP, against the `everything` component."""

import json
import queue
import threading
import time

import httpx
import jwt as pyjwt
import pytest

from conftest import PROTOCOL, Mcp, ask_and_answer, session, wait_for

SECRET = "offers-secret-0123456789abcdef0123"

CONFIG = "page_size = 2\n"

# Who may see what: the server-wide check tells who lists; entries narrow it.
VISIBILITY = f"""
[plugins.jwt]
config = {{ hs256_secret = "{SECRET}" }}

[auth]
plugin = "jwt"
policy = {{ audience = "any" }}

[[prompts]]
name = "test_prompt_with_image"
visible_to = {{ role = ["admin"] }}

[[resources]]
uri = "test://static-binary"
visible_to = {{ role = ["admin"] }}

[[resources]]
uri_template = "test://template/{{id}}/data"
visible_to = {{ role = ["admin"] }}
"""


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("echo", "everything"), config=CONFIG)


def bearer(role):
    claims = {"sub": role + "-user", "role": role, "exp": int(time.time()) + 600}
    return {"authorization": "Bearer " + pyjwt.encode(claims, SECRET, algorithm="HS256")}


def all_pages(c, method, key, headers=None):
    items, cursor = [], None
    while True:
        r = c.request(method, {"cursor": cursor} if cursor else {}, headers=headers)["result"]
        items += r[key]
        cursor = r.get("nextCursor")
        if not cursor:
            return items


def test_capabilities_say_what_is_offered(server, start_server):
    caps = session(server).request(
        "initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}})["result"]["capabilities"]
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert caps["prompts"] == {"listChanged": True}
    assert caps["completions"] == {}
    plain = start_server(plugins=("echo",))
    caps = Mcp(plain.url).initialize()["result"]["capabilities"]
    assert "resources" not in caps and "prompts" not in caps and "completions" not in caps
    # Listing what is not offered answers empty lists, not errors.
    c = Mcp(plain.url)
    assert c.request("resources/list")["result"]["resources"] == []
    assert c.request("prompts/list")["result"]["prompts"] == []


def test_resources_are_listed_in_pages(server):
    c = session(server)
    uris = [r["uri"] for r in all_pages(c, "resources/list", "resources")]
    assert uris == ["test://static-text", "test://static-binary", "test://watched-resource"]
    templates = all_pages(c, "resources/templates/list", "resourceTemplates")
    assert templates == [{"uriTemplate": "test://template/{id}/data", "name": "template-data",
                          "description": "Data for any id", "mimeType": "application/json"}]
    assert c.request("resources/list", {"cursor": "bogus"})["error"]["code"] == -32602


def test_hidden_resources_and_prompts_exist_only_for_their_audience(start_server):
    s = start_server(plugins=("everything", "jwt"), config=VISIBILITY)
    c = Mcp(s.url)
    admin, user = bearer("admin"), bearer("user")
    for who, sees in ((admin, True), (user, False), ({}, False)):
        uris = [r["uri"] for r in c.request("resources/list", headers=who)["result"]["resources"]]
        assert ("test://static-binary" in uris) is sees and "test://static-text" in uris
        templates = c.request("resources/templates/list", headers=who)["result"]["resourceTemplates"]
        assert bool(templates) is sees
        prompts = [p["name"] for p in c.request("prompts/list", headers=who)["result"]["prompts"]]
        assert ("test_prompt_with_image" in prompts) is sees and "test_simple_prompt" in prompts
        read = c.request("resources/read", {"uri": "test://template/7/data"}, headers=who)
        assert ("result" in read) is sees, read
        if not sees:
            # Hidden answers exactly as unknown.
            assert read["error"] == {"code": -32002, "message": "Resource not found",
                                     "data": {"uri": "test://template/7/data"}}
        got = c.request("prompts/get", {"name": "test_prompt_with_image"}, headers=who)
        assert ("result" in got) is sees
        completion = c.request("completion/complete", {
            "ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
            "argument": {"name": "id", "value": "t"}}, headers=who)
        assert ("result" in completion) is sees
    # A visible resource still goes through the server-wide check.
    r = c.request("resources/read", {"uri": "test://static-text"})
    assert r["error"]["code"] == -32000 and r["error"]["data"]["stage"] == "auth"
    assert "result" in c.request("resources/read", {"uri": "test://static-text"}, headers=user)


def test_reading_text_blob_and_templated_resources(server):
    c = session(server)
    text = c.request("resources/read", {"uri": "test://static-text"})["result"]["contents"]
    assert text == [{"uri": "test://static-text", "mimeType": "text/plain",
                     "text": "This is the content of the static text resource."}]
    blob = c.request("resources/read", {"uri": "test://static-binary"})["result"]["contents"][0]
    assert blob["mimeType"] == "image/png" and blob["blob"].startswith("iVBORw0KGgo")
    data = c.request("resources/read", {"uri": "test://template/a%20b/data"})["result"]["contents"][0]
    # The component gets the URI as sent; the template only routes it.
    assert json.loads(data["text"])["id"] == "a%20b"


def test_unknown_hidden_and_malformed_reads_get_clear_errors(server):
    c = session(server)
    for uri in ("test://nope", "test://template/1/2/data", "test://template//data"):
        r = c.request("resources/read", {"uri": uri})
        assert r["error"]["code"] == -32002, r
        assert r["error"]["data"] == {"uri": uri}
    for params in ({}, {"uri": ""}, {"uri": 7}):
        assert c.request("resources/read", params)["error"]["code"] == -32602


def test_prompts_render_with_arguments_and_refuse_bad_ones(server):
    c = session(server)
    listed = all_pages(c, "prompts/list", "prompts")
    assert [p["name"] for p in listed] == ["test_simple_prompt", "test_prompt_with_arguments",
                                           "test_prompt_with_embedded_resource", "test_prompt_with_image",
                                           "test_input_required_result_prompt"]
    assert listed[1]["arguments"][0] == {"name": "arg1", "description": "First test argument",
                                         "required": True}
    r = c.request("prompts/get", {"name": "test_prompt_with_arguments",
                                  "arguments": {"arg1": "x<y", "arg2": "z"}})["result"]
    assert r["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Prompt with arguments: arg1='x<y', arg2='z'"}}]
    embedded = c.request("prompts/get", {"name": "test_prompt_with_embedded_resource",
                                         "arguments": {"resourceUri": "test://x"}})["result"]
    assert embedded["messages"][0]["content"]["resource"]["uri"] == "test://x"
    image = c.request("prompts/get", {"name": "test_prompt_with_image"})
    assert image["result"]["messages"][0]["content"]["type"] == "image"
    bad = [
        {"name": "test_prompt_with_arguments", "arguments": {"arg1": "only one"}},
        {"name": "test_prompt_with_arguments", "arguments": {"arg1": 1, "arg2": "x"}},
        {"name": "test_prompt_with_arguments", "arguments": ["arg1"]},
        {"name": "no_such_prompt"},
        {},
    ]
    for params in bad:
        r = c.request("prompts/get", params)
        assert r["error"]["code"] == -32602, (params, r)
    assert "arg2" in c.request("prompts/get", bad[0])["error"]["message"]


def test_completion_for_prompts_and_templates(server):
    c = session(server)
    r = c.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                                          "argument": {"name": "arg1", "value": "pa"}})
    assert r["result"]["completion"] == {"values": ["paris", "park", "party"], "total": 3, "hasMore": False}
    r = c.request("completion/complete", {"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
                                          "argument": {"name": "id", "value": "tes"},
                                          "context": {"arguments": {"other": "x"}}})
    assert r["result"]["completion"]["values"] == ["test", "testing", "tested"]
    for params in (
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt", "name": "test_simple_prompt"}, "argument": {"name": "a"}},
    ):
        assert c.request("completion/complete", params)["error"]["code"] == -32602, params


class Stream:
    """A session's GET /mcp stream, read on a thread into a queue."""

    def __init__(self, server, session_id, path="/mcp"):
        self.messages = queue.Queue()
        self.ended = threading.Event()
        self.http = httpx.Client(base_url=server.url, timeout=httpx.Timeout(5, read=None))
        self.response = self.http.send(
            self.http.build_request("GET", path, headers={
                "accept": "text/event-stream", "mcp-session-id": session_id}),
            stream=True)
        assert self.response.status_code == 200
        assert self.response.headers["content-type"].startswith("text/event-stream")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for line in self.response.iter_lines():
                if line.startswith("data: "):
                    self.messages.put(json.loads(line[6:]))
        except httpx.HTTPError:
            pass
        self.ended.set()

    def next(self, timeout=10):
        return self.messages.get(timeout=timeout)

    def close(self):
        self.response.close()
        self.http.close()


def test_subscribed_updates_arrive_on_the_session_stream_until_unsubscribed(server):
    c = session(server)
    other = session(server)
    stream = Stream(server, c.session)
    other_stream = Stream(server, other.session)
    try:
        assert c.request("resources/subscribe", {"uri": "test://watched-resource"})["result"] == {}
        assert c.request("resources/subscribe", {"uri": "test://static-text"})["result"] == {}
        assert other.request("resources/subscribe", {"uri": "test://static-text"})["result"] == {}
        assert c.request("resources/subscribe", {"uri": "test://nope"})["error"]["code"] == -32002
        # A guest announces the change; the subscribed session hears of it.
        assert not c.call("test_touch_resource", {"uri": "test://watched-resource"})["result"]["isError"]
        assert stream.next() == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                 "params": {"uri": "test://watched-resource"}}
        assert c.request("resources/unsubscribe", {"uri": "test://watched-resource"})["result"] == {}
        c.call("test_touch_resource", {"uri": "test://watched-resource"})
        c.call("test_touch_resource", {"uri": "test://static-text"})
        # The unsubscribed update never came: the next one is the marker.
        assert stream.next()["params"]["uri"] == "test://static-text"
        # The other session saw only what it subscribed to.
        assert other_stream.next()["params"]["uri"] == "test://static-text"
        # A second GET replaces the first: the first ends, the new one carries updates.
        again = Stream(server, c.session)
        assert wait_for(lambda: stream.ended.is_set(), 10, "the replaced stream to end")
        c.call("test_touch_resource", {"uri": "test://static-text"})
        assert again.next()["params"]["uri"] == "test://static-text"
        again.close()
    finally:
        stream.close()
        other_stream.close()


def test_subscriptions_need_a_session(server):
    r = Mcp(server.url).request("resources/subscribe", {"uri": "test://static-text"})
    assert r["error"]["code"] == -32602 and "session" in r["error"]["message"]


def text_of(final):
    return final["result"]["content"][0]["text"]


def test_a_tool_elicits_and_gets_the_users_answer(server):
    c = session(server, {"elicitation": {}})
    asked, final = ask_and_answer(
        server, c, "test_elicitation", {"message": "Who are you?"},
        lambda req: {"jsonrpc": "2.0", "id": req["id"],
                     "result": {"action": "accept", "content": {"username": "ada", "email": "a@b.c"}}})
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["message"] == "Who are you?"
    assert asked["params"]["requestedSchema"]["required"] == ["username", "email"]
    assert final["result"]["isError"] is False
    assert text_of(final) == 'User response: action=accept, content={"email":"a@b.c","username":"ada"}'
    _, declined = ask_and_answer(server, c, "test_elicitation", {"message": "again?"},
                                 lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {"action": "decline"}})
    assert text_of(declined) == "User response: action=decline, content={}"


def test_a_client_error_or_a_bad_answer_reaches_the_guest_as_an_error(server):
    c = session(server, {"elicitation": {}})
    _, final = ask_and_answer(
        server, c, "test_elicitation", {"message": "?"},
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -1, "message": "user closed the form"}})
    assert final["result"]["isError"] is True
    assert "user closed the form" in text_of(final)
    _, final = ask_and_answer(server, c, "test_elicitation", {"message": "?"},
                              lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {"action": "maybe"}})
    assert final["result"]["isError"] is True and "unknown action" in text_of(final)


def test_an_answer_from_another_session_does_not_count(server):
    c = session(server, {"elicitation": {}})
    intruder = session(server, {"elicitation": {}})

    def answer(req):
        # The intruder's answer is accepted as a message and dropped…
        r = intruder.post({"jsonrpc": "2.0", "id": req["id"], "result": {"action": "accept", "content": {"username": "evil"}}})
        assert r.status_code == 202
        # …and the real answer still reaches the guest.
        return {"jsonrpc": "2.0", "id": req["id"], "result": {"action": "cancel"}}

    _, final = ask_and_answer(server, c, "test_elicitation", {"message": "?"}, answer)
    assert text_of(final) == "User response: action=cancel, content={}"


def test_a_tool_samples_the_clients_llm(server):
    c = session(server, {"sampling": {}})
    asked, final = ask_and_answer(
        server, c, "test_sampling", {"prompt": "Say hi"},
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {
            "role": "assistant", "content": {"type": "text", "text": "hi!"},
            "model": "m-1", "stopReason": "endTurn"}})
    assert asked["method"] == "sampling/createMessage"
    assert asked["params"] == {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                               "maxTokens": 100}
    assert text_of(final) == "LLM response: hi!"


def test_a_tool_asks_for_the_clients_roots(server):
    c = session(server, {"roots": {"listChanged": True}})
    asked, final = ask_and_answer(
        server, c, "test_input_required_result_list_roots", {},
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {
            "roots": [{"uri": "file:///work/repo", "name": "repo"}, {"uri": "file:///tmp"}]}})
    assert asked["method"] == "roots/list" and asked["params"] == {}
    assert text_of(final) == "Client roots: repo (file:///work/repo), file:///tmp"
    # A root without a uri is an answer the guest is told it cannot read.
    _, final = ask_and_answer(server, c, "test_input_required_result_list_roots", {},
                              lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {"roots": [{"name": "x"}]}})
    assert final["result"]["isError"] is True and "no uri" in text_of(final)
    # A client that did not declare roots is not asked.
    r = session(server, {"elicitation": {}}).call("test_input_required_result_list_roots", {})
    assert "did not declare the roots capability" in r["result"]["content"][0]["text"]


def test_clients_that_cannot_be_asked_get_a_clear_error_inside_the_guest(server):
    # No elicitation capability declared.
    c = session(server, {"sampling": {}})
    r = c.call("test_elicitation", {"message": "?"})
    assert r["result"]["isError"] is True
    assert "did not declare the elicitation capability" in r["result"]["content"][0]["text"]
    # A request that accepts JSON only has no stream to ask on.
    json_only = session(server, {"elicitation": {}})
    json_only.http.headers["accept"] = "application/json"
    r = json_only.call("test_elicitation", {"message": "?"})
    assert "did not accept an SSE stream" in r["result"]["content"][0]["text"]
    # Without a session the client's capabilities are unknown.
    r = Mcp(server.url).call("test_sampling", {"prompt": "?"})
    assert "no MCP session" in r["result"]["content"][0]["text"]


def test_an_unanswered_question_times_out_before_the_call_deadline(start_server):
    s = start_server(plugins=("everything",), config='[plugins.everything]\nlimits = { deadline = "1500ms" }\n')
    c = session(s, {"elicitation": {}})
    asked, final = ask_and_answer(s, c, "test_elicitation", {"message": "?"}, lambda req: None)
    assert asked["method"] == "elicitation/create"
    # The guest heard of the timeout and reported it itself.
    assert final["result"]["isError"] is True
    assert text_of(final) == "the client did not answer in time"
    # A late answer finds nobody waiting, and is accepted and dropped.
    late = c.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}})
    assert late.status_code == 202
