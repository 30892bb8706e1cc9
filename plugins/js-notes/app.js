// js-notes: resources, a prompt, completions and an eliciting tool in
// JavaScript (componentize-js, the `server` world).
// Build: node node_modules/@bytecodealliance/componentize-js/src/cli.js app.js \
//          --wit ../../wit --world-name server -d http fetch-event -o js-notes.wasm
import { elicit } from "hangar:plugin/client@0.1.0";

const COLORS = ["blue", "green", "orange", "purple"];

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
  ];
}

export function callTool(ctx, name, args) {
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
    ];
  },
  listTemplates() {
    return [
      { uriTemplate: "js-notes://color/{name}", name: "color", title: undefined,
        description: "One color", mimeType: "text/plain" },
    ];
  },
  read(ctx, uri) {
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
