//! The meta-tools for large catalogs: `search_tools`, `read_tool` and
//! `call_tool`. They run in the host, see only what the caller may see, and
//! `call_tool` sends the inner call through the whole pipeline.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::setup::Pipeline;
use crate::catalog::ArgsValidator;
use crate::catalog::{Annotations, Catalog, ToolDef, Unconnected};
use hangar_config::CatalogMode;
use hangar_core::call::{CallContext, CallError, Content, ErrorKind, Principal, Stage, ToolResult};

pub const SEARCH: &str = "search_tools";
pub const READ: &str = "read_tool";
pub const CALL: &str = "call_tool";

/// The longest `search_tools` query, in characters; a longer one is refused
/// before any search work (and before schema validation, whose message
/// would quote the whole text).
pub const MAX_QUERY_CHARS: usize = 1000;

struct Meta {
    def: ToolDef,
    validator: ArgsValidator,
}

fn meta(name: &str, description: &str, schema: Value, read_only: bool) -> Meta {
    Meta {
        validator: ArgsValidator::new(&schema).expect("meta-tool schemas are valid"),
        def: ToolDef {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: schema,
            output_schema: None,
            annotations: Some(Annotations {
                read_only_hint: Some(read_only),
                ..Annotations::default()
            }),
            meta: None,
        },
    }
}

static METAS: LazyLock<[Meta; 3]> = LazyLock::new(|| {
    [
        meta(
            SEARCH,
            "Find tools by what they do. Answers the best matches with their names (paths), titles, descriptions and whether they are destructive; read one with read_tool, run it with call_tool.",
            json!({ "type": "object", "properties": {
                "query": { "type": "string", "maxLength": MAX_QUERY_CHARS, "description": "What you want to do, in words" },
                "limit": { "type": "integer", "minimum": 1, "maximum": 50, "default": 5 }
            }, "required": ["query"] }),
            true,
        ),
        meta(
            READ,
            "Describe one tool: its input and output schemas, annotations (destructive or not) and the auth it needs.",
            json!({ "type": "object", "properties": {
                "path": { "type": "string", "description": "The tool's name, e.g. billing.invoices.get" }
            }, "required": ["path"] }),
            true,
        ),
        meta(
            CALL,
            "Run one tool by its path with its arguments (omitted: {}). Fails as a result with isError and the text \"Error: <message>\".",
            json!({ "type": "object", "properties": {
                "path": { "type": "string", "description": "The tool's name" },
                "arguments": { "type": "object", "description": "The tool's arguments" }
            }, "required": ["path"] }),
            false,
        ),
    ]
});

/// The meta-tool definitions `catalog` lists through `toolset` (its own
/// catalog mode, else the server's): `search_tools`, `read_tool` and
/// `call_tool` in `"meta"` and `"both"`; `search_tools`, `read_tool` and
/// `run` in `"code"`; `run` with the meta-tools too under `[code] enabled`.
pub fn definitions<'a>(
    catalog: &'a Catalog,
    toolset: Option<&hangar_core::call::Toolset>,
) -> impl Iterator<Item = &'static ToolDef> + 'a {
    let mode = catalog.mode_for(toolset);
    let metas = METAS
        .iter()
        .filter(move |m| match mode {
            CatalogMode::Full => false,
            CatalogMode::Code => m.def.name != CALL,
            CatalogMode::Meta | CatalogMode::Both => true,
        })
        .map(|m| &m.def);
    metas.chain(offers_run(catalog, toolset).then(super::code::definition))
}

/// Whether `catalog` offers `run` through `toolset`.
pub fn offers_run(catalog: &Catalog, toolset: Option<&hangar_core::call::Toolset>) -> bool {
    let mode = catalog.mode_for(toolset);
    (catalog.code()).is_some_and(|code| crate::catalog::code::offered_in(mode, code.enabled))
}

/// Whether `name` is a meta-tool `catalog` offers through `toolset`.
pub fn is_meta(
    catalog: &Catalog,
    toolset: Option<&hangar_core::call::Toolset>,
    name: &str,
) -> bool {
    definitions(catalog, toolset).any(|d| d.name == name)
}

fn json_result(value: Value) -> ToolResult {
    ToolResult {
        content: vec![Content::Text {
            text: value.to_string(),
        }],
        structured_content: Some(value),
        is_error: false,
        meta: None,
    }
}

/// Refuses a string argument `key` longer than `max` characters, naming
/// its length only: before schema validation, whose message would quote
/// the whole text (a `search_tools` query, a `run` program).
pub(super) fn refuse_longer(args: &Value, key: &str, max: usize) -> Result<(), CallError> {
    let Some(text) = args.get(key).and_then(Value::as_str) else {
        return Ok(());
    };
    // Counting stops past the limit: a huge text costs no more than a long one.
    if text.chars().nth(max).is_none() {
        return Ok(());
    }
    Err(CallError::new(
        Stage::Validate,
        ErrorKind::Invalid,
        format!(
            "invalid arguments: /{key}: {} characters, at most {max}",
            text.chars().count()
        ),
    ))
}

impl Pipeline {
    /// Runs a meta-tool (`is_meta` said it is one).
    pub(super) async fn call_meta(
        &self,
        name: &str,
        args: Value,
        cx: &mut CallContext,
    ) -> Result<ToolResult, CallError> {
        if name == super::code::RUN {
            return self.run(args, cx).await;
        }
        let m = METAS
            .iter()
            .find(|m| m.def.name == name)
            .expect("a meta-tool");
        if name == SEARCH {
            refuse_longer(&args, "query", MAX_QUERY_CHARS)?;
        }
        let args = m.validator.validate(args)?;
        let principal = self.listing_principal(cx).await;
        let hidden = self.unconnected(principal.as_ref()).await;
        match name {
            SEARCH => Ok(self.search_tools(&args, principal.as_ref(), &hidden, cx)),
            READ => Ok(self.read_tool(&args, principal.as_ref(), &hidden, cx).await),
            _ => Ok(self.call_tool(args, cx).await),
        }
    }

    fn search_tools(
        &self,
        args: &Value,
        principal: Option<&Principal>,
        hidden: &Unconnected,
        cx: &CallContext,
    ) -> ToolResult {
        let query = args["query"].as_str().unwrap_or_default();
        let limit = args["limit"].as_u64().unwrap_or(5) as usize;
        let results: Vec<Value> = self
            .catalog()
            .search(query, limit, principal, cx.toolset.as_ref(), hidden)
            .into_iter()
            .map(|(tool, score)| {
                let a = tool.def.annotations.clone().unwrap_or_default();
                json!({
                    "path": tool.def.name,
                    "title": tool.def.title,
                    "description": tool.def.description,
                    "destructive": a.destructive_hint.unwrap_or(false),
                    "readOnly": a.read_only_hint.unwrap_or(false),
                    "score": score,
                })
            })
            .collect();
        json_result(json!({ "results": results }))
    }

    async fn read_tool(
        &self,
        args: &Value,
        principal: Option<&Principal>,
        hidden: &Unconnected,
        cx: &CallContext,
    ) -> ToolResult {
        let path = args["path"].as_str().unwrap_or_default();
        let tool = self
            .resolve(path, cx.toolset.as_ref())
            .ok()
            .filter(|_| self.catalog().scope(cx.toolset.as_ref()).admits(principal))
            .filter(|t| t.stages.visible(principal) && !hidden.hides(&t.stages));
        let Some(tool) = tool else {
            return ToolResult::error(format!("Error: Tool not found: {path}"));
        };
        let a = tool.def.annotations.clone().unwrap_or_default();
        // For a program's author (code mode): the tool as `tools.…` has it.
        let code = offers_run(self.catalog(), cx.toolset.as_ref());
        json_result(json!({
            "path": tool.def.name,
            "title": tool.def.title,
            "description": tool.def.description,
            "inputSchema": tool.def.input_schema,
            "outputSchema": tool.def.output_schema,
            "annotations": tool.def.annotations,
            "destructive": a.destructive_hint.unwrap_or(false),
            "auth": tool.stages.auth.as_ref().map(|s| s.plugin.name().to_string()),
            // The provider it needs, and whether the caller has a value of it.
            "authProvider": tool.stages.requires.first(),
            "connected": self.connected(&tool.stages, principal).await,
            "typescript": code.then(|| super::code::declaration(&tool.def, "")),
            "python": code.then(|| super::code::stub(&tool.def)),
        }))
    }

    async fn call_tool(&self, args: Value, cx: &mut CallContext) -> ToolResult {
        let path = args["path"].as_str().unwrap_or_default().to_string();
        let inner = args.get("arguments").cloned().unwrap_or(Value::Null);
        if is_meta(self.catalog(), cx.toolset.as_ref(), &path) {
            return ToolResult::error(format!("Error: {path} cannot be called through call_tool"));
        }
        match Box::pin(self.call(&path, inner, cx)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Error: {e}")),
        }
    }
}
