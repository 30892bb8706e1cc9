"""MCP Apps for Python plugins (componentize-py, the `app` world).

A tool with an interactive view names it in its `_meta.ui.resourceUri`; the
view is a `ui://` resource of type `text/html;profile=mcp-app`. The `app`
world's `meta` export gives the host both `_meta` objects as JSON text:

    import hangar_app

    class Meta(wit_world.exports.Meta):
        def tool_meta(self):
            return hangar_app.pairs({"chart": hangar_app.tool_meta("ui://my-app/view")})

        def resource_meta(self):
            return hangar_app.pairs({"ui://my-app/view": hangar_app.view_meta()})

Build with `-p path/to/hangar/sdk/python` beside your own folder, so that
componentize-py finds this module (docs/plugins.md). The checks here are the
host's: what fails them would be a load problem of the plugin.
"""

import json

#: The MIME type of a view (`resources/read` of its `ui://` URI).
APP_MIME_TYPE = "text/html;profile=mcp-app"

#: Who may call a tool: the model (an agent) and the view.
VISIBILITIES = ("model", "app")


def tool_meta(resource_uri, visibility=()):
    """A tool's `_meta` linking the view `resource_uri` (a `ui://` URI).
    `visibility`: `("model", "app")` (the default when empty), or `("app",)`
    for a tool only the view calls."""
    if not isinstance(resource_uri, str) or not resource_uri.startswith("ui://"):
        raise ValueError(f"a view's URI must start with ui://, not {resource_uri!r}")
    ui = {"resourceUri": resource_uri}
    if visibility:
        unknown = [v for v in visibility if v not in VISIBILITIES]
        if unknown:
            raise ValueError(f"visibility may hold only 'model' and 'app', not {unknown!r}")
        ui["visibility"] = list(visibility)
    return {"ui": ui}


def view_meta(connect_domains=(), resource_domains=(), frame_domains=(), prefers_border=None):
    """A view resource's `_meta`: the origins it may fetch from
    (`connect_domains`), load scripts, styles and images from
    (`resource_domains`) and frame (`frame_domains`), none for a
    self-contained view; and whether it prefers a border."""
    csp = {}
    for key, domains in (("connectDomains", connect_domains), ("resourceDomains", resource_domains),
                         ("frameDomains", frame_domains)):
        if domains:
            csp[key] = list(domains)
    ui = {"csp": csp}
    if prefers_border is not None:
        ui["prefersBorder"] = bool(prefers_border)
    return {"ui": ui}


def pairs(metas):
    """`{name or URI: _meta}` as the `meta` export answers it: a list of
    `(name or URI, JSON text)`."""
    return [(key, json.dumps(meta)) for key, meta in metas.items()]
