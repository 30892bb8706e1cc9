//! Hangar: an MCP server whose tools are WebAssembly components.
//!
//! A call goes resolve → auth → input map → validate → execute → output map
//! ([`pipeline`]); tools come from components in the plugins directory
//! (the runtime, crate `hangar-runtime`) and are listed in the [`catalog`];
//! [`mcp`] and [`rest`] are the surfaces that carry calls in. Beneath this
//! crate: `hangar-config` (hangar.toml's types), `hangar-core` (the call
//! vocabulary, the kv store, the replicas' Redis, the files store, users'
//! accounts, outbound HTTP) and `hangar-runtime` (the wasm runtime and guest capabilities).

pub mod catalog;
pub mod db;
pub mod health;
pub mod loader;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod pipeline;
pub mod registry;
pub mod reload;
pub mod requests;
pub mod rest;
pub mod scaffold;
pub mod server;
pub mod traces;
pub mod upstream;

use std::sync::Arc;

use arc_swap::ArcSwap;
use hangar_config::Config;
use hangar_runtime::LoadFailure;
use loader::Loader;
pub use loader::{LoadReport, LoadedEntry};
use pipeline::{Live, Pipeline};

/// A loaded server: configuration, runtime and catalog, ready to serve or
/// report. What it holds at start-up; a reload ([`reload::Reloader`])
/// swaps the catalog in `pipeline` and keeps the rest.
pub struct Hangar {
    pub config: Config,
    /// The pipeline in service, shared by every surface.
    pub pipeline: Live,
    /// What failed to load; the server runs degraded with these.
    pub problems: Vec<LoadFailure>,
    /// How the components loaded (`hangar check` prints this).
    pub report: LoadReport,
    /// The runtime and what else a reload reuses.
    pub loader: Arc<Loader>,
    /// The catalog in service's problems, for `/healthz`; a reload swaps them.
    pub facts: Arc<ArcSwap<health::Facts>>,
    /// Reload counters and the last attempt (`/healthz`, metrics).
    pub reload: Arc<reload::ReloadStatus>,
    /// Uploads and artifacts (`[uploads]`, `[artifacts]`; a reload keeps them).
    pub files: Arc<hangar_core::files::Files>,
}

impl Hangar {
    /// Loads every plugin and builds the catalog. Fails only on what makes
    /// serving impossible (a duplicate tool name, an unreadable plugins directory).
    pub async fn load(config: Config) -> anyhow::Result<Hangar> {
        let loader = Arc::new(Loader::open(&config).await?);
        let generation = loader.build(&config).await?;
        let changes = loader.changes().clone();
        let facts = health::Facts::new(generation.problems.clone(), &config)
            .with_sources(generation.report.sources.clone());
        let files = Arc::new(hangar_core::files::Files::new(&config)?);
        Ok(Hangar {
            pipeline: Live::new(
                Pipeline::new(Arc::new(generation.catalog))
                    .with_changes(changes)
                    .with_files(files.clone())
                    .with_door(Arc::new(pipeline::Door::new(config.server.auth_failures)))
                    .with_metrics(Arc::new(if config.server.metrics {
                        metrics::Metrics::new()
                    } else {
                        metrics::Metrics::off()
                    })),
            ),
            facts: Arc::new(ArcSwap::from_pointee(facts)),
            reload: Arc::default(),
            files,
            problems: generation.problems,
            report: generation.report,
            config,
            loader,
        })
    }
}

impl Hangar {
    /// The wasm runtime the catalog's plugins run on.
    pub fn runtime(&self) -> &hangar_runtime::Runtime {
        self.loader.runtime()
    }
}

#[cfg(test)]
mod layers;
