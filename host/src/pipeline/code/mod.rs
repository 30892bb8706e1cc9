//! `run`, code mode's tool: the agent's program runs in the code sandbox
//! (`wasm::Sandbox`), and every tool call it makes comes back here as a
//! whole pipeline call of the run's caller — the same resolution, auth
//! with the caller's credentials, mappers, validation, rate limits,
//! metrics (`transport="code"`) and access lines, a child span of the
//! run's. Only what the program returns (and its console) goes back.

mod dts;
mod stub;

use std::sync::{Arc, LazyLock};

use serde_json::{Value, json};

use super::setup::Pipeline;
use crate::catalog::ArgsValidator;
use crate::catalog::{Annotations, ToolDef};
use hangar_core::call::{CallContext, CallError, Content, ErrorKind, Stage, ToolResult};
use hangar_core::call::{ProgramCall, ProgramCalls};
use hangar_runtime::{Outcome, Program};

pub const RUN: &str = "run";

/// The longest program, in characters; a longer one is refused before any
/// other work (and before schema validation, whose message would quote it).
pub const MAX_CODE_CHARS: usize = 100_000;

const DESCRIPTION: &str = "Run a TypeScript program that calls tools, and get back only what it returns. \
The program is the body of an async function: await what you need and return the answer. \
Call tools as `await tools.NAME(args)` (dotted names as nested objects: `await tools.billing.invoices.get({ id })`, \
or `await tools.call(\"any.name\", args)`); a call resolves to the tool's structured content, else its text, \
and a failed call throws an Error with `code`, `stage` and the message. \
Find tools with search_tools and read their arguments with read_tool first. \
Calls run as you, with your access; `Promise.all` runs several at once. console.log output comes back too. \
language: \"typescript\" (default), \"javascript\", or \"python\" (then `await tools.echo(text=\"hi\")`, and print).";

static RUN_TOOL: LazyLock<(ToolDef, ArgsValidator)> = LazyLock::new(|| {
    let schema = json!({ "type": "object", "properties": {
        "code": { "type": "string", "description": "The program: the body of an async function that returns the answer" },
        "language": { "type": "string", "enum": ["typescript", "javascript", "python"], "default": "typescript" }
    }, "required": ["code"] });
    (
        ToolDef {
            name: RUN.into(),
            title: Some("Run a program".into()),
            description: DESCRIPTION.into(),
            input_schema: schema.clone(),
            output_schema: None,
            annotations: Some(Annotations {
                read_only_hint: Some(false),
                open_world_hint: Some(false),
                ..Annotations::default()
            }),
            meta: None,
        },
        ArgsValidator::new(&schema).expect("run's schema is valid"),
    )
});

pub use dts::declaration;
pub use stub::stub;

/// The resource that holds the declarations of every tool the caller may
/// call: the `tools` a program is given, as TypeScript.
pub const TOOLS_DTS: &str = "hangar://code/tools.d.ts";

static TOOLS_DTS_DEF: LazyLock<hangar_core::call::ResourceDef> = LazyLock::new(|| {
    hangar_core::call::ResourceDef {
    uri: TOOLS_DTS.into(),
    name: "tools.d.ts".into(),
    title: Some("The tools a program may call, as TypeScript".into()),
    description: Some(
        "The `tools` object `run` gives a program: each tool you may call, with its arguments and answer as TypeScript types."
            .into(),
    ),
    mime_type: Some("application/typescript".into()),
    size: None,
    meta: None,
}
});

/// The `hangar://code/tools.d.ts` listing entry.
pub fn tools_dts() -> &'static hangar_core::call::ResourceDef {
    &TOOLS_DTS_DEF
}

/// `run`'s definition, for `tools/list`.
pub fn definition() -> &'static ToolDef {
    &RUN_TOOL.0
}

/// The pipeline as a program's way out: each call a whole call of the
/// run's caller. `run` itself cannot be called from a program.
struct Calls {
    pipeline: Pipeline,
}

impl ProgramCalls for Calls {
    fn call(&self, name: String, arguments: Value, mut cx: CallContext) -> ProgramCall {
        let pipeline = self.pipeline.clone();
        Box::pin(async move {
            if name == RUN {
                return Err(CallError::new(
                    Stage::Resolve,
                    ErrorKind::Invalid,
                    "a program cannot call run",
                ));
            }
            pipeline.call(&name, arguments, &mut cx).await
        })
    }
}

impl Pipeline {
    /// `hangar://code/tools.d.ts` as the caller reads it: the tools it is
    /// shown (through the request's toolset), declared.
    pub(in crate::pipeline) async fn read_tools_dts(
        &self,
        cx: &CallContext,
    ) -> hangar_core::call::ReadResult {
        let principal = self.listing_principal(cx).await;
        let hidden = self.unconnected(principal.as_ref()).await;
        let scope = self.catalog.scope(cx.toolset.as_ref());
        let visible: Vec<&ToolDef> = if scope.admits(principal.as_ref()) {
            (self.catalog.visible(principal.as_ref()))
                .filter(|t| scope.tool(&t.def.name) && !hidden.hides(&t.stages))
                .map(|t| &t.def)
                .collect()
        } else {
            Vec::new()
        };
        hangar_core::call::ReadResult {
            contents: vec![hangar_core::call::ResourceContents {
                uri: TOOLS_DTS.into(),
                mime_type: Some("application/typescript".into()),
                text: Some(dts::declarations(visible)),
                blob: None,
                meta: None,
            }],
            meta: None,
        }
    }

    /// Runs `run`: the program in a fresh sandbox instance under
    /// `[code.limits]`. A limit it met (deadline, memory, fuel) is the
    /// call's error, naming the limit; an error of the program's own (it
    /// did not parse, it threw) is a result with `isError`.
    pub(super) async fn run(
        &self,
        args: Value,
        cx: &mut CallContext,
    ) -> Result<ToolResult, CallError> {
        super::meta::refuse_longer(&args, "code", MAX_CODE_CHARS)?;
        let args = RUN_TOOL.1.validate(args)?;
        let Some(code) = self.catalog.code() else {
            return Err(CallError::not_found(RUN));
        };
        let language = args["language"].as_str().unwrap_or("typescript");
        let sandbox = match language {
            "python" => code.sandboxes.python.as_ref(),
            _ => Some(&code.sandboxes.javascript),
        };
        let sandbox = match sandbox {
            Some(Ok(sandbox)) => sandbox,
            Some(Err(why)) => {
                return Err(CallError::new(
                    Stage::Handler,
                    ErrorKind::Failed,
                    format!("code mode is not available: {why}"),
                ));
            }
            None => {
                return Err(CallError::new(
                    Stage::Validate,
                    ErrorKind::Invalid,
                    "this server runs no Python programs (no Python sandbox: [code] python)",
                ));
            }
        };
        let program = Program {
            language,
            source: args["code"].as_str().unwrap_or_default(),
        };
        let calls = Arc::new(Calls {
            pipeline: self.clone(),
        });
        let outcome = sandbox.run(program, cx, calls, &code.limits).await?;
        Ok(answer(outcome))
    }
}

/// The result of a run: what the program returned (as structured content,
/// an object as it is and anything else as `{"result": value}`, and as a
/// JSON text block), then its console output as a second text block; a
/// program's error is `isError`, with where it happened in its source.
fn answer(outcome: Outcome) -> ToolResult {
    let mut content = Vec::new();
    let console = (!outcome.console.is_empty()).then(|| {
        let mut text = outcome.console.clone();
        if outcome.console_dropped > 0 {
            text.push_str(&format!(
                "… ({} more bytes of console output not kept)\n",
                outcome.console_dropped
            ));
        }
        Content::Text { text }
    });
    if let Some(error) = &outcome.error {
        let mut text = format!("Error: {}", error.message);
        if let Some(at) = error.position {
            text.push_str(&format!(" (at {}:{})", at.line, at.column));
        }
        if let (Some(code), Some(stage)) = (&error.code, &error.stage) {
            text.push_str(&format!(" [tool call failed: {code} at stage {stage}]"));
        }
        content.push(Content::Text { text });
        content.extend(console);
        let mut result = ToolResult {
            content,
            structured_content: None,
            is_error: true,
            meta: None,
        };
        result.set_meta(
            "hangar/code",
            json!({
                "kind": error.kind,
                "position": error.position,
                "code": error.code,
                "stage": error.stage,
                "calls": outcome.calls,
            }),
        );
        return result;
    }
    let structured = outcome.value.map(|value| match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    });
    if let Some(value) = &structured {
        content.push(Content::Text {
            text: value.to_string(),
        });
    }
    content.extend(console);
    if content.is_empty() {
        content.push(Content::Text {
            text: "The program returned nothing and wrote nothing.".into(),
        });
    }
    let mut result = ToolResult {
        content,
        structured_content: structured,
        is_error: false,
        meta: None,
    };
    result.set_meta("hangar/code", json!({ "calls": outcome.calls }));
    result
}
