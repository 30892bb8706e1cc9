"""py-http: a Hangar tool in Python that calls a JSON API over wasi:http.

Built with componentize-py against the `tool-http` world (the `tool` world
plus `wasi:http/outgoing-handler`), which gives it the wasi:http bindings
that `http_client.py`, next to this file, wraps. The API's base URL is the
plugin's config key `base_url`; the operator grants its host:

    [plugins.py-http]
    config = { base_url = "https://api.example.org" }
    grants = { http = ["api.example.org"] }

Build: componentize-py -d ../../wit -w tool-http componentize app -o py-http.wasm
"""

import json

import wit_world
from componentize_py_types import Err
# In `tool-http` two imported interfaces are called `types`; componentize-py
# names Hangar's `hangar_plugin_types` (and wasi:http's `wasi_http_types`).
from wit_world.imports import config, host
from wit_world.imports import hangar_plugin_types as types

import http_client

TOOL = "py.fetch_json"


def fail(message: str):
    raise Err(types.ToolError(message=f"py-http: {message}"))


class WitWorld(wit_world.WitWorld):
    def list_tools(self) -> list[types.ToolDefinition]:
        return [
            types.ToolDefinition(
                name=TOOL,
                title="Fetch JSON (Python)",
                description="GETs a path of the configured JSON API and answers its JSON; "
                            "with `body`, POSTs that JSON instead",
                input_schema=json.dumps({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Path under the API's base URL, e.g. /items/1"},
                        "body": {"type": "object", "description": "JSON to POST (optional)"},
                    },
                    "required": ["path"],
                }),
                output_schema=None,
                annotations=types.Annotations(
                    read_only_hint=None, destructive_hint=None, idempotent_hint=None, open_world_hint=True),
            )
        ]

    def call_tool(self, ctx: types.CallContext, name: str, arguments: str) -> types.CallResult:
        if name != TOOL:
            fail(f"unknown tool {name}")
        args = json.loads(arguments)
        path = args.get("path", "")
        base = config.get("base_url")
        if base is None:
            fail("no base_url in [plugins.py-http] config")
        url = base.rstrip("/") + "/" + path.lstrip("/")
        headers = {"accept": "application/json"}
        try:
            if "body" in args:
                headers["content-type"] = "application/json"
                response = http_client.post(url, json.dumps(args["body"]).encode(), headers)
            else:
                response = http_client.get(url, headers)
        except http_client.HttpError as e:
            fail(f"request failed: {e}")  # e.g. HttpRequestDenied: a host not granted
        text = response.body.decode("utf-8", "replace")
        if not 200 <= response.status < 300:
            fail(f"the API answered {response.status}: {text[:200]}")
        try:
            value = json.loads(text)
        except ValueError as e:
            fail(f"the API answered invalid JSON: {e}")
        host.log(host.LogLevel.INFO, f"fetched {path}: {response.status}")
        return types.CallResult(
            content=[types.ContentBlock_Text(json.dumps(value))],
            structured_content=json.dumps(value) if isinstance(value, dict) else None,
        )
