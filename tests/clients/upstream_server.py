"""An upstream MCP server for tests/test_upstreams*.py: the official Python SDK's
FastMCP (mcp<2) over Streamable HTTP under uvicorn, on the port given as argv[1]
(HTTPS with the certificate and key files given as argv[2] and argv[3]), or over
stdio when argv[1] is `stdio` (for tests/test_upstreams_stdio.py: it says it is
ready on stderr first).

Tools: add, echo, fail (an isError result), needs_auth (a JSON-RPC error the SDK
raises), progress (reports progress and logs), slow (sleeps; cancelled reports the cancelled ones), gather (waits for n calls
with one key to arrive together), mutable (its
description is whatever `set_description` last set; the change is announced
with notifications/tools/list_changed on that call's stream), whoami (the
traceparent and session id it was called with), ask_name (elicits a name),
set_prompt_description (changes the prompt `greeting`'s description and
says the prompt list changed), touch (tells the sessions subscribed to a URI that it was updated, on
their standalone streams), add_tool / remove_tool (change the tool list and say so with
notifications/tools/list_changed on that call's stream), add_resource (adds
a resource and says so with notifications/resources/list_changed on that
call's stream), with_meta (a result
with its own _meta), links (resource links a client must not follow blindly:
javascript:, data: and one https link), process (its pid, $STDIO_TEST_VAR and
working directory).

Side routes for the tests (around FastMCP's app, not MCP): GET /_test/deletes
lists the session ids DELETE /mcp was sent for (POST /_test/hold-deletes makes
each DELETE wait, after it is recorded, until POST /_test/release-deletes); POST /_test/add/NAME adds a
tool NAME without telling anyone (for the periodic refresh)."""

import asyncio
import json
import os
import sys

from pydantic import BaseModel

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import UrlElicitationRequiredError

STDIO = sys.argv[1] == "stdio"
port = 0 if STDIO else int(sys.argv[1])
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
    print("slow call started", file=sys.stderr, flush=True)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        CANCELLED.append(seconds)
        raise
    return "woke up"


GATHERING: dict[str, list] = {}


@mcp.tool()
async def gather(key: str, n: int, timeout: float) -> int:
    """Waits until `n` calls with this `key` have arrived, then answers `n`;
    fails after `timeout` seconds with how many had: shows that calls made
    together run together (none of them can end before the last arrives)."""
    arrived = GATHERING.setdefault(key, [0, asyncio.Event()])
    arrived[0] += 1
    if arrived[0] >= n:
        arrived[1].set()
    try:
        await asyncio.wait_for(arrived[1].wait(), timeout)
    except asyncio.TimeoutError:
        # It is no longer there for a later call to meet.
        arrived[0] -= 1
        raise ValueError(f"only {arrived[0] + 1} of {n} calls arrived together") from None
    return n


@mcp.tool()
def cancelled() -> str:
    """The sleeps of `slow` that were cancelled, as a JSON list. A string,
    not a list: FastMCP turns a list into one content item per element, so
    an empty one would be an answer with no content at all."""
    return json.dumps(CANCELLED)


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


@mcp.prompt()
def greeting(who: str) -> str:
    """The original greeting."""
    return f"Say hello to {who}."


@mcp.tool()
async def set_prompt_description(text: str, ctx: Context) -> str:
    """Changes the description of the prompt `greeting` and says the prompt list changed."""
    mcp._prompt_manager.get_prompt("greeting").description = text
    await ctx.session.send_notification(
        types.ServerNotification(types.PromptListChangedNotification()),
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


@mcp.tool()
async def log_later(text: str, seconds: float, ctx: Context) -> str:
    """Returns at once; `seconds` later, logs `text` (a notification that
    belongs to no request)."""
    session = ctx.session

    async def later():
        await asyncio.sleep(seconds)
        await session.send_log_message(level="warning", data=text)
    asyncio.get_running_loop().create_task(later())
    return "later"


def added(name: str):
    """A tool added at run time: answers with its own name."""
    def run() -> str:
        return f"{name} ran"
    return run


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and says the list changed."""
    mcp.add_tool(added(name), name=name, description=f"Added at run time: {name}.")
    await ctx.session.send_notification(
        types.ServerNotification(types.ToolListChangedNotification()),
        related_request_id=ctx.request_id)
    return "added"


@mcp.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Removes the tool called `name` and says the list changed."""
    mcp.remove_tool(name)
    await ctx.session.send_notification(
        types.ServerNotification(types.ToolListChangedNotification()),
        related_request_id=ctx.request_id)
    return "removed"


@mcp.tool()
async def add_resource(uri: str, text: str, ctx: Context) -> str:
    """Adds a text resource at `uri` (with a `_meta`) and says the resource list changed."""
    mcp.resource(uri, name=uri.rsplit("/", 1)[-1], mime_type="text/plain",
                 meta={"test/added": True})(lambda: text)
    await ctx.session.send_notification(
        types.ServerNotification(types.ResourceListChangedNotification()),
        related_request_id=ctx.request_id)
    return "added"


# Sessions subscribed to each URI (resources/subscribe), told by `touch`.
SUBSCRIBED: dict[str, list] = {}


@mcp._mcp_server.subscribe_resource()
async def _subscribe(uri) -> None:
    SUBSCRIBED.setdefault(str(uri), []).append(mcp._mcp_server.request_context.session)


@mcp.tool()
async def touch(uri: str) -> str:
    """Tells every session subscribed to `uri` that it was updated, on each
    one's standalone stream (no request of theirs to answer on)."""
    told = 0
    for subscriber in SUBSCRIBED.get(uri, []):
        try:
            await subscriber.send_resource_updated(uri)
            told += 1
        except Exception:
            pass
    return f"told {told}"


@mcp.tool()
def with_meta() -> types.CallToolResult:
    """A result carrying its own _meta (one key Hangar also sets)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="has meta")],
        _meta={"io.example/source": "upstream", "_trace_id": "from-upstream"})


@mcp.tool()
def links() -> types.CallToolResult:
    """Resource links to render: two that must never become links, one that may."""
    return types.CallToolResult(content=[
        types.ResourceLink(type="resource_link", name="click me", uri="javascript:alert(document.domain)"),
        types.ResourceLink(type="resource_link", name="a page", uri="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="),
        types.ResourceLink(type="resource_link", name="the docs", uri="https://example.com/docs"),
    ])


@mcp.tool()
def process() -> str:
    """This process's id, $STDIO_TEST_VAR and working directory."""
    return f"{os.getpid()} {os.environ.get('STDIO_TEST_VAR', '-')} {os.getcwd()}"


DELETES = []
# Set: DELETEs go through. Cleared by POST /_test/hold-deletes: each DELETE
# waits (after it is recorded) until POST /_test/release-deletes.
DELETES_GO = asyncio.Event()
DELETES_GO.set()


async def respond(send, status, body):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def observed(app):
    """FastMCP's app, recording DELETEs and answering the side routes."""
    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if path == "/_test/deletes":
                return await respond(send, 200, DELETES)
            if path.startswith("/_test/add/") and method == "POST":
                name = path.removeprefix("/_test/add/")
                mcp.add_tool(added(name), name=name, description=f"Added quietly: {name}.")
                return await respond(send, 200, "added")
            if path == "/_test/hold-deletes" and method == "POST":
                DELETES_GO.clear()
                return await respond(send, 200, "held")
            if path == "/_test/release-deletes" and method == "POST":
                DELETES_GO.set()
                return await respond(send, 200, "released")
            if method == "DELETE":
                DELETES.append(dict(scope["headers"]).get(b"mcp-session-id", b"").decode())
                await DELETES_GO.wait()
        await app(scope, receive, send)
    return wrapped


if __name__ == "__main__" and STDIO:
    print("stdio test server ready", file=sys.stderr, flush=True)
    mcp.run("stdio")
elif __name__ == "__main__":
    import uvicorn
    tls = {"ssl_certfile": sys.argv[2], "ssl_keyfile": sys.argv[3]} if len(sys.argv) > 3 else {}
    uvicorn.run(observed(mcp.streamable_http_app()), host="127.0.0.1", port=port,
                log_level="warning", **tls)
