"""py-notes: resources, a prompt, completions and an eliciting tool in Python
(componentize-py, the `server` world).

Build: componentize-py -d ../../wit -w server componentize app -o py-notes.wasm
"""

import json

import wit_world
import wit_world.exports
from componentize_py_types import Err
from wit_world.exports import completion, prompts, resources
from wit_world.imports import client, types

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
            )
        ]

    def call_tool(self, ctx: types.CallContext, name: str, arguments: str) -> types.CallResult:
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


class Resources(wit_world.exports.Resources):
    """`notes://index` lists the topics; `notes://{topic}` reads one."""

    def list_resources(self) -> list[resources.ResourceDefinition]:
        return [resources.ResourceDefinition(
            uri="notes://index", name="notes-index", title=None,
            description="The topics of the notes", mime_type="application/json", size=None)]

    def list_templates(self) -> list[resources.ResourceTemplate]:
        return [resources.ResourceTemplate(
            uri_template="notes://{topic}", name="note", title=None,
            description="One note, by topic", mime_type="text/plain")]

    def read(self, ctx: types.CallContext, uri: str) -> list[resources.ResourceItem]:
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
