"""An upstream MCP server for tests/wip_upstream_files.py: the official Python
SDK's FastMCP (mcp<2) over stdio (argv[1] = `stdio`; it says it is ready on
stderr first). Its tools stand in for third-party tools whose files Hangar's
upstream adapters turn into artifacts or feed with uploads:

- report, report_whole: answer their `text` as given (a regex locator finds a
  path in it);
- structured: a result whose structuredContent holds `path` at /result/path;
- image, image_raw: a text block and a 1x1 PNG image block;
- embedded: a text block and an embedded resource (base64 blob) whose URI ends
  with `name`;
- write_to: writes `content` to `dest`, or to `out` when `dest` is empty, and
  says "saved to <where>" (an output_path_argument tool that may ignore the
  path it was given);
- read_nested, read_many: read the files named at options.file / in paths and
  answer, as JSON, each path they were given with its text (so a test sees
  which path an upload handle became)."""

import base64
import json
import sys

from mcp import types
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("locator-under-test", log_level="WARNING")

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


@mcp.tool()
def report(text: str) -> str:
    """Answers its text as it is."""
    return text


@mcp.tool()
def report_whole(text: str) -> str:
    """Answers its text as it is (for a pattern without a capture group)."""
    return text


@mcp.tool()
def structured(path: str) -> types.CallToolResult:
    """A result with the path in its structured content, at /result/path."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="see the structured content")],
        structuredContent={"result": {"path": path, "note": "written"}})


def image_result(caption: str) -> types.CallToolResult:
    return types.CallToolResult(content=[
        types.TextContent(type="text", text=caption),
        types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png"),
    ])


@mcp.tool()
def image(caption: str) -> types.CallToolResult:
    """A caption and a PNG image."""
    return image_result(caption)


@mcp.tool()
def image_raw(caption: str) -> types.CallToolResult:
    """A caption and a PNG image (its adapter keeps the raw block)."""
    return image_result(caption)


@mcp.tool()
def embedded(name: str, data_b64: str) -> types.CallToolResult:
    """A text block and an embedded resource holding the given bytes."""
    return types.CallToolResult(content=[
        types.TextContent(type="text", text="attached"),
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri=f"file:///reports/{name}", blob=data_b64, mimeType="application/octet-stream")),
    ])


@mcp.tool()
def write_to(out: str, content: str, dest: str = "") -> str:
    """Writes `content` to `dest`, or to `out` when `dest` is empty."""
    where = dest or out
    with open(where, "w") as f:
        f.write(content)
    return f"saved to {where}"


@mcp.tool()
def read_nested(options: dict[str, str]) -> str:
    """Reads the file at options.file."""
    path = options["file"]
    with open(path) as f:
        return json.dumps({"path": path, "text": f.read()})


@mcp.tool()
def read_many(paths: list[str]) -> str:
    """Reads each file named in paths."""
    out = []
    for path in paths:
        with open(path) as f:
            out.append({"path": path, "text": f.read()})
    return json.dumps(out)


if __name__ == "__main__":
    print("locator test server ready", file=sys.stderr, flush=True)
    mcp.run("stdio")
