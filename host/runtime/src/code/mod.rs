//! The code sandbox: the component (built in this repo from
//! `host/sandbox/js`, see docs/code-mode.md) that runs a code-mode
//! program. Each run gets a fresh instance with its own fuel, deadline and
//! memory cap (`[code.limits]`), linked with nothing but `program-tools`:
//! no files, sockets, `wasi:http`, clocks or environment. A program's
//! tool calls leave the sandbox through the [`ProgramCalls`] the run is
//! given, as whole pipeline calls of the run's caller.

pub(super) mod calls;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};

pub use calls::{CallBudget, ProgramState};

use super::bindings::code as wit;
use super::cache::CompiledCache;
use super::guest_state::{Caller, GuestState, PluginMeta};
use super::limits;
use super::linking;
use super::sched::Scheduler;
use hangar_config::Limits;
use hangar_core::call::{CallContext, CallError, ErrorKind, ProgramCalls, Stage};

/// The sandboxes code mode loaded: JavaScript's (TypeScript too) always,
/// Python's when there is one; each loaded, or why not.
pub struct Sandboxes {
    pub javascript: Result<Arc<Sandbox>, String>,
    pub python: Option<Result<Arc<Sandbox>, String>>,
}

/// The compiled sandbox, pre-linked: what every run instantiates.
pub struct Sandbox {
    pre: wit::CodePre<GuestState>,
    sched: Arc<Scheduler>,
    /// Who the sandbox is in logs: the plugin named `code`, with no grants.
    meta: PluginMeta,
}

/// A program as `run` was given it.
pub struct Program<'a> {
    /// `typescript` or `javascript`.
    pub language: &'a str,
    pub source: &'a str,
}

/// What a run may spend: the instance's limits, its calls, its console.
#[derive(Debug, Clone)]
pub struct RunLimits {
    pub limits: Limits,
    pub calls: CallBudget,
    /// Bytes of console output kept.
    pub console_bytes: u32,
}

/// Where in the program as sent an error was (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// A program that did not run to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramError {
    /// `syntax` or `thrown`.
    pub kind: String,
    pub message: String,
    pub position: Option<Position>,
    /// A tool call's failure, when that was what was thrown: its code and stage.
    pub code: Option<String>,
    pub stage: Option<String>,
}

/// What a run answered.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What the program returned; `None` when it returned nothing.
    pub value: Option<Value>,
    pub console: String,
    /// Console bytes past the cap, not kept.
    pub console_dropped: u64,
    pub error: Option<ProgramError>,
    /// Tool calls the program made.
    pub calls: u32,
}

impl Sandbox {
    /// Compiles (or finds compiled) the component at `path` and links it
    /// with `program-tools` alone — a component that imports anything else
    /// is refused here, at load — or, `with_wasi` (CPython needs WASI to
    /// start), with WASI as a plugin granted nothing has it too: no
    /// folders, sockets or environment.
    pub(super) fn load(
        engine: &wasmtime::Engine,
        cache: &CompiledCache,
        path: &Path,
        sched: Arc<Scheduler>,
        with_wasi: bool,
    ) -> anyhow::Result<Sandbox> {
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("cannot read the code sandbox {}: {e}", path.display()))?;
        let (component, _) = cache.load(engine, path, &bytes).map_err(|e| {
            anyhow::anyhow!(
                "the code sandbox {} is not a valid component: {e}",
                path.display()
            )
        })?;
        let mut linker: Linker<GuestState> = Linker::new(engine);
        if with_wasi {
            linking::link(&mut linker)?;
        }
        wit::hangar::plugin::program_tools::add_to_linker::<GuestState, HasSelf<ProgramState>>(
            &mut linker,
            |s| &mut s.program,
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let pre = linker.instantiate_pre(&component).map_err(|e| {
            anyhow::anyhow!(
                "the code sandbox {} cannot be linked (it may import only program-tools): {e}",
                path.display()
            )
        })?;
        Ok(Sandbox {
            pre: wit::CodePre::new(pre).map_err(|e| anyhow::anyhow!("{e:?}"))?,
            sched,
            meta: PluginMeta {
                name: Arc::from("code"),
                ..PluginMeta::default()
            },
        })
    }

    /// Runs `program` in a fresh instance under `limits`, its tool calls
    /// going through `calls` as calls made in `cx`. A program's own error
    /// (it did not parse, it threw) is in the outcome; a limit it met
    /// (fuel, deadline, memory) or a cancelled run is the `CallError`.
    pub async fn run(
        &self,
        program: Program<'_>,
        cx: &CallContext,
        calls: Arc<dyn ProgramCalls>,
        limits: &RunLimits,
    ) -> Result<Outcome, CallError> {
        let lim = &limits.limits;
        let until = Instant::now() + lim.queue_timeout;
        let slot = self.sched.run_slot(until, Stage::Handler).await?;
        let mut store = linking::store(
            self.pre.engine(),
            &self.meta,
            lim,
            &cx.cancel,
            cx.events.clone(),
            Caller::of(cx),
            &self.sched,
        );
        let turn = store.data().turn.clone();
        store.data_mut().program = ProgramState::new(calls, cx, limits.calls, turn);
        let deadline = store.data().deadline;
        let instance = limits::bounded(
            &self.sched,
            deadline,
            lim,
            &cx.cancel,
            Stage::Handler,
            self.pre.instantiate_async(&mut store),
        )
        .await;
        let code = limits::settle(instance, &store, Stage::Handler, lim, &cx.cancel)?;
        let out = limits::bounded(
            &self.sched,
            deadline,
            lim,
            &cx.cancel,
            Stage::Handler,
            code.call_run(
                &mut store,
                program.language,
                program.source,
                limits.console_bytes,
            ),
        )
        .await;
        let left = store.get_fuel().unwrap_or(lim.fuel);
        cx.usage.add_fuel(lim.fuel.saturating_sub(left));
        let made = store.data().program.started();
        // A program that met the memory cap may have caught the engine's
        // out-of-memory error and answered: the cap is still what stopped it.
        let out = match out {
            Ok(Ok(_)) if store.data().memory.refused => Err(CallError::new(
                Stage::Handler,
                ErrorKind::Limit,
                format!("memory limit of {} MiB exceeded", lim.memory_mib),
            )),
            out => limits::settle(out, &store, Stage::Handler, lim, &cx.cancel),
        };
        // The run's calls still running stop with it (its state's drop).
        store.data_mut().program = ProgramState::default();
        super::teardown::later((store, slot));
        let out = out?;
        let value = match out.value {
            None => None,
            Some(json) => {
                super::tool::output_within(json.len(), lim, Stage::Handler)?;
                Some(serde_json::from_str(&json).map_err(|e| {
                    CallError::new(
                        Stage::Handler,
                        ErrorKind::Failed,
                        format!("the sandbox answered a result that is not JSON: {e}"),
                    )
                })?)
            }
        };
        Ok(Outcome {
            value,
            console: out.console,
            console_dropped: out.console_dropped,
            error: out.error.map(|e| ProgramError {
                kind: e.kind,
                message: e.message,
                position: e.position.map(|p| Position {
                    line: p.line,
                    column: p.column,
                }),
                code: e.code,
                stage: e.stage,
            }),
            calls: made,
        })
    }
}
