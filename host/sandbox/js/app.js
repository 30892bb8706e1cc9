// The code sandbox: runs one agent's program (TypeScript or JavaScript) as
// the body of an async function given `tools` and `console`, and answers
// what it returned. Built with componentize-js (StarlingMonkey) against the
// `code` world of wit/code.wit (scripts/lib.sh, `build_sandbox`); Hangar
// runs each program in a fresh instance under `[code.limits]`. The only
// import that leaves the sandbox is `program-tools`: each tool call is a
// pipeline call as the program's caller.
//
// TypeScript becomes JavaScript through sucrase (bundled beside this file
// as sucrase.js), which keeps every line where it was; its source map gives
// back the column of an error in the source as sent.
import { start, finish } from "hangar:plugin/program-tools@0.1.0";
import { transform } from "./sucrase.js";

const AsyncFunction = (async function () {}).constructor;

/// The innermost frame of the program's own code in an error's stack, as
/// `{line, column}` in the generated function's source (1-based), or null.
function programFrame(error) {
  const stack = error && typeof error.stack === "string" ? error.stack : "";
  const m = /> (?:Async)?Function:(\d+):(\d+)/.exec(stack);
  if (m) return { line: Number(m[1]), column: Number(m[2]) };
  const file = error && typeof error.fileName === "string" ? error.fileName : "";
  if (/> (?:Async)?Function$/.test(file) && typeof error.lineNumber === "number") {
    return { line: error.lineNumber, column: error.columnNumber || 1 };
  }
  return null;
}

// How many lines the Function constructor puts before the body (its
// `function anonymous(...) {` header): measured here, once, not assumed.
const HEADER_LINES = (() => {
  try {
    new Function("tools", "console", "throw new Error('probe')")();
  } catch (e) {
    const at = programFrame(e);
    if (at) return at.line - 1;
  }
  return 2;
})();

// --- source maps: the column in the TypeScript as sent ---------------------

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The segments of a source map's `mappings`, line by line: each
/// `[generatedColumn, sourceLine, sourceColumn]` (0-based).
function decodeMappings(mappings) {
  const lines = [];
  let srcLine = 0, srcCol = 0, srcIdx = 0;
  for (const line of mappings.split(";")) {
    const segs = [];
    let genCol = 0;
    for (const seg of line.split(",")) {
      if (seg === "") continue;
      const fields = [];
      let value = 0, shift = 0;
      for (const ch of seg) {
        const digit = B64.indexOf(ch);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      genCol += fields[0];
      if (fields.length >= 4) {
        srcIdx += fields[1];
        srcLine += fields[2];
        srcCol += fields[3];
        segs.push([genCol, srcLine, srcCol]);
      }
    }
    lines.push(segs);
  }
  return lines;
}

/// A position in the generated JavaScript (1-based) as a position in the
/// source as sent: the nearest mapped token at or before it on its line.
function originalPosition(map, line, column) {
  const segs = map ? map[line - 1] : null;
  if (!segs || segs.length === 0) return { line, column };
  let best = segs[0];
  for (const s of segs) {
    if (s[0] <= column - 1) best = s;
    else break;
  }
  const offset = Math.max(0, column - 1 - best[0]);
  return { line: best[1] + 1, column: best[2] + offset + 1 };
}

// --- console ---------------------------------------------------------------

function show(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return json;
  } catch (_) {}
  return String(value);
}

function makeConsole(cap) {
  const out = { text: "", dropped: 0 };
  const write = (prefix, args) => {
    const line = prefix + args.map(show).join(" ") + "\n";
    const room = cap - out.text.length;
    if (room >= line.length) {
      out.text += line;
    } else {
      if (room > 0) out.text += line.slice(0, room);
      out.dropped += line.length - Math.max(room, 0);
    }
  };
  const console = {
    log: (...a) => write("", a),
    info: (...a) => write("", a),
    debug: (...a) => write("", a),
    warn: (...a) => write("warn: ", a),
    error: (...a) => write("error: ", a),
  };
  return { console, out };
}

// --- tools -----------------------------------------------------------------

/// A tool call's failure as the program sees it: an `Error` with `code`
/// and `stage`.
class ToolError extends Error {
  constructor(failure) {
    super(failure.message);
    this.name = "ToolError";
    this.code = failure.code;
    this.stage = failure.stage;
  }
}

function failureOf(e) {
  // componentize-js throws a `result`'s error as an Error whose `payload`
  // is the WIT value.
  const f = e && e.payload ? e.payload : e;
  if (f && typeof f.code === "string") return new ToolError(f);
  return e;
}

/// Starts the call now (so calls made together run together) and waits for
/// it in a job of its own: `Promise.all` over eight calls starts all eight
/// before it waits for the first.
function callTool(name, args) {
  // Where the program made the call: a failure, thrown later from a job,
  // has no frame of the program's own in its stack.
  const site = new Error();
  const failed = (e) => {
    const error = failureOf(e);
    if (error instanceof Error && !programFrame(error)) error.site = site;
    return error;
  };
  if (typeof name !== "string") {
    return Promise.reject(failed(new TypeError("a tool's name must be a string")));
  }
  let handle;
  try {
    const json = JSON.stringify(args === undefined ? {} : args);
    handle = start(name, json === undefined ? "{}" : json);
  } catch (e) {
    return Promise.reject(failed(e));
  }
  return Promise.resolve().then(() => {
    let text;
    try {
      text = finish(handle);
    } catch (e) {
      throw failed(e);
    }
    return JSON.parse(text);
  });
}

/// `tools.echo(args)`, `tools.billing.invoices.get(args)` (dotted names as
/// nested objects) and `tools.call("any.path", args)`.
function toolsAt(path) {
  const target = function () {};
  return new Proxy(target, {
    get(_, key) {
      if (typeof key !== "string" || key === "then") return undefined;
      if (path === "" && key === "call") return callTool;
      return toolsAt(path === "" ? key : `${path}.${key}`);
    },
    apply(_, __, args) {
      if (path === "") return Promise.reject(new TypeError("tools is not a tool: call tools.NAME(args)"));
      return callTool(path, args[0]);
    },
  });
}

const tools = toolsAt("");

// --- run -------------------------------------------------------------------

function problem(kind, error, map) {
  const message = error instanceof Error
    ? `${error.name}: ${error.message}`
    : `Uncaught ${show(error)}`;
  let at = programFrame(error) || (error && error.site ? programFrame(error.site) : null);
  // The Function constructor's own SyntaxError names the line in the
  // generated function, under the file that called it.
  if (!at && kind === "syntax" && error instanceof SyntaxError && typeof error.lineNumber === "number") {
    at = { line: error.lineNumber, column: error.columnNumber || 1 };
  }
  let position;
  if (at && at.line > HEADER_LINES) {
    position = originalPosition(map, at.line - HEADER_LINES, at.column);
  }
  return {
    kind,
    message,
    position,
    code: error instanceof ToolError ? error.code : undefined,
    stage: error instanceof ToolError ? error.stage : undefined,
  };
}

export async function run(language, source, consoleCap) {
  const { console, out } = makeConsole(consoleCap);
  const done = (value, error) => ({
    value,
    console: out.text,
    consoleDropped: BigInt(out.dropped),
    error,
  });
  let js = source;
  let map = null;
  if (language !== "javascript") {
    try {
      const result = transform(source, {
        transforms: ["typescript"],
        disableESTransforms: true,
        sourceMapOptions: { compiledFilename: "program.js" },
        filePath: "program.ts",
      });
      js = result.code;
      map = decodeMappings(result.sourceMap.mappings);
    } catch (e) {
      // sucrase's message ends with "(line:column)" of the source as sent.
      const m = /\((\d+):(\d+)\)\s*$/.exec(String(e && e.message));
      return done(undefined, {
        kind: "syntax",
        message: `SyntaxError: ${String(e && e.message)}`,
        // sucrase's own position: its line and its 1-based column.
        position: m ? { line: Number(m[1]), column: Number(m[2]) } : undefined,
      });
    }
  }
  let body;
  try {
    body = new AsyncFunction("tools", "console", js);
  } catch (e) {
    return done(undefined, problem("syntax", e, map));
  }
  let value;
  try {
    value = await body(tools, console);
  } catch (e) {
    return done(undefined, problem("thrown", e, map));
  }
  if (value === undefined) return done(undefined, undefined);
  let json;
  try {
    json = JSON.stringify(value);
  } catch (e) {
    return done(undefined, {
      kind: "thrown",
      message: `the program's result is not JSON: ${e && e.message}`,
    });
  }
  return done(json, undefined);
}

// Warm the transform and the run path while the component is built
// (componentize-js snapshots the heap after this module's top level): a
// fresh instance then finds the functions a program needs compiled.
const WARM = `interface Row<T = unknown> { id: number; value?: T; tags: string[] }
type Pair = [string, number] | null;
enum Color { Red, Green = "green" }
abstract class Base<T> implements Row<T> { constructor(public id: number, private readonly tags: string[] = []) { super(); } }
const rows: Row<number>[] = [];
for (const [i, x] of Object.entries({ a: 1, b: 2 })) rows.push({ id: Number(i), value: x as number, tags: [\`t\${i}\`] });
const total = rows.reduce((sum: number, r) => sum + (r.value ?? 0), 0);
const got = await Promise.all([1, 2].map(async (id): Promise<Pair> => ["x", id]));
function pick<K extends keyof Row>(r: Row, k: K): Row[K] { return r[k]; }
label: while (false) { break label; }
try { JSON.parse("{"); } catch (e: any) { console.log(e?.message, typeof e, e instanceof Error); }
return { total, got, n: rows.length!, ok: !!pick, re: /a+/g.test("aa"), s: \`\${total}\`.padStart(3) };
`;
run("typescript", WARM, 1024);
run("javascript", "return [1, 2, 3].map((x) => x * 2);", 1024);
