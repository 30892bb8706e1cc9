//! Building a catalog from the config and the plugins directory, once at
//! start-up and again on every reload, with what outlives a reload.

mod metas;
mod report;

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::registry::{Contact, Resolution};
use hangar_config::Config;
use hangar_core::call::ResourceChanges;
use hangar_runtime::capability::{LoadSetup, Loads, Problems};
use hangar_runtime::engine::EngineOptions;
use hangar_runtime::sched::SchedOptions;
use hangar_runtime::{self, Discovery, LoadFailure, Runtime};
use metas::{plugin_metas, unconfigured};
pub use report::{LoadReport, LoadedEntry};

/// What a reload reuses instead of rebuilding: the wasm runtime (engine,
/// pooling limits, compiled-component cache, scheduler — their settings
/// need a restart), the outbound HTTP client (`[http]`), the kv store
/// (`[kv]`) and the changes channel the sessions' streams listen on. Owns
/// them for the whole life of the server.
pub struct Loader {
    runtime: Runtime,
    client: Arc<hangar_runtime::http::HttpClient>,
    kv: Option<Arc<hangar_core::kv::KvStore>>,
    /// Why the kv store did not open, repeated in every generation's problems.
    kv_problems: Vec<LoadFailure>,
    changes: ResourceChanges,
    /// The replicas' shared Redis (`[cluster]`), kept across reloads.
    cluster: Option<Arc<hangar_core::cluster::Cluster>>,
    /// Users' own accounts (their connections live in the kv store).
    accounts: Arc<hangar_core::accounts::Accounts>,
}

/// One catalog and what was met building it.
pub struct Generation {
    pub catalog: Catalog,
    /// What failed to load; the server runs degraded with these.
    pub problems: Vec<LoadFailure>,
    pub report: LoadReport,
}

impl Loader {
    /// The wasm runtime every generation's plugins run on.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Starts the runtime and opens the kv store for `config`.
    pub async fn open(config: &Config) -> anyhow::Result<Loader> {
        let server = &config.server;
        let runtime = Runtime::new(
            EngineOptions {
                max_instances: server.max_instances,
                max_memory_bytes: config.max_memory_bytes(),
            },
            SchedOptions::new(
                server.max_instances,
                server.stage_instances,
                server.long_running_slots,
                server.long_running_after,
            ),
            &server.cache_dir,
        )?;
        let client = Arc::new(
            hangar_runtime::http::HttpClient::new(config.http.extra_ca.as_deref())
                .map_err(|e| anyhow::anyhow!(e))?
                .with_resolve(&config.http.resolve),
        );
        let cluster = config
            .cluster
            .as_ref()
            .map(hangar_core::cluster::Cluster::open)
            .transpose()?;
        if let Some(cluster) = &cluster {
            cluster.probe().await?;
        }
        // kv in the cluster's Redis speaks through the cluster's connection.
        let open_redis = cluster.as_ref().map(|cluster| hangar_core::kv::OpenRedis {
            url: cluster.first_url(),
            link: cluster.link().clone(),
        });
        let (kv, kv_problems) =
            hangar_core::kv::open(&config.kv, &config.server.cache_dir, open_redis).await;
        // Users' tokens are sealed with the key: one that cannot be used
        // stops the start, as a missing one does (`Config::load`).
        if config.credentials.per_user() {
            config
                .credentials
                .encryption_key()
                .map_err(|e| anyhow::anyhow!(e))?;
        }
        let accounts = Arc::new(hangar_core::accounts::Accounts::new(
            kv.clone(),
            (**client.tls()).clone(),
        ));
        let kv_problems = kv_problems
            .into_iter()
            .map(|error| LoadFailure {
                path: std::path::PathBuf::from("kv"),
                error,
            })
            .collect();
        Ok(Loader {
            runtime,
            client,
            kv,
            kv_problems,
            changes: ResourceChanges::default(),
            cluster,
            accounts,
        })
    }

    /// The replicas' shared Redis, when `[cluster]` is set.
    /// The TLS roots of the host's own outbound requests (upstreams, the
    /// OAuth issuer): the system's plus `[http] extra_ca`, as guests trust.
    pub fn outbound_tls(&self) -> rustls::ClientConfig {
        (**self.client.tls()).clone()
    }

    pub fn cluster(&self) -> Option<&Arc<hangar_core::cluster::Cluster>> {
        self.cluster.as_ref()
    }

    pub fn changes(&self) -> &ResourceChanges {
        &self.changes
    }

    /// Users' own accounts at per-user providers.
    pub fn accounts(&self) -> &Arc<hangar_core::accounts::Accounts> {
        &self.accounts
    }

    /// The kv store (`[kv]`), when it opened.
    pub fn kv(&self) -> Option<Arc<hangar_core::kv::KvStore>> {
        self.kv.clone()
    }

    /// Loads every component of the plugins directory and builds the
    /// catalog. Fails only on what makes serving impossible (a duplicate
    /// tool name, an unreadable plugins directory).
    pub async fn build(self: &Arc<Self>, config: &Config) -> anyhow::Result<Generation> {
        self.build_asking(config, Contact::Always).await
    }

    /// [`Loader::build`] for a reload: a source pinned by digest and
    /// already cached is not asked for again; a changed `source` or
    /// `digest` takes effect.
    pub async fn build_off_path(
        self: &Arc<Self>,
        config: Arc<Config>,
    ) -> anyhow::Result<Generation> {
        self.build_asking(&config, Contact::UnlessPinnedAndCached)
            .await
    }

    /// The compiling runs on a blocking thread (it takes minutes on a first
    /// start): the server's request threads never wait for it, and the
    /// start-up stays free to hear a SIGTERM.
    async fn build_asking(
        self: &Arc<Self>,
        config: &Config,
        contact: Contact,
    ) -> anyhow::Result<Generation> {
        let resolution = crate::registry::resolve(config, contact).await;
        let (loader, cfg, res) = (self.clone(), config.clone(), resolution.clone());
        let (discovery, meta_problems) =
            tokio::task::spawn_blocking(move || loader.discover(&cfg, &res))
                .await
                .map_err(|e| anyhow::anyhow!("loading plugins panicked: {e}"))??;
        self.finish(config, discovery, meta_problems, resolution)
            .await
    }

    /// Loads the components; returns them and the config problems met.
    fn discover(
        &self,
        config: &Config,
        resolution: &Resolution,
    ) -> anyhow::Result<(Discovery, Vec<LoadFailure>)> {
        let mut problems = Problems::default();
        let loads = Loads::new(
            &LoadSetup {
                config,
                client: &self.client,
                kv: self.kv.as_ref(),
                accounts: Some(&self.accounts),
                changes: &self.changes,
            },
            &mut problems,
        );
        let (metas, mut meta_problems) = plugin_metas(config, &loads, problems);
        meta_problems.extend(self.kv_problems.iter().cloned());
        let meta = |name: &str| {
            metas
                .get(name)
                .cloned()
                .unwrap_or_else(|| unconfigured(name, &loads))
        };
        let named: Vec<_> = resolution
            .resolved
            .iter()
            .map(|r| (r.name.clone(), r.path.clone(), r.layer_digest()))
            .collect();
        let mut discovery = self
            .runtime
            .load_dir_with(&config.server.plugins, &named, &meta)?;
        if crate::catalog::code::offered(config) {
            use hangar_config::SandboxKind::{JavaScript, Python};
            let load = |kind, with_wasi| {
                let path = config.code.sandbox_path(kind, &config.base_dir);
                (self.runtime.load_sandbox(&path, with_wasi))
                    .map(Arc::new)
                    .map_err(|e| format!("{e:#}"))
            };
            // Python is offered where its sandbox is: set, or built beside
            // the binary.
            let python = config.code.sandbox_set(Python)
                || config.code.sandbox_path(Python, &config.base_dir).exists();
            discovery.sandboxes = Some(hangar_runtime::Sandboxes {
                javascript: load(JavaScript, false),
                python: python.then(|| load(Python, true)),
            });
        }
        Ok((discovery, meta_problems))
    }

    async fn finish(
        &self,
        config: &Config,
        mut discovery: Discovery,
        mut meta_problems: Vec<LoadFailure>,
        resolution: Resolution,
    ) -> anyhow::Result<Generation> {
        // What each tool component may reach, as `hangar check` says it
        // (the explorer's tool page shows it).
        for p in &mut discovery.loaded {
            if let hangar_runtime::PluginKind::Tool(tool) = &mut p.kind {
                let lines = hangar_runtime::capability::check_lines(
                    &p.capability_imports,
                    config.plugins.get(&p.name),
                );
                tool.set_reach(lines);
            }
        }
        // A component from a registry that failed to load (one changed in
        // the cache, one that is not a component): (its file, its name, its source).
        let failed: Vec<_> = resolution
            .resolved
            .iter()
            .filter(|r| discovery.failures.iter().any(|f| f.path == r.path))
            .map(|r| (r.path.clone(), r.name.clone(), r.source.clone()))
            .collect();
        let report = LoadReport {
            loaded: discovery
                .loaded
                .iter()
                .map(|p| LoadedEntry {
                    path: p.path.clone(),
                    name: p.name.clone(),
                    world: p.world(),
                    origin: p.origin,
                    capability_imports: p.capability_imports.clone(),
                })
                .collect(),
            from_cache: discovery.count(hangar_runtime::Origin::Cache),
            compiled: discovery.count(hangar_runtime::Origin::Compiled),
            sources: resolution.resolved,
        };
        for failure in &discovery.failures {
            tracing::error!(path = %failure.path.display(), "plugin skipped: {}", failure.error);
        }
        // Upstreams trust what guests' HTTPS trusts: the system roots and `[http] extra_ca`.
        let mut built = Catalog::build(
            config,
            discovery,
            self.client.tls(),
            self.cluster.clone(),
            &self.accounts,
            &self.changes,
        )
        .await?;
        // A refused source is its own problem; "configured but did not load" would repeat it.
        let plugins_dir = &config.server.plugins;
        built.problems.retain(|p| {
            !resolution
                .refused
                .iter()
                .chain(failed.iter().map(|(_, name, _)| name))
                .any(|name| p.path == plugins_dir.join(format!("{name}.wasm")))
        });
        // Named by its source, as a refusal is, not by its file in the cache.
        for p in &mut built.problems {
            if let Some((_, _, source)) = failed.iter().find(|(path, _, _)| *path == p.path) {
                p.path = std::path::PathBuf::from(source);
            }
        }
        built
            .problems
            .extend(resolution.problems.iter().map(|p| LoadFailure {
                path: std::path::PathBuf::from(&p.source),
                error: p.message(),
            }));
        built.problems.append(&mut meta_problems);
        Ok(Generation {
            catalog: built.catalog,
            problems: built.problems,
            report,
        })
    }
}
