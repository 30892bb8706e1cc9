"""An MCP App from npm behind Hangar: `@modelcontextprotocol/server-basic-vanillajs`
(the MCP Apps SDK's basic example server, ext-apps 2.x, pinned in tests/package.json),
run on the Node 22 that tests/package.json installs, as an upstream over stdio
(`--stdio`) or over Streamable HTTP (its default, on `PORT`). It offers one app
tool, `get-time` (`_meta.ui.resourceUri` = `ui://get-time/mcp-app.html`), and
that view, a `text/html;profile=mcp-app` page.

    from apps_upstream import start_apps
    s = start_apps(start_server)      # Hangar with [upstreams.apps], tools as apps.get-time
"""

import os
import subprocess
from pathlib import Path

import httpx

from conftest import free_port, wait_for

HERE = Path(__file__).parent
NODE = HERE / "node_modules" / ".bin" / "node"
BASIC_APP = HERE / "node_modules" / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
TOOL = "get-time"
VIEW = "ui://get-time/mcp-app.html"
MIME = "text/html;profile=mcp-app"


def stdio_config(name="apps", prefix="apps.", extra=""):
    """`[upstreams.NAME]` running the example server as a child over stdio."""
    return f"""
[upstreams.{name}]
command = ["{NODE}", "{BASIC_APP}"]
args = ["--stdio"]
prefix = "{prefix}"
timeout = "30s"
{extra}
"""


def http_config(url, name="apps", prefix="apps.", extra=""):
    """`[upstreams.NAME]` reaching the example server over Streamable HTTP."""
    return f"""
[upstreams.{name}]
url = "{url}"
prefix = "{prefix}"
timeout = "30s"
{extra}
"""


def tools_listed(s, prefix="apps."):
    r = httpx.get(s.url + "/tools", timeout=10)
    return r.status_code == 200 and any(t["name"] == prefix + TOOL for t in r.json())


def start_apps(start_server, config=None, plugins=(), env=None):
    """Hangar with the example server as `[upstreams.apps]` (stdio unless
    `config` says otherwise), once its tool is listed."""
    s = start_server(plugins=plugins, config=config or stdio_config(), env=env)
    wait_for(lambda: tools_listed(s), 60, "the app server's tools")
    return s


class HttpApp:
    """The example server over Streamable HTTP on a free port (stateless: a
    server per request, as its own main starts it)."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen([str(NODE), str(BASIC_APP)], env={**os.environ, "PORT": str(self.port)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            assert self.proc.poll() is None, "the app server exited"
            try:
                httpx.get(self.url, timeout=1)
                return True
            except httpx.TransportError:
                return False
        wait_for(up, 30, "the app server over HTTP")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
