// js-http: a Hangar tool in JavaScript that calls a JSON API with `fetch`
// (componentize-js, built WITHOUT `-d http`, so the component imports
// wasi:http/outgoing-handler). The API's base URL is the plugin's config key
// `base_url`; the operator grants its host:
//
//   [plugins.js-http]
//   config = { base_url = "https://api.example.org" }
//   grants = { http = ["api.example.org"] }
//
// Build: node node_modules/@bytecodealliance/componentize-js/src/cli.js app.js \
//          --wit ../../wit --world-name tool -o js-http.wasm
import { get } from "hangar:plugin/config@0.1.0";
import { log } from "hangar:plugin/host@0.1.0";

export function listTools() {
  return [
    {
      name: "js.fetch_json",
      title: "Fetch JSON (JavaScript)",
      description: "GETs a path of the configured JSON API and answers its JSON",
      inputSchema: JSON.stringify({
        type: "object",
        properties: { path: { type: "string", description: "Path under the API's base URL, e.g. /items/1" } },
        required: ["path"],
      }),
      outputSchema: undefined,
      annotations: { readOnlyHint: true, destructiveHint: undefined, idempotentHint: true, openWorldHint: true },
    },
  ];
}

export async function callTool(ctx, name, args) {
  if (name !== "js.fetch_json") {
    throw { message: `unknown tool ${name}` };
  }
  const { path } = JSON.parse(args);
  const base = get("base_url");
  if (base === undefined) {
    throw { message: "js-http: no base_url in [plugins.js-http] config" };
  }
  const url = base.replace(/\/+$/, "") + (path.startsWith("/") ? path : "/" + path);
  let response;
  try {
    response = await fetch(url, { headers: { accept: "application/json" } });
  } catch (e) {
    // A request the host refused (no grant) lands here.
    throw { message: `js-http: request failed: ${e}` };
  }
  const body = await response.text();
  if (!response.ok) {
    throw { message: `js-http: the API answered ${response.status}: ${body.slice(0, 200)}` };
  }
  let json;
  try {
    json = JSON.parse(body);
  } catch (e) {
    throw { message: `js-http: the API answered invalid JSON: ${e}` };
  }
  log("info", `fetched ${path}: ${response.status}`);
  return {
    content: [{ tag: "text", val: JSON.stringify(json) }],
    structuredContent: undefined,
  };
}
