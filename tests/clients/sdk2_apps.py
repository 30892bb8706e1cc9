"""Drives Hangar's MCP Apps with the official Python MCP SDK 2.x (run in its own
virtualenv) in the mode given (legacy, or a protocol version to pin), declaring the
`io.modelcontextprotocol/ui` extension or not. Prints one JSON object of what it saw:
the server's extensions, each tool's _meta, the view's listing and read item."""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.extension import advertise

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
VIEW = "ui://sales-chart/view"


async def main(url: str, mode: str, declare: bool) -> None:
    seen = {}
    extensions = [advertise(UI, {"mimeTypes": [MIME]})] if declare else None
    async with Client(url, mode=mode, extensions=extensions) as c:
        seen["protocol"] = c.protocol_version
        caps = c.server_capabilities.model_dump(by_alias=True, exclude_none=True)
        seen["extensions"] = caps.get("extensions") or {}
        tools = (await c.list_tools()).tools
        seen["tools"] = {t.name: t.meta for t in tools}
        listed = [r for r in (await c.list_resources()).resources if r.uri == VIEW]
        seen["listed"] = [{"mimeType": r.mime_type, "_meta": r.meta} for r in listed]
        item = (await c.read_resource(VIEW)).contents[0]
        seen["read"] = {"uri": str(item.uri), "mimeType": item.mime_type, "_meta": item.meta,
                        "doctype": item.text.startswith("<!DOCTYPE html>")}
        chart = await c.call_tool("sales.chart", {"region": "north"})
        seen["chart"] = chart.structured_content
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] == "declare"))
