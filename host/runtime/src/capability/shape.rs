//! The shape every guest capability has (see the module doc of
//! `capability`): the [`Capability`] trait, what each of its steps is given,
//! and the store data its host functions are linked for ([`GuestStore`]).
//! Below every capability and the list that names them.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::Linker;
use wasmtime_wasi::WasiView;
use wasmtime_wasi_http::WasiHttpView;

use super::files::Preopens;
use super::http::HttpClient;
use crate::stderr::StderrCapture;
use hangar_config::{Config, Limits, PluginConfig};
use hangar_core::call::{EventSink, ResourceChanges};
use hangar_core::kv::KvStore;

/// The store data capabilities are linked for: `GuestState`, seen only
/// through what wasmtime's WASI and `wasi:http` need of it (their resources
/// share its table). Each capability reaches its own state through the
/// getter its `link` is given.
pub trait GuestStore: WasiView + WasiHttpView + Send + 'static {}

/// One guest capability. The type implementing it is a marker; the states
/// are its associated types.
pub trait Capability {
    /// The WIT interfaces (`package/interface`, no version) by which a guest
    /// uses it, as `hangar check` lists them; empty when it is not listed.
    const IMPORTS: &'static [&'static str];
    /// What one load builds once and every plugin's configuration reads.
    type Load;
    /// What one plugin keeps: cheap to clone (shared parts behind `Arc`).
    type Plugin: Clone + Default + std::fmt::Debug + Send + Sync + 'static;
    /// What one call's store holds.
    type Call: Send + 'static;

    /// Builds the load-wide part; problems are reported, not fatal.
    fn load(setup: &LoadSetup<'_>, problems: &mut Problems) -> Self::Load;

    /// The plugin's part, from its `[plugins.NAME]` table (none when the
    /// config does not name it).
    fn configure(
        load: &Self::Load,
        plugin: &PluginSetup<'_>,
        problems: &mut Problems,
    ) -> Self::Plugin;

    /// The state of one call of the plugin. Fails only when the call's
    /// resources cannot be set up (a folder that cannot be mounted).
    fn per_call(plugin: &Self::Plugin, call: &CallSetup<'_>) -> anyhow::Result<Self::Call>;

    /// Readies a reused instance's state for its next call.
    fn next_call(_state: &mut Self::Call, _call: &CallSetup<'_>) {}

    /// Adds its host functions to the linker; `get` finds the call's state
    /// in the store's data.
    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self::Call,
    ) -> anyhow::Result<()>;

    /// What `hangar check` prints of it for a component that imports
    /// `imports` (its capability imports, with versions) and is configured
    /// as `plugin`. By default one line per import it serves.
    fn check_lines(imports: &[String], _plugin: Option<&PluginConfig>) -> Vec<String> {
        Self::IMPORTS
            .iter()
            .filter_map(|i| find_import(imports, i))
            .map(|name| format!("imports {name}"))
            .collect()
    }
}

/// The host-wide pieces a load starts from.
pub struct LoadSetup<'a> {
    pub config: &'a Config,
    /// The outbound HTTP client every plugin's requests go through.
    pub client: &'a Arc<HttpClient>,
    /// The server's kv store (`[kv]`); none when it could not be opened.
    pub kv: Option<&'a Arc<KvStore>>,
    /// Users' own accounts, which per-user credential providers resolve
    /// through (none in `hangar check`'s dry loads).
    pub accounts: Option<&'a Arc<hangar_core::accounts::Accounts>>,
    /// Where guests announce changed resources and lists.
    pub changes: &'a ResourceChanges,
}

impl LoadSetup<'_> {
    /// `text` with `{{ env.X }}` / `{{ file.X }}` filled in from the process.
    pub fn substitute(&self, text: &str) -> Result<String, String> {
        let env = |var: &str| std::env::var(var).ok();
        hangar_config::substitute_env(text, &env).map_err(|e| e.to_string())
    }
}

/// One plugin being configured.
pub struct PluginSetup<'a> {
    pub name: &'a str,
    /// Its `[plugins.NAME]` table, when the config has one.
    pub config: Option<&'a PluginConfig>,
}

impl PluginSetup<'_> {
    /// Where a problem of its `[plugins.NAME]` table is reported.
    pub fn at(&self, key: &str) -> String {
        format!("plugins.{}.{key}", self.name)
    }
}

/// One call being set up: whose, under which limits, with what mounted.
pub struct CallSetup<'a> {
    pub plugin: &'a Arc<str>,
    pub limits: &'a Limits,
    pub trace_id: Option<&'a str>,
    /// Who calls (the auth stage's principal), when anyone was proved.
    pub principal: Option<&'a hangar_core::call::Principal>,
    pub preopens: &'a Preopens,
    /// Where the guest's stderr goes (WASI's context writes into it).
    pub stderr: &'a StderrCapture,
    /// Where the call's log lines, progress and questions go.
    pub events: &'a EventSink,
    /// When the call's deadline passes.
    pub deadline: Instant,
}

/// The problems met while loading: the config path each concerns, and what
/// is wrong.
#[derive(Default)]
pub struct Problems(pub Vec<(String, String)>);

impl Problems {
    pub fn add(&mut self, path: impl Into<String>, error: impl Into<String>) {
        self.0.push((path.into(), error.into()));
    }
}

/// `hangar check`'s line for a capability that works only under a grant:
/// the import paired with what was granted (an import without a grant
/// still loads; its requests are refused), or a grant the component cannot
/// use. Nothing when neither is there.
pub fn grant_lines(
    imports: &[String],
    interface: &str,
    what: &str,
    granted: Option<&[String]>,
) -> Vec<String> {
    let granted = granted
        .map(|items| items.join(", "))
        .filter(|s| !s.is_empty());
    match (find_import(imports, interface), granted) {
        (Some(name), granted) => vec![format!(
            "imports {name}; grants {what}: {}",
            granted
                .as_deref()
                .unwrap_or("none (its requests will be refused)")
        )],
        (None, Some(granted)) => vec![format!(
            "grants {what}: {granted} (the component imports no {interface})"
        )],
        (None, None) => vec![],
    }
}

/// The import in `imports` of `interface` (`package/interface`, any version).
pub fn find_import<'a>(imports: &'a [String], interface: &str) -> Option<&'a str> {
    imports
        .iter()
        .map(String::as_str)
        .find(|name| name.split('@').next() == Some(interface))
}
