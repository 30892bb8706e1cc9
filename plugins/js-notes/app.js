// js-notes: resources, a prompt, completions, an eliciting tool and an MCP
// App in JavaScript (componentize-js, the `app` world: `server` and `meta`).
// Build: node node_modules/@bytecodealliance/componentize-js/src/cli.js app.js \
//          --wit ../../wit --world-name app -d http fetch-event -o js-notes.wasm
import { elicit } from "hangar:plugin/client@0.1.0";
// The MCP Apps helpers: sdk/js/hangar-app.js, which the build copies here
// (componentize-js reads only files in the app's own folder).
import { APP_MIME_TYPE, pairs, toolMeta, viewMeta } from "./hangar-app.js";

const COLORS = ["blue", "green", "orange", "purple"];

// The view of `js.show_color`: a swatch, and a button per color that asks
// the host to call `js.show_color` again (MCP Apps, SEP-1865).
const SWATCH = "ui://js-notes/swatch";
const SWATCH_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>Color</title>
<style>body{font:15px system-ui,sans-serif;margin:12px}#swatch{width:120px;height:60px;border:1px solid #888}</style>
</head><body>
<h1 id="name">…</h1><div id="swatch"></div><div id="colors"></div>
<script>
let next = 1;
const waiting = new Map();
function ask(method, params) {
  const id = next++;
  window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve) => waiting.set(id, resolve));
}
function show(result) {
  const c = (result && result.structuredContent) || {};
  document.getElementById("name").textContent = c.color || "";
  document.getElementById("swatch").style.background = c.color || "transparent";
  document.getElementById("colors").replaceChildren(...(c.colors || []).map((name) => {
    const b = document.createElement("button");
    b.textContent = name;
    b.onclick = async () => show((await ask("tools/call", { name: "js.show_color", arguments: { name } })).result);
    return b;
  }));
}
window.addEventListener("message", (ev) => {
  if (ev.source !== window.parent || !ev.data) return;
  const m = ev.data;
  if (m.id !== undefined && waiting.has(m.id)) { waiting.get(m.id)(m); waiting.delete(m.id); return; }
  if (m.method === "ui/notifications/tool-result") show(m.params);
  if (m.method === "ui/resource-teardown") window.parent.postMessage({ jsonrpc: "2.0", id: m.id, result: {} }, "*");
});
ask("ui/initialize", { protocolVersion: "2026-01-26", appInfo: { name: "js-notes", version: "0.1.0" },
                       appCapabilities: {} })
  .then(() => window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized" }, "*"));
</script></body></html>
`;

// Tools: one asks the user (elicitation) in the middle of the call.
export function listTools() {
  return [
    {
      name: "js.pick_color",
      title: "Pick a color (JavaScript)",
      description: "Asks the user for a favourite color, then answers with it",
      inputSchema: JSON.stringify({ type: "object", properties: {} }),
      outputSchema: undefined,
      annotations: undefined,
    },
    {
      name: "js.show_color",
      title: "Show a color (JavaScript, with a view)",
      description: "Shows one color; hosts that render MCP Apps show a swatch",
      inputSchema: JSON.stringify({
        type: "object",
        properties: { name: { type: "string", enum: COLORS } },
        required: ["name"],
      }),
      outputSchema: undefined,
      annotations: undefined,
    },
  ];
}

export function callTool(ctx, name, args) {
  if (name === "js.show_color") {
    const color = JSON.parse(args || "{}").name;
    if (!COLORS.includes(color)) {
      throw { message: `no color ${color}` };
    }
    return {
      content: [{ tag: "text", val: `${color} is a fine color` }],
      structuredContent: JSON.stringify({ color, colors: COLORS }),
    };
  }
  if (name !== "js.pick_color") {
    throw { message: `unknown tool ${name}` };
  }
  const schema = {
    type: "object",
    properties: { color: { type: "string", enum: COLORS, default: "blue" } },
    required: ["color"],
  };
  let answer;
  try {
    answer = elicit("Which color do you like best?", JSON.stringify(schema));
  } catch (e) {
    // A client-error variant: unsupported, failed or timeout.
    throw { message: `could not ask: ${e.payload?.tag ?? e.tag ?? e}${e.payload?.val ? ": " + e.payload.val : ""}` };
  }
  if (answer.action !== "accept") {
    return { content: [{ tag: "text", val: `No color picked (${answer.action}).` }], structuredContent: undefined };
  }
  const { color } = JSON.parse(answer.content ?? "{}");
  return {
    content: [{ tag: "text", val: `Your color: ${color}` }],
    structuredContent: JSON.stringify({ color }),
  };
}

// `js-notes://colors` lists the colors; `js-notes://color/{name}` reads one.
export const resources = {
  listResources() {
    return [
      { uri: "js-notes://colors", name: "colors", title: undefined, description: "Every color",
        mimeType: "application/json", size: undefined },
      { uri: SWATCH, name: "swatch", title: "Color swatch", description: "js.show_color's view",
        mimeType: APP_MIME_TYPE, size: undefined },
    ];
  },
  listTemplates() {
    return [
      { uriTemplate: "js-notes://color/{name}", name: "color", title: undefined,
        description: "One color", mimeType: "text/plain" },
    ];
  },
  read(ctx, uri) {
    if (uri === SWATCH) {
      return [{ uri, mimeType: APP_MIME_TYPE, contents: { tag: "text", val: SWATCH_HTML } }];
    }
    if (uri === "js-notes://colors") {
      return [{ uri, mimeType: "application/json", contents: { tag: "text", val: JSON.stringify(COLORS) } }];
    }
    const name = uri.slice("js-notes://color/".length);
    if (!uri.startsWith("js-notes://color/") || !COLORS.includes(name)) {
      throw { tag: "not-found", val: `no color ${name}` };
    }
    return [{ uri, mimeType: "text/plain", contents: { tag: "text", val: `${name} is a fine color` } }];
  },
};

export const prompts = {
  listPrompts() {
    return [
      { name: "js.paint", title: undefined, description: "Asks the model to describe a room in a color",
        arguments: [{ name: "color", title: undefined, description: "The color", required: true }] },
    ];
  },
  getPrompt(ctx, name, args) {
    const color = new Map(args).get("color");
    if (name !== "js.paint" || !COLORS.includes(color)) {
      throw { tag: "invalid-arguments", val: `color must be one of ${COLORS.join(", ")}` };
    }
    return {
      description: `A ${color} room`,
      messages: [{ role: "user", content: { tag: "text", val: `Describe a room painted ${color}.` } }],
    };
  },
};

export const completion = {
  complete(request) {
    const values = COLORS.filter((c) => c.startsWith(request.value));
    return { values, total: values.length, hasMore: false };
  },
};

// The `_meta` of the tool with a view, and of the view.
export const meta = {
  toolMeta() {
    return pairs({ "js.show_color": toolMeta(SWATCH) });
  },
  resourceMeta() {
    return pairs({ [SWATCH]: viewMeta({ prefersBorder: true }) });
  },
};
