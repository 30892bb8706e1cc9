// MCP Apps for JavaScript plugins (componentize-js, the `app` world).
//
// A tool with an interactive view names it in its `_meta.ui.resourceUri`; the
// view is a `ui://` resource of type `text/html;profile=mcp-app`. The `app`
// world's `meta` export gives the host both `_meta` objects as JSON text:
//
//   import { toolMeta, viewMeta, pairs } from "./hangar-app.js";
//   export const meta = {
//     toolMeta: () => pairs({ chart: toolMeta("ui://my-app/view") }),
//     resourceMeta: () => pairs({ "ui://my-app/view": viewMeta() }),
//   };
//
// componentize-js takes one module: copy this file beside your app.js and
// import it, or bundle it in (docs/plugins.md). The checks here are the
// host's: what fails them would be a load problem of the plugin.

// The MIME type of a view (`resources/read` of its `ui://` URI).
export const APP_MIME_TYPE = "text/html;profile=mcp-app";

// Who may call a tool: the model (an agent) and the view.
const VISIBILITIES = ["model", "app"];

// A tool's `_meta` linking the view `resourceUri` (a `ui://` URI).
// `visibility`: ["model", "app"] (the default when empty), or ["app"] for a
// tool only the view calls.
export function toolMeta(resourceUri, visibility = []) {
  if (typeof resourceUri !== "string" || !resourceUri.startsWith("ui://")) {
    throw new Error(`a view's URI must start with ui://, not ${JSON.stringify(resourceUri)}`);
  }
  const ui = { resourceUri };
  if (visibility.length > 0) {
    const unknown = visibility.filter((v) => !VISIBILITIES.includes(v));
    if (unknown.length > 0) {
      throw new Error(`visibility may hold only "model" and "app", not ${JSON.stringify(unknown)}`);
    }
    ui.visibility = [...visibility];
  }
  return { ui };
}

// A view resource's `_meta`: the origins it may fetch from (connectDomains),
// load scripts, styles and images from (resourceDomains) and frame
// (frameDomains), none for a self-contained view; and whether it prefers a
// border.
export function viewMeta({ connectDomains = [], resourceDomains = [], frameDomains = [], prefersBorder } = {}) {
  const csp = {};
  if (connectDomains.length > 0) csp.connectDomains = [...connectDomains];
  if (resourceDomains.length > 0) csp.resourceDomains = [...resourceDomains];
  if (frameDomains.length > 0) csp.frameDomains = [...frameDomains];
  const ui = { csp };
  if (prefersBorder !== undefined) ui.prefersBorder = Boolean(prefersBorder);
  return { ui };
}

// `{ name or URI: _meta }` as the `meta` export answers it: a list of
// [name or URI, JSON text].
export function pairs(metas) {
  return Object.entries(metas).map(([key, meta]) => [key, JSON.stringify(meta)]);
}
