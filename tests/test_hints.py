"""Presenter hints (`_meta["hangar/hints"]`: rules for the model and
suggested next calls) reach a real MCP client, the official Python SDK,
whether an output mapper (redact) or the tool itself (csv_report) set them."""

import asyncio

import httpx
import pytest


@pytest.fixture(scope="module")
def server(start_server):
    config = '''
[[tools]]
name = "echo"
mappers = { output = "redact" }
'''
    return start_server(plugins=("echo", "redact", "csv-report", "wordcount"), config=config)


def test_hints_reach_the_python_sdk(server):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(server.url + "/mcp") as (read, write, session_id):
            async with ClientSession(read, write) as session:
                await session.initialize()
                # From an output mapper: redact masked an address and says so.
                r = await session.call_tool("echo", {"text": "mail alice@example.com"})
                assert r.content[0].text == "mail [redacted]"
                hints = r.meta["hangar/hints"]
                assert hints["rules"][0].startswith("1 value(s) in this result were replaced by [redacted]")
                assert hints["suggested_calls"] == []
                # Nothing masked, no hints.
                plain = await session.call_tool("echo", {"text": "nothing secret"})
                assert not (plain.meta or {}).get("hangar/hints")
                # From the tool: csv_report's rule and suggested call, beside its artifact.
                r = await session.call_tool("csv_report", {"rows": [{"a": 1}]})
                assert r.isError is False
                hints = r.meta["hangar/hints"]
                assert "download URL" in hints["rules"][0]
                [call] = hints["suggested_calls"]
                assert call["tool"] == "csv_report" and call["arguments"]["filename"] == "next.csv"
                assert r.meta["hangar/artifacts"][0]["name"] == "report.csv"
                # The hints were the only structured content: none is left.
                assert r.structuredContent is None
                [link] = [c for c in r.content if c.type == "resource_link"]
                read = await session.read_resource(link.uri)
                assert read.contents[0].text == "a\r\n1\r\n"
                # The SDK's session uploads too, and a tool of that session reads it.
                up = httpx.post(server.url + "/uploads", files=[("file", ("w.txt", b"one two", "text/plain"))],
                                headers={"mcp-session-id": session_id()})
                assert up.status_code == 201, up.text
                r = await session.call_tool("wordcount", {"files": [up.json()["uploads"][0]["handle"]]})
                assert r.structuredContent["total_words"] == 2

    asyncio.run(run())
