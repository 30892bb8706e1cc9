//! Code mode's part of the catalog: the code sandbox (loaded with the
//! plugins, compiled once) and what one run may use.

use std::sync::Arc;

use hangar_config::{CatalogMode, Config, SandboxKind};
use hangar_runtime::{CallBudget, LoadFailure, RunLimits, Sandboxes};

/// The `run` tool's sandbox and limits, when the catalog offers `run`.
pub struct CodeMode {
    /// The sandboxes, or why one did not load (`run` then answers that).
    pub sandboxes: Sandboxes,
    /// `[code] enabled`: `run` beside the meta-tools too.
    pub enabled: bool,
    pub limits: RunLimits,
}

/// Whether a catalog in `mode` offers `run`: `"code"` does; `"meta"`
/// and `"both"` do with `[code] enabled`.
pub fn offered_in(mode: CatalogMode, enabled: bool) -> bool {
    match mode {
        CatalogMode::Code => true,
        CatalogMode::Meta | CatalogMode::Both => enabled,
        CatalogMode::Full => false,
    }
}

/// Whether `config` offers `run` anywhere: on `/mcp`, or on a toolset's
/// endpoints (`[toolsets.NAME] catalog`).
pub fn offered(config: &Config) -> bool {
    let modes = std::iter::once(config.server.catalog)
        .chain(config.toolsets.values().filter_map(|t| t.catalog));
    modes
        .into_iter()
        .any(|mode| offered_in(mode, config.code.enabled))
}

impl CodeMode {
    /// Code mode as `config` sets it, with the sandbox the loader loaded
    /// (`None` when `run` is not offered); a sandbox that did not load is
    /// a problem of its own.
    pub fn new(
        config: &Config,
        sandboxes: Option<Sandboxes>,
        problems: &mut Vec<LoadFailure>,
    ) -> Option<Arc<CodeMode>> {
        let sandboxes = sandboxes?;
        let failed = [
            (SandboxKind::JavaScript, sandboxes.javascript.as_ref().err()),
            (
                SandboxKind::Python,
                sandboxes.python.as_ref().and_then(|p| p.as_ref().err()),
            ),
        ];
        for (kind, error) in failed {
            if let Some(error) = error {
                problems.push(LoadFailure {
                    path: config.code.sandbox_path(kind, &config.base_dir),
                    error: format!("the code sandbox did not load, so `run` cannot run: {error}"),
                });
            }
        }
        let code = &config.code;
        Some(Arc::new(CodeMode {
            sandboxes,
            enabled: code.enabled,
            limits: RunLimits {
                limits: code.run_limits(&config.limits),
                calls: CallBudget {
                    parallel: code.max_parallel_calls,
                    total: code.max_tool_calls,
                },
                console_bytes: code.max_console_bytes,
            },
        }))
    }
}
