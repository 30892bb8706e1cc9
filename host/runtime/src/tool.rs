//! `ToolPlugin`: a loaded component of the `tool` or `server` world, ready
//! to instantiate. It offers tools, and any of resources, prompts and
//! completions (see `offers.rs`).

use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;
use wasmtime::component::{Component, InstancePre, Linker};

use super::bindings::tool::hangar::plugin::types as wit;
use super::bindings::tool::{Tool, ToolIndices};
use super::capability::files::Preopens;
use super::convert::{call_result, tool_def, wit_context};
use super::exported_offers::Offers;
use super::guest_state::{Caller, GuestState, PluginMeta};
use super::limits;
use super::linking;
use super::plain::{OutputTooLarge, PlainExports, PlainFunc};
use super::sched::{Gate, Pool, Scheduler};
use super::warm::{Pooled, WarmPool};
use hangar_config::Limits;
use hangar_core::call::{
    CallContext, CallError, CancelToken, Content, ErrorKind, EventSink, Stage, ToolDef, ToolResult,
};

/// A `tool`- or `server`-world component: its name (the file stem), its
/// pre-linked instance template and which exports it has. Every call gets a
/// fresh `Store` and instance from it.
pub struct ToolPlugin {
    pub(super) meta: PluginMeta,
    pub(super) pre: InstancePre<GuestState>,
    /// How the component offers tools: the `tool` world's exports, or its
    /// own typed functions.
    tools: Tools,
    /// The `resources`, `prompts` and `completion` exports it has.
    pub(super) offers: Offers,
    pub(super) sched: Arc<Scheduler>,
    /// Idle warm instances, when the plugin opted into reuse.
    warm: WarmPool<Instance>,
    /// The language it was written in, as its build says.
    toolchain: super::Toolchain,
    /// What it imports of the host's capabilities and what it is granted
    /// of each, as `hangar check` says it (set by the loader).
    reach: Vec<String>,
}

/// Where a component's tools come from.
enum Tools {
    /// None: it offers only resources, prompts or completions.
    None,
    /// The `tool` world's `list-tools` / `call-tool`.
    World(ToolIndices),
    /// A plain component's exported functions.
    Plain(PlainExports),
}

/// What one call's export returned, before it becomes MCP's result.
enum Returned {
    World(Result<wit::CallResult, wit::ToolError>),
    Plain(Option<Value>),
}

/// A live instance with the instance slot it occupies.
pub(super) struct Instance {
    pub(super) store: Store<GuestState>,
    pub(super) instance: wasmtime::component::Instance,
    _slot: OwnedSemaphorePermit,
}

impl Pooled for Instance {
    fn store(&self) -> &Store<GuestState> {
        &self.store
    }
}

impl ToolPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
        sched: Arc<Scheduler>,
    ) -> anyhow::Result<ToolPlugin> {
        let pre = linking::instance_pre(linker, component)?;
        let tools = ToolIndices::new(&pre).map_or(Tools::None, Tools::World);
        let offers = Offers::of(&pre);
        if matches!(tools, Tools::None) && offers.is_empty() {
            anyhow::bail!("exports neither tools nor resources, prompts or completions");
        }
        Ok(ToolPlugin {
            warm: WarmPool::new(meta.reuse.clone()),
            meta,
            pre,
            tools,
            offers,
            sched,
            toolchain: super::Toolchain::Other,
            reach: Vec::new(),
        })
    }

    /// A plain component (no `hangar:plugin` world): each function in
    /// `exports` is a tool. Fails when it exports none that can be one.
    pub fn typed(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
        sched: Arc<Scheduler>,
        exports: PlainExports,
    ) -> anyhow::Result<ToolPlugin> {
        let pre = linking::instance_pre(linker, component)?;
        if exports.is_empty() {
            let why = exports.problems.join("; ");
            anyhow::bail!(
                "exports no function that can be a tool{}",
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({why})")
                }
            );
        }
        Ok(ToolPlugin {
            warm: WarmPool::new(meta.reuse.clone()),
            meta,
            pre,
            tools: Tools::Plain(exports),
            offers: Offers::default(),
            sched,
            toolchain: super::Toolchain::Other,
            reach: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The language it was written in, as its build says.
    pub fn toolchain(&self) -> super::Toolchain {
        self.toolchain
    }

    /// What it imports of the host's capabilities, and what of each it is
    /// granted (`[plugins.NAME] grants`).
    pub fn reach(&self) -> &[String] {
        &self.reach
    }

    /// Sets [`ToolPlugin::reach`] (the loader knows the config).
    pub fn set_reach(&mut self, lines: Vec<String>) {
        self.reach = lines;
    }

    /// The plugin, known to have been built by `toolchain`.
    pub(super) fn built_by(mut self, toolchain: super::Toolchain) -> ToolPlugin {
        self.toolchain = toolchain;
        self
    }

    /// Whether the component is a plain one, its functions its tools.
    pub fn is_typed(&self) -> bool {
        matches!(self.tools, Tools::Plain(_))
    }

    /// The exported functions that could not be tools, and why.
    pub fn export_problems(&self) -> &[String] {
        match &self.tools {
            Tools::Plain(t) => &t.problems,
            _ => &[],
        }
    }

    /// Asks the component which tools it offers, under `limits` like a call
    /// (a component whose `list-tools` hangs is given up at its deadline).
    pub async fn list_tools(&self, limits: &Limits) -> Result<Vec<ToolDef>, CallError> {
        match &self.tools {
            Tools::None => return Ok(Vec::new()),
            Tools::Plain(t) => return Ok(t.defs()),
            Tools::World(_) => {}
        }
        let cancel = CancelToken::default();
        let until = Instant::now() + limits.queue_timeout;
        let mut inst = self
            .instantiate(
                limits,
                &cancel,
                EventSink::default(),
                Caller::default(),
                until,
            )
            .await?;
        let deadline = inst.store.data().deadline;
        let out = limits::bounded(
            &self.sched,
            deadline,
            limits,
            &cancel,
            Stage::Handler,
            async {
                let tool = self.tool_exports(&mut inst)?;
                tool.call_list_tools(&mut inst.store).await
            },
        )
        .await;
        limits::log_stderr(&inst.store);
        let defs = limits::settle(out, &inst.store, Stage::Handler, limits, &cancel)?;
        defs.into_iter()
            .map(|d| tool_def(d).map_err(|m| CallError::new(Stage::Handler, ErrorKind::Invalid, m)))
            .collect()
    }

    /// Runs `call-tool` under `limits`, in a fresh instance (or, when the
    /// plugin opted in, a warm one re-armed with this call's limits). `gate`
    /// is the plugin's or the tool's `max_concurrent` cap, if any. A call
    /// with `preopens` (uploads, artifacts) always gets a fresh instance,
    /// which is not kept: its folders are its own.
    pub async fn call(
        &self,
        cx: &CallContext,
        tool_name: &str,
        arguments: &Value,
        limits: &Limits,
        gate: Option<&Gate>,
        preopens: &Preopens,
    ) -> Result<ToolResult, CallError> {
        // A plain component's function is found once, and the arguments are
        // checked against its parameters before any instance is spent on a
        // call that cannot be made.
        let typed = match &self.tools {
            Tools::Plain(typed) => {
                let func = typed.func(tool_name).ok_or_else(|| {
                    CallError::new(
                        Stage::Handler,
                        ErrorKind::NotFound,
                        format!("no function {tool_name}"),
                    )
                })?;
                func.check_arguments(arguments)
                    .map_err(|m| CallError::new(Stage::Validate, ErrorKind::Invalid, m))?;
                Some(func)
            }
            _ => None,
        };
        let until = Instant::now() + limits.queue_timeout;
        let _running = match gate {
            Some(gate) => Some(gate.enter(until).await?),
            None => None,
        };
        let warm = if preopens.is_empty() {
            self.warm.take()
        } else {
            None
        };
        let (mut inst, calls) = match warm {
            Some((mut inst, calls)) => {
                let store = &mut inst.store;
                store
                    .data_mut()
                    .reset_for_call(limits, cx.events.clone(), Caller::of(cx));
                limits::arm(store, limits, &cx.cancel, &self.sched);
                (inst, calls)
            }
            None => {
                let inst = self
                    .instantiate_with(
                        limits,
                        &cx.cancel,
                        cx.events.clone(),
                        Caller::of(cx),
                        until,
                        preopens,
                    )
                    .await?;
                (inst, 0)
            }
        };
        let deadline = inst.store.data().deadline;
        let out = limits::bounded(
            &self.sched,
            deadline,
            limits,
            &cx.cancel,
            Stage::Handler,
            self.run_tool(&mut inst, cx, tool_name, arguments, typed, limits),
        )
        .await;
        // A plain component's result refused while it was read (its JSON
        // would pass `max_output_bytes`): the output limit, not a failure of
        // the guest's. The instance is not reused (wasmtime marks it failed).
        let out = match out {
            Ok(Err(e)) if e.is::<OutputTooLarge>() => Err(CallError::new(
                Stage::Handler,
                ErrorKind::Limit,
                e.to_string(),
            )),
            other => other,
        };
        limits::log_stderr(&inst.store);
        let left = inst.store.get_fuel().unwrap_or(limits.fuel);
        cx.usage.add_fuel(limits.fuel.saturating_sub(left));
        // A trapped, timed-out or cancelled instance is never reused.
        let out = limits::settle(out, &inst.store, Stage::Handler, limits, &cx.cancel)?;
        if preopens.is_empty() {
            self.warm.give_back(inst, calls + 1);
        } else {
            super::teardown::later(inst);
        }
        match out {
            Returned::World(Ok(result)) => {
                check_output(&result, limits)?;
                call_result(result)
                    .map_err(|m| CallError::new(Stage::Handler, ErrorKind::Failed, m))
            }
            Returned::World(Err(e)) => Ok(ToolResult::error(e.message)),
            Returned::Plain(returned) => {
                let func = typed.expect("typed results come from a typed call");
                let result = func.tool_result(returned);
                output_within(typed_result_bytes(&result), limits, Stage::Handler)?;
                Ok(result)
            }
        }
    }

    /// Calls the tool's export in `inst`: `call-tool` for the `tool` world,
    /// the function itself (arguments lowered, result lifted by `typed`) for a plain
    /// component.
    async fn run_tool(
        &self,
        inst: &mut Instance,
        cx: &CallContext,
        tool_name: &str,
        arguments: &Value,
        typed: Option<&PlainFunc>,
        limits: &Limits,
    ) -> wasmtime::Result<Returned> {
        match typed {
            Some(func) => {
                let returned = func
                    .call(
                        &mut inst.store,
                        &inst.instance,
                        arguments,
                        limits.max_output_bytes,
                    )
                    .await?;
                Ok(Returned::Plain(returned))
            }
            None => {
                let tool = self.tool_exports(inst)?;
                let out = tool
                    .call_call_tool(
                        &mut inst.store,
                        &wit_context(cx),
                        tool_name,
                        &arguments.to_string(),
                    )
                    .await?;
                Ok(Returned::World(out))
            }
        }
    }

    /// The `tool` world's exports of a live instance.
    fn tool_exports(&self, inst: &mut Instance) -> wasmtime::Result<Tool> {
        let Tools::World(indices) = &self.tools else {
            return Err(wasmtime::format_err!("the component offers no tools"));
        };
        indices.load(&mut inst.store, &inst.instance)
    }

    /// A fresh instance in a slot of the tool pool (waiting until `until` for one).
    pub(super) async fn instantiate(
        &self,
        limits: &Limits,
        cancel: &CancelToken,
        events: EventSink,
        caller: Caller<'_>,
        until: Instant,
    ) -> Result<Instance, CallError> {
        let none = Preopens::default();
        self.instantiate_with(limits, cancel, events, caller, until, &none)
            .await
    }

    /// [`ToolPlugin::instantiate`], with folders mounted for the call.
    async fn instantiate_with(
        &self,
        limits: &Limits,
        cancel: &CancelToken,
        events: EventSink,
        caller: Caller<'_>,
        until: Instant,
        preopens: &Preopens,
    ) -> Result<Instance, CallError> {
        let slot = self.sched.slot(Pool::Tools, until, Stage::Handler).await?;
        let mut store = linking::store_with(
            self.pre.engine(),
            &self.meta,
            limits,
            cancel,
            events,
            caller,
            &self.sched,
            preopens,
        )
        .map_err(|e| {
            tracing::error!(plugin = %self.meta.name, "{e}");
            CallError::new(
                Stage::Handler,
                ErrorKind::Failed,
                "the call's folders could not be mounted",
            )
        })?;
        let deadline = store.data().deadline;
        let out = limits::bounded(
            &self.sched,
            deadline,
            limits,
            cancel,
            Stage::Handler,
            self.pre.instantiate_async(&mut store),
        )
        .await;
        // A call its client gave up on is interrupted wherever it is, in
        // instantiation too: that is no failure of the plugin's.
        if let Ok(Err(e)) = &out
            && !cancel.is_cancelled()
        {
            tracing::warn!(plugin = %self.meta.name, "instantiation failed: {e:?}");
        }
        let instance = limits::settle(out, &store, Stage::Handler, limits, cancel)?;
        Ok(Instance {
            store,
            instance,
            _slot: slot,
        })
    }
}

/// Refuses a result over `max_output_bytes` or `max_content_blocks`, counted
/// on the lifted guest values before any host copy (JSON, base64) is built.
/// The lifted values themselves are bounded by the guest's memory cap.
fn check_output(r: &wit::CallResult, limits: &Limits) -> Result<(), CallError> {
    let blocks = r.content.len();
    if blocks as u64 > u64::from(limits.max_content_blocks) {
        return Err(CallError::new(
            Stage::Handler,
            ErrorKind::Limit,
            format!(
                "output of {blocks} content blocks exceeds the limit of {} blocks",
                limits.max_content_blocks
            ),
        ));
    }
    let bytes: usize = r.content.iter().map(block_bytes).sum::<usize>()
        + r.structured_content.as_ref().map_or(0, String::len);
    output_within(bytes, limits, Stage::Handler)
}

/// The output bytes of a plain component's result, without serializing it
/// again: its text block is the value's JSON (a string's text, itself), and
/// its structured content carries the same value once more.
fn typed_result_bytes(result: &ToolResult) -> usize {
    let text: usize = result
        .content
        .iter()
        .map(|c| match c {
            Content::Text { text } => text.len(),
            _ => 0,
        })
        .sum();
    if result.structured_content.is_some() {
        2 * text
    } else {
        text
    }
}

/// Refuses `bytes` of output over `max_output_bytes` (tool results and mapper payloads).
pub(super) fn output_within(bytes: usize, limits: &Limits, stage: Stage) -> Result<(), CallError> {
    if bytes as u64 > limits.max_output_bytes {
        return Err(CallError::new(
            stage,
            ErrorKind::Limit,
            format!(
                "output of {bytes} bytes exceeds the limit of {} bytes",
                limits.max_output_bytes
            ),
        ));
    }
    Ok(())
}

fn block_bytes(block: &wit::ContentBlock) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    match block {
        wit::ContentBlock::Text(t) => t.len(),
        wit::ContentBlock::Image(m) | wit::ContentBlock::Audio(m) => {
            m.data.len() + m.mime_type.len()
        }
        wit::ContentBlock::Resource(r) => {
            r.uri.len()
                + opt(&r.mime_type)
                + match &r.contents {
                    wit::ResourceContents::Text(t) => t.len(),
                    wit::ResourceContents::Blob(b) => b.len(),
                }
        }
        wit::ContentBlock::ResourceLink(l) => {
            l.uri.len() + l.name.len() + opt(&l.description) + opt(&l.mime_type)
        }
    }
}
