//! `[code]`: code mode — the `run` tool, which runs an agent's TypeScript
//! or JavaScript in the code sandbox, its tool calls made as its caller.
//! `[server] catalog = "code"` lists `search_tools`, `read_tool` and `run`;
//! `"meta"` and `"both"` add `run` when `enabled = true`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::limits::{LimitOverrides, Limits};

/// `[code]` (see the module doc).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CodeConfig {
    /// Offer `run` beside the meta-tools (catalog `"meta"` or `"both"`);
    /// catalog `"code"` offers it whatever this says.
    pub enabled: bool,
    /// The sandbox component that runs TypeScript and JavaScript. Unset:
    /// `sandbox/code-js.wasm` in the folder above the binary's
    /// (`target/sandbox/` for a build in this repo, `PREFIX/sandbox/` for
    /// an installed `PREFIX/bin/hangar`).
    pub javascript: Option<PathBuf>,
    /// The sandbox component that runs Python. Unset: `sandbox/code-py.wasm`
    /// beside the JavaScript one's default, when it is there (Python is
    /// then not offered when it is not).
    pub python: Option<PathBuf>,
    /// Tool calls of one run that run at once (`Promise.all`); later ones
    /// wait for one to end.
    pub max_parallel_calls: u32,
    /// Tool calls one run may make in all.
    pub max_tool_calls: u32,
    /// Bytes of console output one run keeps (the rest is counted, not kept).
    pub max_console_bytes: u32,
    /// What one run may use, over `[limits]` with a 30 s deadline and a
    /// 64 MiB memory cap; its tool calls count against its deadline.
    pub limits: LimitOverrides,
}

impl Default for CodeConfig {
    fn default() -> Self {
        CodeConfig {
            enabled: false,
            javascript: None,
            python: None,
            max_parallel_calls: 8,
            max_tool_calls: 100,
            max_console_bytes: 64 << 10,
            limits: LimitOverrides::default(),
        }
    }
}

impl CodeConfig {
    /// A run's limits: `[limits]` with code mode's own defaults (a 30 s
    /// deadline, 64 MiB, fuel for that long), then `[code.limits]`.
    pub fn run_limits(&self, server: &Limits) -> Limits {
        let defaults = Limits {
            deadline: Duration::from_secs(30),
            memory_mib: 64,
            fuel: 100_000_000_000,
            ..*server
        };
        defaults.overridden_by(&self.limits)
    }

    /// Where the sandbox of `kind` is: as set, relative to the config
    /// file's folder, or the default beside the binary.
    pub fn sandbox_path(&self, kind: SandboxKind, base_dir: &Path) -> PathBuf {
        let set = match kind {
            SandboxKind::JavaScript => &self.javascript,
            SandboxKind::Python => &self.python,
        };
        match set {
            Some(path) => base_dir.join(path),
            None => std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
                .unwrap_or_default()
                .join("sandbox")
                .join(kind.file_name()),
        }
    }

    /// Whether the sandbox of `kind` was set in the config (not left to
    /// its default).
    pub fn sandbox_set(&self, kind: SandboxKind) -> bool {
        match kind {
            SandboxKind::JavaScript => self.javascript.is_some(),
            SandboxKind::Python => self.python.is_some(),
        }
    }
}

/// Which sandbox component: the one for TypeScript and JavaScript, or the
/// one for Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxKind {
    JavaScript,
    Python,
}

impl SandboxKind {
    /// Its file name in the default folder.
    pub fn file_name(self) -> &'static str {
        match self {
            SandboxKind::JavaScript => "code-js.wasm",
            SandboxKind::Python => "code-py.wasm",
        }
    }
}
