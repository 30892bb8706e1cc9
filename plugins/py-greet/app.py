"""py-greet: a Hangar tool written in Python (componentize-py).

Build: componentize-py -d ../../wit -w tool componentize app -o py-greet.wasm
"""

import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import host, types


class WitWorld(wit_world.WitWorld):
    def list_tools(self) -> list[types.ToolDefinition]:
        return [
            types.ToolDefinition(
                name="py.greet",
                title="Greet (Python)",
                description="Greets someone by name; written in Python",
                input_schema=json.dumps({
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "Who to greet"}},
                    "required": ["name"],
                }),
                output_schema=None,
                annotations=types.Annotations(
                    read_only_hint=True, destructive_hint=None, idempotent_hint=True, open_world_hint=None),
            )
        ]

    def call_tool(self, ctx: types.CallContext, name: str, arguments: str) -> types.CallResult:
        if name != "py.greet":
            raise Err(types.ToolError(message=f"unknown tool {name}"))
        args = json.loads(arguments)
        who = args.get("name", "").strip()
        if not who:
            # A tool-level error: the caller gets isError: true.
            raise Err(types.ToolError(message="name must not be empty"))
        host.log(host.LogLevel.INFO, f"greeting {who}")
        return types.CallResult(
            content=[types.ContentBlock_Text(f"Hello, {who}! (from Python)")],
            structured_content=json.dumps({"greeting": f"Hello, {who}!"}),
        )
