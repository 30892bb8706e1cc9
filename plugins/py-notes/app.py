"""py-notes: resources, a prompt, completions, an eliciting tool and an MCP
App in Python (componentize-py, the `app` world: `server` and `meta`).

Build: componentize-py -d ../../wit -w app componentize -p . -p ../../sdk/python app -o py-notes.wasm
"""

import json

import hangar_app
import wit_world
import wit_world.exports
from componentize_py_types import Err
from wit_world.exports import completion, prompts, resources
from wit_world.imports import client, types

# The view of `py.show_note`: a card with the note, and a button per topic
# that asks the host to call `py.show_note` again (MCP Apps, SEP-1865).
CARD = "ui://py-notes/card"
CARD_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Note</title>
<style>body{font:15px system-ui,sans-serif;margin:12px}h1{font-size:17px}button{margin-right:6px}</style>
</head><body>
<h1 id="topic">…</h1><p id="note"></p><div id="topics"></div>
<script>
let next = 1;
const waiting = new Map();
function ask(method, params) {
  const id = next++;
  window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve) => waiting.set(id, resolve));
}
function show(result) {
  const card = (result && result.structuredContent) || {};
  document.getElementById("topic").textContent = card.topic || "";
  document.getElementById("note").textContent = card.note || "";
  const topics = document.getElementById("topics");
  topics.replaceChildren(...(card.topics || []).map((t) => {
    const b = document.createElement("button");
    b.textContent = t;
    b.onclick = async () => {
      const answer = await ask("tools/call", { name: "py.show_note", arguments: { topic: t } });
      show(answer.result);
    };
    return b;
  }));
}
window.addEventListener("message", (ev) => {
  if (ev.source !== window.parent || !ev.data) return;
  const m = ev.data;
  if (m.id !== undefined && waiting.has(m.id)) { waiting.get(m.id)(m); waiting.delete(m.id); return; }
  if (m.method === "ui/notifications/tool-result") show(m.params);
  if (m.method === "ui/resource-teardown") window.parent.postMessage({ jsonrpc: "2.0", id: m.id, result: {} }, "*");
});
ask("ui/initialize", { protocolVersion: "2026-01-26", appInfo: { name: "py-notes", version: "0.1.0" },
                       appCapabilities: {} })
  .then(() => window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized" }, "*"));
</script></body></html>
"""

NOTES = {
    "wasm": "WebAssembly components are sandboxed: they reach only what the host grants.",
    "mcp": "MCP servers offer tools, resources and prompts to AI clients.",
    "hangar": "Hangar hosts MCP tools written as WebAssembly components.",
}


class WitWorld(wit_world.WitWorld):
    """The tools: one that asks the user (elicitation) before answering."""

    def list_tools(self) -> list[types.ToolDefinition]:
        return [
            types.ToolDefinition(
                name="py.pick_note",
                title="Pick a note (Python)",
                description="Asks the user which note to show, then shows it",
                input_schema=json.dumps({"type": "object", "properties": {}}),
                output_schema=None,
                annotations=None,
            ),
            types.ToolDefinition(
                name="py.show_note",
                title="Show a note (Python, with a view)",
                description="Shows one note; hosts that render MCP Apps show it as a card",
                input_schema=json.dumps({
                    "type": "object",
                    "properties": {"topic": {"type": "string", "enum": sorted(NOTES)}},
                    "required": ["topic"],
                }),
                output_schema=None,
                annotations=None,
            ),
        ]

    def call_tool(self, ctx: types.CallContext, name: str, arguments: str) -> types.CallResult:
        if name == "py.show_note":
            return show_note(json.loads(arguments or "{}").get("topic", ""))
        if name != "py.pick_note":
            raise Err(types.ToolError(message=f"unknown tool {name}"))
        schema = {
            "type": "object",
            "properties": {"topic": {"type": "string", "enum": sorted(NOTES), "description": "Which note"}},
            "required": ["topic"],
        }
        try:
            answer = client.elicit("Which note would you like to read?", json.dumps(schema))
        except Err as e:
            raise Err(types.ToolError(message=f"could not ask: {e.value}"))
        if answer.action != client.ElicitAction.ACCEPT:
            return types.CallResult(content=[types.ContentBlock_Text("No note picked.")], structured_content=None)
        topic = json.loads(answer.content or "{}").get("topic", "")
        note = NOTES.get(topic)
        if note is None:
            raise Err(types.ToolError(message=f"no note about {topic!r}"))
        return types.CallResult(content=[types.ContentBlock_Text(note)], structured_content=None)


def show_note(topic: str) -> types.CallResult:
    note = NOTES.get(topic)
    if note is None:
        raise Err(types.ToolError(message=f"no note about {topic!r}"))
    card = {"topic": topic, "note": note, "topics": sorted(NOTES)}
    return types.CallResult(content=[types.ContentBlock_Text(note)], structured_content=json.dumps(card))


class Resources(wit_world.exports.Resources):
    """`notes://index` lists the topics; `notes://{topic}` reads one;
    `ui://py-notes/card` is `py.show_note`'s view."""

    def list_resources(self) -> list[resources.ResourceDefinition]:
        return [
            resources.ResourceDefinition(
                uri="notes://index", name="notes-index", title=None,
                description="The topics of the notes", mime_type="application/json", size=None),
            resources.ResourceDefinition(
                uri=CARD, name="note-card", title="Note card",
                description="py.show_note's view", mime_type=hangar_app.APP_MIME_TYPE, size=None),
        ]

    def list_templates(self) -> list[resources.ResourceTemplate]:
        return [resources.ResourceTemplate(
            uri_template="notes://{topic}", name="note", title=None,
            description="One note, by topic", mime_type="text/plain")]

    def read(self, ctx: types.CallContext, uri: str) -> list[resources.ResourceItem]:
        if uri == CARD:
            return [resources.ResourceItem(uri=uri, mime_type=hangar_app.APP_MIME_TYPE,
                                           contents=types.ResourceContents_Text(CARD_HTML))]
        if uri == "notes://index":
            body = types.ResourceContents_Text(json.dumps(sorted(NOTES)))
            return [resources.ResourceItem(uri=uri, mime_type="application/json", contents=body)]
        topic = uri.removeprefix("notes://")
        if topic not in NOTES:
            raise Err(resources.ResourceError_NotFound(f"no note about {topic!r}"))
        return [resources.ResourceItem(uri=uri, mime_type="text/plain",
                                       contents=types.ResourceContents_Text(NOTES[topic]))]


class Prompts(wit_world.exports.Prompts):
    def list_prompts(self) -> list[prompts.PromptDefinition]:
        return [prompts.PromptDefinition(
            name="py.explain", title=None, description="Asks the model to explain a note",
            arguments=[prompts.PromptArgument(name="topic", title=None, description="The note's topic",
                                              required=True)])]

    def get_prompt(self, ctx: types.CallContext, name: str, arguments: list[tuple[str, str]]) -> prompts.PromptResult:
        args = dict(arguments)
        topic = args.get("topic", "")
        if name != "py.explain" or topic not in NOTES:
            raise Err(prompts.PromptError_InvalidArguments(f"topic must be one of {sorted(NOTES)}"))
        note = types.ContentBlock_Resource(types.EmbeddedResource(
            uri=f"notes://{topic}", mime_type="text/plain", contents=types.ResourceContents_Text(NOTES[topic])))
        return prompts.PromptResult(description=f"Explain the note about {topic}", messages=[
            prompts.PromptMessage(role=types.Role.USER, content=note),
            prompts.PromptMessage(role=types.Role.USER,
                                  content=types.ContentBlock_Text("Explain this note to a newcomer.")),
        ])


class Completion(wit_world.exports.Completion):
    def complete(self, request: completion.CompletionRequest) -> completion.Completions:
        values = [t for t in sorted(NOTES) if t.startswith(request.value)]
        return completion.Completions(values=values, total=len(values), has_more=False)


class Meta(wit_world.exports.Meta):
    """The `_meta` of the tool with a view, and of the view."""

    def tool_meta(self) -> list[tuple[str, str]]:
        return hangar_app.pairs({"py.show_note": hangar_app.tool_meta(CARD)})

    def resource_meta(self) -> list[tuple[str, str]]:
        return hangar_app.pairs({CARD: hangar_app.view_meta(prefers_border=True)})
