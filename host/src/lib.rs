//! Hangar: an MCP server whose tools are WebAssembly components.
//!
//! A call goes resolve → auth → input map → validate → execute → output map
//! ([`pipeline`]); tools come from components in the plugins directory
//! ([`wasm`]) and are listed in the [`catalog`]; [`mcp`] and [`rest`] are the
//! surfaces that carry calls in.

pub mod catalog;
pub mod config;
pub mod db;
pub mod mcp;
pub mod pipeline;
pub mod rest;
pub mod server;
pub mod wasm;

use std::sync::Arc;

use catalog::Catalog;
use config::Config;
use pipeline::Pipeline;
use wasm::engine::EngineOptions;
use wasm::{Discovery, LoadFailure, Runtime};

/// A loaded server: configuration, runtime and catalog, ready to serve or report.
pub struct Hangar {
    pub config: Config,
    pub pipeline: Pipeline,
    /// What failed to load; the server runs degraded with these.
    pub problems: Vec<LoadFailure>,
    /// How the components loaded (`hangar check` prints this).
    pub report: LoadReport,
    _runtime: Runtime,
}

/// One component as it loaded.
#[derive(Debug, Clone)]
pub struct LoadedEntry {
    pub path: std::path::PathBuf,
    pub world: wasm::World,
    pub origin: wasm::Origin,
}

#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub loaded: Vec<LoadedEntry>,
    pub from_cache: usize,
    pub compiled: usize,
}

impl Hangar {
    /// Loads every plugin and builds the catalog. Fails only on what makes
    /// serving impossible (a duplicate tool name, an unreadable plugins directory).
    pub async fn load(config: Config) -> anyhow::Result<Hangar> {
        let runtime = Runtime::new(
            EngineOptions {
                max_instances: config.server.max_instances,
                max_memory_bytes: config.max_memory_bytes(),
            },
            &config.server.cache_dir,
        )?;
        let dir = config.server.plugins.clone();
        let discovery: Discovery = runtime.load_dir(&dir)?;
        let report = LoadReport {
            loaded: discovery
                .loaded
                .iter()
                .map(|p| LoadedEntry {
                    path: p.path.clone(),
                    world: p.world,
                    origin: p.origin,
                })
                .collect(),
            from_cache: discovery.count(wasm::Origin::Cache),
            compiled: discovery.count(wasm::Origin::Compiled),
        };
        for failure in &discovery.failures {
            tracing::error!(path = %failure.path.display(), "plugin skipped: {}", failure.error);
        }
        let built = Catalog::build(&config, discovery).await?;
        Ok(Hangar {
            pipeline: Pipeline::new(Arc::new(built.catalog)),
            problems: built.problems,
            report,
            config,
            _runtime: runtime,
        })
    }
}
