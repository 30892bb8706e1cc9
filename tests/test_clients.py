"""Real clients nobody here wrote: the official Python MCP SDK and the
official MCP conformance suite (run on Node 22)."""

import asyncio
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("echo", "everything"))


def test_python_sdk_lists_calls_and_sees_tool_errors(server):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(server.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.serverInfo.name == "hangar"
                tools = await session.list_tools()
                names = {t.name for t in tools.tools}
                assert {"echo", "test_simple_text", "test_error_handling"} <= names
                echo = await session.call_tool("echo", {"text": "sdk", "times": 2})
                assert echo.isError is False
                assert echo.content[0].text == "sdk sdk"
                err = await session.call_tool("test_error_handling", {})
                assert err.isError is True
                assert "intentionally" in err.content[0].text
                image = await session.call_tool("test_image_content", {})
                assert image.content[0].type == "image" and image.content[0].mimeType == "image/png"

    asyncio.run(run())


SCENARIOS = [
    "server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-image",
    "tools-call-audio", "tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-error",
    "tools-call-with-logging", "tools-call-with-progress", "logging-set-level",
    "dns-rebinding-protection", "server-sse-multiple-streams",
]

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance(server, scenario):
    bin_dir = HERE / "node_modules" / ".bin"
    assert (bin_dir / "conformance").exists(), "scripts/test installs the conformance suite"
    # node_modules/.bin first: the suite runs on the Node 22 from the npm package.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    assert "v22." in subprocess.run([shutil.which("node", path=env["PATH"]), "--version"],
                                    capture_output=True, text=True, env=env).stdout
    out = subprocess.run(
        ["conformance", "server", "--url", server.url + "/mcp", "--scenario", scenario],
        capture_output=True, text=True, env=env, timeout=120, cwd=HERE, stdin=subprocess.DEVNULL,
    )
    text = ANSI.sub("", out.stdout + out.stderr)
    assert out.returncode == 0, text[-4000:]
