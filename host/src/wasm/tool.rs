//! `ToolPlugin`: a loaded component of the `tool` world, ready to instantiate.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;
use std::sync::Mutex;
use std::time::Instant;

use wasmtime::Store;
use wasmtime::component::{Component, Linker};

use super::bindings::tool::hangar::plugin::types as wit;
use super::bindings::tool::{Tool, ToolPre};
use super::limits;
use super::state::{self, GuestState, PluginMeta};
use crate::catalog::{Annotations, ToolDef};
use crate::config::Limits;
use crate::pipeline::{
    CallContext, CallError, CancelToken, Content, ErrorKind, EventSink, ResourceContents, Stage,
    ToolResult,
};

/// A `tool`-world component: its name (the file stem) and its pre-linked
/// instance template. Every call gets a fresh `Store` and instance from it.
pub struct ToolPlugin {
    meta: PluginMeta,
    pre: ToolPre<GuestState>,
    /// Idle warm instances, when the plugin opted into reuse.
    warm: Mutex<Vec<Warm>>,
}

/// An instance kept between calls (opt-in reuse).
struct Warm {
    store: Store<GuestState>,
    tool: Tool,
    calls: u32,
    idle_since: Instant,
}

impl ToolPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
    ) -> anyhow::Result<ToolPlugin> {
        let pre = ToolPre::new(state::instance_pre(linker, component)?)
            .map_err(|e| anyhow::anyhow!("not a tool component: {e:?}"))?;
        Ok(ToolPlugin {
            meta,
            pre,
            warm: Mutex::new(Vec::new()),
        })
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Asks the component which tools it offers.
    pub async fn list_tools(&self, limits: &Limits) -> Result<Vec<ToolDef>, CallError> {
        let cancel = CancelToken::default();
        let (mut store, tool) = self
            .instantiate(limits, &cancel, EventSink::default())
            .await?;
        let defs = tool.call_list_tools(&mut store).await;
        limits::log_stderr(&self.meta.name, &store);
        let defs =
            defs.map_err(|e| limits::classify(e, &store, Stage::Handler, limits, &cancel))?;
        defs.into_iter()
            .map(|d| tool_def(d).map_err(|m| CallError::new(Stage::Handler, ErrorKind::Invalid, m)))
            .collect()
    }

    /// Runs `call-tool` under `limits`, in a fresh instance (or, when the
    /// plugin opted in, a warm one re-armed with this call's limits).
    pub async fn call(
        &self,
        cx: &CallContext,
        tool_name: &str,
        arguments: &Value,
        limits: &Limits,
    ) -> Result<ToolResult, CallError> {
        let (mut store, tool, calls) = match self.take_warm() {
            Some(mut w) => {
                w.store
                    .data_mut()
                    .reset_for_call(limits.memory_bytes(), cx.events.clone());
                limits::arm(&mut w.store, limits, &cx.cancel);
                (w.store, w.tool, w.calls)
            }
            None => {
                let (store, tool) = self
                    .instantiate(limits, &cx.cancel, cx.events.clone())
                    .await?;
                (store, tool, 0)
            }
        };
        let wit_cx = wit_context(cx);
        let out = tool
            .call_call_tool(&mut store, &wit_cx, tool_name, &arguments.to_string())
            .await;
        limits::log_stderr(&self.meta.name, &store);
        match out {
            Ok(out) => {
                self.give_back(store, tool, calls + 1);
                match out {
                    Ok(result) => call_result(result)
                        .map_err(|m| CallError::new(Stage::Handler, ErrorKind::Failed, m)),
                    Err(e) => Ok(ToolResult::error(e.message)),
                }
            }
            // A trapped instance is never reused.
            Err(e) => Err(limits::classify(
                e,
                &store,
                Stage::Handler,
                limits,
                &cx.cancel,
            )),
        }
    }

    /// A warm instance that has not been idle too long, if reuse is on.
    fn take_warm(&self) -> Option<Warm> {
        let reuse = self.meta.reuse.as_ref()?;
        let mut pool = self.warm.lock().unwrap();
        pool.retain(|w| w.idle_since.elapsed() < reuse.max_idle);
        pool.pop()
    }

    /// Keeps an instance that finished a call cleanly, unless it has served
    /// its calls, its stderr is filling, or the pool is full.
    fn give_back(&self, mut store: Store<GuestState>, tool: Tool, calls: u32) {
        let Some(reuse) = &self.meta.reuse else {
            return;
        };
        if calls >= reuse.max_calls || store.data().stderr_filling() {
            return;
        }
        store.data_mut().stderr_consumed();
        let mut pool = self.warm.lock().unwrap();
        if pool.len() < reuse.pool_size {
            pool.push(Warm {
                store,
                tool,
                calls,
                idle_since: Instant::now(),
            });
        }
    }

    async fn instantiate(
        &self,
        limits: &Limits,
        cancel: &CancelToken,
        events: EventSink,
    ) -> Result<(Store<GuestState>, Tool), CallError> {
        let mut store = state::store(self.pre.engine(), &self.meta, limits, cancel, events);
        match self.pre.instantiate_async(&mut store).await {
            Ok(tool) => Ok((store, tool)),
            Err(e) => {
                tracing::warn!(plugin = %self.meta.name, "instantiation failed: {e:?}");
                Err(limits::classify(e, &store, Stage::Handler, limits, cancel))
            }
        }
    }
}

/// What a guest sees of a call.
pub(super) fn wit_context(cx: &CallContext) -> wit::CallContext {
    wit::CallContext {
        trace_id: cx.trace_id.clone(),
        session_id: cx.session_id.clone(),
        principal: cx.principal.as_ref().map(|p| wit::Principal {
            subject: p.subject.clone(),
            claims: p.claims.to_string(),
        }),
    }
}

fn tool_def(d: wit::ToolDefinition) -> Result<ToolDef, String> {
    let mut input_schema: Value = serde_json::from_str(&d.input_schema)
        .map_err(|e| format!("tool {}: input schema is not JSON: {e}", d.name))?;
    let Some(obj) = input_schema.as_object_mut() else {
        return Err(format!(
            "tool {}: input schema is not a JSON object",
            d.name
        ));
    };
    obj.entry("type").or_insert_with(|| "object".into());
    let output_schema = d
        .output_schema
        .map(|s| serde_json::from_str::<Value>(&s))
        .transpose()
        .map_err(|e| format!("tool {}: output schema is not JSON: {e}", d.name))?;
    Ok(ToolDef {
        name: d.name,
        title: d.title,
        description: d.description,
        input_schema,
        output_schema,
        annotations: d.annotations.map(|a| Annotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }),
    })
}

fn call_result(r: wit::CallResult) -> Result<ToolResult, String> {
    let structured_content = r
        .structured_content
        .map(|s| serde_json::from_str::<Value>(&s))
        .transpose()
        .map_err(|e| format!("structured content is not JSON: {e}"))?;
    Ok(ToolResult {
        content: r.content.into_iter().map(content).collect(),
        structured_content,
        is_error: false,
    })
}

fn content(block: wit::ContentBlock) -> Content {
    match block {
        wit::ContentBlock::Text(text) => Content::Text { text },
        wit::ContentBlock::Image(m) => Content::Image {
            data: B64.encode(&m.data),
            mime_type: m.mime_type,
        },
        wit::ContentBlock::Audio(m) => Content::Audio {
            data: B64.encode(&m.data),
            mime_type: m.mime_type,
        },
        wit::ContentBlock::Resource(r) => {
            let (text, blob) = match r.contents {
                wit::ResourceContents::Text(t) => (Some(t), None),
                wit::ResourceContents::Blob(b) => (None, Some(B64.encode(&b))),
            };
            Content::Resource {
                resource: ResourceContents {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    text,
                    blob,
                },
            }
        }
        wit::ContentBlock::ResourceLink(l) => Content::ResourceLink {
            uri: l.uri,
            name: l.name,
            description: l.description,
            mime_type: l.mime_type,
        },
    }
}
