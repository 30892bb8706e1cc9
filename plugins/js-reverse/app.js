// js-reverse: a Hangar tool written in JavaScript (componentize-js).
// Build: node node_modules/@bytecodealliance/componentize-js/src/cli.js app.js \
//          --wit ../../wit --world-name tool -d http fetch-event -o js-reverse.wasm
import { log } from "hangar:plugin/host@0.1.0";

export function listTools() {
  return [
    {
      name: "js.reverse",
      title: "Reverse (JavaScript)",
      description: "Reverses a text; written in JavaScript",
      inputSchema: JSON.stringify({
        type: "object",
        properties: { text: { type: "string", description: "What to reverse" } },
        required: ["text"],
      }),
      outputSchema: undefined,
      annotations: { readOnlyHint: true, destructiveHint: undefined, idempotentHint: true, openWorldHint: undefined },
    },
  ];
}

export function callTool(ctx, name, args) {
  if (name !== "js.reverse") {
    throw { message: `unknown tool ${name}` };
  }
  const { text } = JSON.parse(args);
  if (text === "") {
    // A tool-level error: the caller gets isError: true.
    throw { message: "text must not be empty" };
  }
  log("info", `reversing ${text.length} characters`);
  return {
    content: [{ tag: "text", val: Array.from(text).reverse().join("") }],
    structuredContent: undefined,
  };
}
