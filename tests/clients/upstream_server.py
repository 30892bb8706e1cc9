"""An upstream MCP server for tests/test_upstreams.py: the official Python SDK's
FastMCP (mcp<2) over Streamable HTTP, on the port given as argv[1].

Tools: add, echo, fail (an isError result), needs_auth (a JSON-RPC error the SDK
raises), progress (reports progress and logs), slow (sleeps; cancelled reports the cancelled ones), mutable (its
description is whatever `set_description` last set; the change is announced
with notifications/tools/list_changed on that call's stream), whoami (the
traceparent and session id it was called with), ask_name (elicits a name)."""

import asyncio
import sys

from pydantic import BaseModel

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import UrlElicitationRequiredError

port = int(sys.argv[1])
mcp = FastMCP("upstream-under-test", port=port, log_level="WARNING")


@mcp.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Answers with its text, between brackets (so a test sees what arrived)."""
    return f"[{text}]"


@mcp.tool()
def fail(reason: str) -> str:
    """Always fails, as a tool-level error."""
    raise ValueError(f"refused: {reason}")


@mcp.tool()
def needs_auth() -> str:
    """Fails with a JSON-RPC error (URL elicitation required)."""
    raise UrlElicitationRequiredError([types.ElicitRequestURLParams(
        message="Sign in first", url="https://example.test/login", elicitationId="e-1")])


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times, logging each step."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await ctx.info(f"did step {i + 1}")
    return f"done {steps}"


CANCELLED = []


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers (a cancelled sleep is remembered)."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        CANCELLED.append(seconds)
        raise
    return "woke up"


@mcp.tool()
def cancelled() -> list[float]:
    """The sleeps of `slow` that were cancelled."""
    return CANCELLED


@mcp.tool()
def mutable() -> str:
    """The original description."""
    return "mutable ran"


@mcp.tool()
async def set_description(text: str, ctx: Context) -> str:
    """Changes the description of `mutable` and says the list changed."""
    mcp._tool_manager.get_tool("mutable").description = text
    await ctx.session.send_notification(
        types.ServerNotification(types.ToolListChangedNotification()),
        related_request_id=ctx.request_id)
    return "changed"


class Name(BaseModel):
    name: str


@mcp.tool()
async def ask_name(ctx: Context) -> str:
    """Asks its client for a name (elicitation), in the middle of the call."""
    result = await ctx.elicit(message="Who are you?", schema=Name)
    if result.action == "accept":
        return f"hello {result.data.name}"
    return f"no name ({result.action})"


@mcp.tool()
def whoami(ctx: Context) -> dict:
    """The traceparent header and the session id this call came with."""
    request = ctx.request_context.request
    return {"traceparent": request.headers.get("traceparent"),
            "session": request.headers.get("mcp-session-id")}


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
