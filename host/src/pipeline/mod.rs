//! The one way every call goes: resolve → auth → input map → validate →
//! execute → output map. Surfaces (MCP, REST) build a [`CallContext`] and
//! hand the call to [`Pipeline::call`]; stages know nothing of transports.

mod context;
mod error;
mod result;

use std::sync::Arc;

use serde_json::Value;

pub use context::{
    CallContext, CallEvent, CancelOnDrop, CancelToken, EventSink, LogLevel, Principal,
};
pub use error::{CallError, ErrorKind, Stage};
pub use result::{Content, ResourceContents, ToolResult};

use crate::catalog::{Backend, Catalog, CatalogTool};

/// Runs calls against one catalog.
#[derive(Clone)]
pub struct Pipeline {
    catalog: Arc<Catalog>,
}

impl Pipeline {
    pub fn new(catalog: Arc<Catalog>) -> Pipeline {
        Pipeline { catalog }
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Runs one call through every stage; the first stage that fails ends it.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        cx: &CallContext,
    ) -> Result<ToolResult, CallError> {
        let tool = self.catalog.resolve(name)?;
        // Auth and the mappers are plugins configured per tool; a tool
        // without them skips those stages.
        let args = validate(args)?;
        proceed(cx, Stage::Handler)?;
        execute(&tool, args, cx).await
    }
}

/// Stops the call before `next` if its caller cancelled it.
fn proceed(cx: &CallContext, next: Stage) -> Result<(), CallError> {
    if cx.cancel.is_cancelled() {
        return Err(CallError::cancelled(next));
    }
    Ok(())
}

/// Arguments must be a JSON object; absent arguments are `{}`.
fn validate(args: Value) -> Result<Value, CallError> {
    match args {
        Value::Null => Ok(Value::Object(Default::default())),
        Value::Object(_) => Ok(args),
        other => Err(CallError::new(
            Stage::Validate,
            ErrorKind::Invalid,
            format!("arguments must be a JSON object, not {}", json_type(&other)),
        )),
    }
}

async fn execute(
    tool: &CatalogTool,
    args: Value,
    cx: &CallContext,
) -> Result<ToolResult, CallError> {
    match &tool.backend {
        Backend::Wasm { plugin, guest_name } => {
            plugin.call(cx, guest_name, &args, &tool.limits).await
        }
        Backend::Sql(db) => db.execute(&args).await,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
