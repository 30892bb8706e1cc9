"""Drives Hangar with the official Python MCP SDK 2.x (run in its own virtualenv,
since the suite's main one holds 1.x) in the mode given (legacy, auto, or a protocol
version to pin). Prints one JSON object of what it saw."""

import asyncio
import json
import sys

from mcp import Client, types


async def elicit(context, params: types.ElicitRequestParams):
    props = sorted(params.requested_schema["properties"])
    return types.ElicitResult(action="accept", content={"username": "sdk2", "email": "s@d.k", "seen": ",".join(props)})


async def main(url: str, mode: str) -> None:
    seen = {}
    async with Client(url, elicitation_callback=elicit, mode=mode) as c:
        seen["protocol"] = c.protocol_version
        seen["tools"] = [t.name for t in (await c.list_tools()).tools]
        echo = await c.call_tool("echo", {"text": "sdk2", "times": 2})
        seen["echo"] = [echo.content[0].text, echo.is_error]
        seen["resources"] = [r.uri for r in (await c.list_resources()).resources]
        seen["templates"] = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        text = await c.read_resource("test://static-text")
        seen["text"] = text.contents[0].text
        templated = await c.read_resource("test://template/42/data")
        seen["templated"] = json.loads(templated.contents[0].text)
        seen["prompts"] = [p.name for p in (await c.list_prompts()).prompts]
        prompt = await c.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        seen["prompt"] = prompt.messages[0].content.text
        done = await c.complete(types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
                                {"name": "arg1", "value": "par"})
        seen["completion"] = done.completion.values
        result = await c.call_tool("test_elicitation", {"message": "Who are you?"})
        seen["elicited"] = result.content[0].text
        seen["elicited_error"] = result.is_error
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "auto"))
