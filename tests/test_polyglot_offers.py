"""Resources, prompts, completions, eliciting tools and MCP Apps written in
Python (componentize-py) and JavaScript (componentize-js), the `app` world
(`server` and `meta`), with the SDKs' app helpers."""

import json

import pytest

from conftest import Mcp, ask_and_answer, session

MIME = "text/html;profile=mcp-app"


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("py-notes", "js-notes"))


def accept(content):
    return lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {"action": "accept", "content": content}}


def test_both_languages_list_what_they_offer(server):
    c = session(server)
    resources = [r["uri"] for r in c.request("resources/list")["result"]["resources"]]
    assert sorted(resources) == ["js-notes://colors", "notes://index", "ui://js-notes/swatch", "ui://py-notes/card"]
    templates = [t["uriTemplate"] for t in c.request("resources/templates/list")["result"]["resourceTemplates"]]
    assert sorted(templates) == ["js-notes://color/{name}", "notes://{topic}"]
    prompts = {p["name"]: p for p in c.request("prompts/list")["result"]["prompts"]}
    assert prompts["py.explain"]["arguments"] == [{"name": "topic", "description": "The note's topic", "required": True}]
    assert prompts["js.paint"]["arguments"][0]["name"] == "color"
    tools = [t["name"] for t in c.request("tools/list")["result"]["tools"]]
    assert sorted(tools) == ["js.pick_color", "js.show_color", "py.pick_note", "py.show_note"]


@pytest.mark.parametrize("tool,args,view", [
    ("py.show_note", {"topic": "wasm"}, "ui://py-notes/card"),
    ("js.show_color", {"name": "green"}, "ui://js-notes/swatch"),
])
def test_both_languages_declare_an_app_with_the_sdk_helpers(server, tool, args, view):
    """`_meta` made by sdk/python/hangar_app.py and sdk/js/hangar-app.js (the `app` world's
    `meta` export): the tool links its view, the view is an MCP App resource with its `_meta.ui`."""
    caps = Mcp(server.url).request("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}})["result"]["capabilities"]
    assert caps["extensions"]["io.modelcontextprotocol/ui"] == {"mimeTypes": [MIME]}
    c = session(server)
    tools = {t["name"]: t for t in c.request("tools/list")["result"]["tools"]}
    assert tools[tool]["_meta"] == {"ui": {"resourceUri": view}}
    listed = {r["uri"]: r for r in c.request("resources/list")["result"]["resources"]}
    assert listed[view]["mimeType"] == MIME
    assert listed[view]["_meta"] == {"ui": {"csp": {}, "prefersBorder": True}}
    read = c.request("resources/read", {"uri": view})["result"]["contents"][0]
    assert read["mimeType"] == MIME and read["text"].startswith("<!doctype html>")
    assert read["_meta"] == listed[view]["_meta"]
    result = c.call(tool, args)["result"]
    assert result.get("isError") is not True and result["structuredContent"], result


def test_python_resources_prompt_and_completion(server):
    c = session(server)
    index = c.request("resources/read", {"uri": "notes://index"})["result"]["contents"][0]
    assert json.loads(index["text"]) == ["hangar", "mcp", "wasm"]
    note = c.request("resources/read", {"uri": "notes://wasm"})["result"]["contents"][0]
    assert note["mimeType"] == "text/plain" and "sandboxed" in note["text"]
    missing = c.request("resources/read", {"uri": "notes://nope"})
    assert missing["error"]["code"] == -32002
    prompt = c.request("prompts/get", {"name": "py.explain", "arguments": {"topic": "mcp"}})["result"]
    assert prompt["description"] == "Explain the note about mcp"
    assert prompt["messages"][0]["content"]["resource"]["uri"] == "notes://mcp"
    bad = c.request("prompts/get", {"name": "py.explain", "arguments": {"topic": "cooking"}})
    assert bad["error"]["code"] == -32602 and "topic must be one of" in bad["error"]["message"]
    done = c.request("completion/complete", {"ref": {"type": "ref/resource", "uri": "notes://{topic}"},
                                             "argument": {"name": "topic", "value": "m"}})
    assert done["result"]["completion"]["values"] == ["mcp"]


def test_javascript_resources_prompt_and_completion(server):
    c = session(server)
    colors = c.request("resources/read", {"uri": "js-notes://colors"})["result"]["contents"][0]
    assert json.loads(colors["text"]) == ["blue", "green", "orange", "purple"]
    one = c.request("resources/read", {"uri": "js-notes://color/green"})["result"]["contents"][0]
    assert one["text"] == "green is a fine color"
    assert c.request("resources/read", {"uri": "js-notes://color/grey"})["error"]["code"] == -32002
    prompt = c.request("prompts/get", {"name": "js.paint", "arguments": {"color": "orange"}})["result"]
    assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "Describe a room painted orange."}}]
    assert c.request("prompts/get", {"name": "js.paint", "arguments": {"color": "x"}})["error"]["code"] == -32602
    done = c.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "js.paint"},
                                             "argument": {"name": "color", "value": "p"}})
    assert done["result"]["completion"]["values"] == ["purple"]


def test_python_tool_elicits(server):
    c = session(server, {"elicitation": {}})
    asked, final = ask_and_answer(server, c, "py.pick_note", {}, accept({"topic": "hangar"}))
    assert asked["params"]["requestedSchema"]["properties"]["topic"]["enum"] == ["hangar", "mcp", "wasm"]
    assert final["result"]["content"][0]["text"].startswith("Hangar hosts MCP tools")
    _, declined = ask_and_answer(server, c, "py.pick_note", {},
                                 lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": {"action": "decline"}})
    assert declined["result"]["content"][0]["text"] == "No note picked."
    # Without the capability the guest hears why, and says so.
    r = session(server).call("py.pick_note", {})
    assert r["result"]["isError"] is True and "elicitation capability" in r["result"]["content"][0]["text"]


def test_javascript_tool_elicits(server):
    c = session(server, {"elicitation": {}})
    asked, final = ask_and_answer(server, c, "js.pick_color", {}, accept({"color": "green"}))
    assert asked["params"]["requestedSchema"]["properties"]["color"]["default"] == "blue"
    assert final["result"]["content"][0]["text"] == "Your color: green"
    assert final["result"]["structuredContent"] == {"color": "green"}
    r = session(server).call("js.pick_color", {})
    assert r["result"]["isError"] is True and "could not ask" in r["result"]["content"][0]["text"]
