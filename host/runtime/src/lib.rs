//! The wasm runtime: one engine, the compiled-component cache, loading
//! components and running their exports under limits. It knows nothing of MCP.

mod auth;
mod bindings;
mod cache;
pub mod capability;
mod code;
mod convert;
pub mod engine;
mod exported_offers;
mod guest_state;
mod lane;
mod limits;
mod linking;
mod mapper;
mod offers;
pub mod plain;
pub mod sched;
mod stage;
mod stderr;
mod teardown;
mod tool;
mod toolchain;
mod warm;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

pub use auth::AuthPlugin;
pub use cache::Origin;
pub use capability::files::{Preopens, WriteCap};
pub use capability::http;
pub use code::{
    CallBudget, Outcome, Position, Program, ProgramError, RunLimits, Sandbox, Sandboxes,
};
pub use guest_state::PluginMeta;
pub use mapper::MapperPlugin;
pub use offers::Listing;
pub use teardown::on_park;
pub use tool::ToolPlugin;
pub use toolchain::Toolchain;

use cache::CompiledCache;
use engine::{EngineOptions, EpochTicker};
use guest_state::GuestState;
use sched::{SchedOptions, Scheduler};

/// Which `hangar:plugin` world a component exports, or `Plain` for one
/// written for none: its exported functions are its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Tool,
    Auth,
    Mapper,
    Plain,
}

impl World {
    pub fn as_str(self) -> &'static str {
        match self {
            World::Tool => "tool",
            World::Auth => "auth",
            World::Mapper => "mapper",
            World::Plain => "plain",
        }
    }
}

/// A component file that loaded, ready for the world it exports.
pub struct LoadedPlugin {
    pub path: PathBuf,
    /// The file stem, which names the plugin in `hangar.toml`.
    pub name: String,
    /// Loaded from `plugins/mappers/`, where the file name says which tool it maps.
    pub by_convention: bool,
    pub origin: Origin,
    pub kind: PluginKind,
    /// The component's capability imports (`capability::imports`: those
    /// `hangar check` lists), as it names them (with their version).
    pub capability_imports: Vec<String>,
}

/// A loaded plugin of one of the three worlds.
pub enum PluginKind {
    Tool(ToolPlugin),
    Auth(AuthPlugin),
    Mapper(MapperPlugin),
}

impl LoadedPlugin {
    pub fn world(&self) -> World {
        match &self.kind {
            PluginKind::Tool(t) if t.is_typed() => World::Plain,
            PluginKind::Tool(_) => World::Tool,
            PluginKind::Auth(_) => World::Auth,
            PluginKind::Mapper(_) => World::Mapper,
        }
    }
}

/// A component file that did not load, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadFailure {
    pub path: PathBuf,
    pub error: String,
}

/// The outcome of loading a plugins directory.
#[derive(Default)]
pub struct Discovery {
    pub loaded: Vec<LoadedPlugin>,
    pub failures: Vec<LoadFailure>,
    /// The code sandboxes, when code mode is on: loaded, or why not.
    pub sandboxes: Option<Sandboxes>,
}

impl Discovery {
    pub fn count(&self, origin: Origin) -> usize {
        self.loaded.iter().filter(|p| p.origin == origin).count()
    }
}

/// The engine, the linker with Hangar's host imports, the compiled cache,
/// the epoch ticker and the scheduler: everything needed to load and run
/// components.
pub struct Runtime {
    engine: Engine,
    linker: Linker<GuestState>,
    cache: CompiledCache,
    sched: Arc<Scheduler>,
    _ticker: EpochTicker,
}

impl Runtime {
    pub fn new(
        opts: EngineOptions,
        sched: SchedOptions,
        cache_dir: &Path,
    ) -> anyhow::Result<Runtime> {
        let engine = engine::build(opts)?;
        let mut linker = Linker::new(&engine);
        linking::link(&mut linker)?;
        let ticker = EpochTicker::start(&engine);
        Ok(Runtime {
            cache: CompiledCache::new(cache_dir, &engine),
            sched: Scheduler::new(sched, ticker.ticking()),
            _ticker: ticker,
            engine,
            linker,
        })
    }

    /// The code sandbox at `path` (`[code] javascript` or `python`),
    /// compiled and linked with `program-tools` (and WASI, `with_wasi`).
    pub fn load_sandbox(&self, path: &Path, with_wasi: bool) -> anyhow::Result<Sandbox> {
        Sandbox::load(
            &self.engine,
            &self.cache,
            path,
            self.sched.clone(),
            with_wasi,
        )
    }

    /// The instance slots and CPU lane every guest call goes through.
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.sched
    }

    /// Loads every `*.wasm` in `dir` and in `dir/mappers/`, compiling in
    /// parallel. A file that fails is reported in `failures`; the others
    /// still load. `meta` gives each plugin its configuration by name.
    pub fn load_dir(
        &self,
        dir: &Path,
        meta: &(dyn Fn(&str) -> PluginMeta + Sync),
    ) -> anyhow::Result<Discovery> {
        self.load_dir_with(dir, &[], meta)
    }

    /// [`Runtime::load_dir`] plus components elsewhere (pulled from a
    /// registry), each named by its plugin name instead of its file stem,
    /// with the digest its bytes must hash to: the file was checked when it
    /// was pulled or found in the cache, and may have changed on disk since.
    pub fn load_dir_with(
        &self,
        dir: &Path,
        named: &[(String, PathBuf, String)],
        meta: &(dyn Fn(&str) -> PluginMeta + Sync),
    ) -> anyhow::Result<Discovery> {
        let mut paths = wasm_files(dir)
            .map_err(|e| anyhow::anyhow!("cannot read plugins directory {}: {e}", dir.display()))?;
        let mappers = dir.join("mappers");
        if mappers.is_dir() {
            paths.extend(wasm_files(&mappers)?);
        }
        let mut names: Vec<Option<(&str, &str)>> = vec![None; paths.len()];
        for (name, path, digest) in named {
            paths.push(path.clone());
            names.push(Some((name.as_str(), digest.as_str())));
        }
        // Smallest first: a process compiles one component at a time (see
        // `CompiledCache::load`), and small ones are done in moments.
        let size = |p: &PathBuf| std::fs::metadata(p).map_or(u64::MAX, |m| m.len());
        let mut order: Vec<usize> = (0..paths.len()).collect();
        order.sort_by_cached_key(|&i| size(&paths[i]));
        let paths: Vec<PathBuf> = order.iter().map(|&i| paths[i].clone()).collect();
        let names: Vec<Option<(&str, &str)>> = order.iter().map(|&i| names[i]).collect();
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = paths
                .iter()
                .zip(&names)
                .map(|(p, name)| {
                    let by_convention = name.is_none() && p.parent() == Some(mappers.as_path());
                    let name = *name;
                    s.spawn(move || self.load(p, name, by_convention, meta))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("loader panicked".into())))
                .collect()
        });
        // Back in the folder's order, which the catalog lists by.
        let mut loaded: Vec<_> = order
            .into_iter()
            .zip(paths.into_iter().zip(results))
            .collect();
        loaded.sort_by_key(|(i, _)| *i);
        let mut discovery = Discovery::default();
        for (_, (path, result)) in loaded {
            match result {
                Ok(plugin) => discovery.loaded.push(plugin),
                Err(error) => discovery.failures.push(LoadFailure { path, error }),
            }
        }
        Ok(discovery)
    }

    /// Loads one component file; a named one (from a registry) only when
    /// the bytes read are the ones its digest names.
    fn load(
        &self,
        path: &Path,
        named: Option<(&str, &str)>,
        by_convention: bool,
        meta: &(dyn Fn(&str) -> PluginMeta + Sync),
    ) -> Result<LoadedPlugin, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
        // These very bytes are compiled (or found compiled): checking them,
        // not the file before, leaves no moment for it to change between.
        if let Some((name, digest)) = named {
            use sha2::Digest;
            let got = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)));
            if got != digest {
                return Err(format!(
                    "plugin {name:?}: the cached component changed on disk since it was checked \
                     (it hashes to {got}, not {digest}); refused"
                ));
            }
        }
        let name = named.map(|(name, _)| name);
        let started = std::time::Instant::now();
        let (component, origin) = self
            .cache
            .load(&self.engine, path, &bytes)
            .map_err(|e| format!("not a valid component: {e}"))?;
        tracing::info!(
            path = %path.display(),
            origin = match origin {
                Origin::Cache => "cache",
                Origin::Compiled => "compiled",
            },
            ms = started.elapsed().as_millis() as u64,
            "component loaded"
        );
        let name = name.map_or_else(|| plugin_name(path), str::to_string);
        let meta = meta(&name);
        let (linker, sched) = (&self.linker, self.sched.clone());
        let toolchain = Toolchain::of(&bytes);
        let kind = match self.world_of(&component)? {
            World::Tool => ToolPlugin::new(meta, &component, linker, sched)
                .map(|p| PluginKind::Tool(p.built_by(toolchain))),
            World::Auth => AuthPlugin::new(meta, &component, linker, sched).map(PluginKind::Auth),
            World::Mapper => {
                MapperPlugin::new(meta, &component, linker, sched).map(PluginKind::Mapper)
            }
            World::Plain => {
                let docs = plain::PackageDocs::read(&bytes);
                let exports = plain::PlainExports::reflect(&component, &self.engine, &docs);
                ToolPlugin::typed(meta, &component, linker, sched, exports)
                    .map(|p| PluginKind::Tool(p.built_by(toolchain)))
            }
        }
        .map_err(|e| e.to_string())?;
        let imports: Vec<String> = component
            .component_type()
            .imports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let capability_imports = capability::imports()
            .filter_map(|interface| {
                capability::find_import(&imports, interface).map(str::to_string)
            })
            .collect();
        Ok(LoadedPlugin {
            path: path.to_path_buf(),
            name,
            by_convention,
            origin,
            kind,
            capability_imports,
        })
    }

    fn world_of(&self, component: &Component) -> Result<World, String> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let has = |name: &str| exports.iter().any(|e| e == name);
        let offers = ["resources", "prompts", "completion"]
            .iter()
            .any(|i| has(&format!("hangar:plugin/{i}@0.1.0")));
        if (has("call-tool") && has("list-tools")) || offers {
            Ok(World::Tool)
        } else if has("authenticate") {
            Ok(World::Auth)
        } else if has("map") {
            Ok(World::Mapper)
        } else {
            // Written for no world of ours: its own functions are its tools.
            Ok(World::Plain)
        }
    }
}

fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// A plugin's name: its file stem (`plugins/echo.wasm` → `echo`).
pub fn plugin_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
