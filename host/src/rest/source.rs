//! Where a tool, resource or prompt comes from, as the REST listings say
//! it (`source`): a Rust, Python or JavaScript component, a plain
//! component, a SQL statement, an upstream server, or Hangar itself. The
//! explorer groups its lists by it.

use serde::Serialize;

use crate::catalog::{Backend, Provider, Toolchain};
use crate::pipeline::{Pipeline, meta};

/// `{"kind", "name", "language"}`: `kind` is `component`, `plain` (a
/// component written for no Hangar world), `sql`, `upstream` or `hangar`;
/// `name` the plugin, the connector, the upstream (or `hangar`);
/// `language` a component's, as its build says.
#[derive(Serialize)]
pub(super) struct Source {
    kind: &'static str,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    language: Option<Toolchain>,
}

impl Source {
    pub(super) fn hangar() -> Source {
        Source {
            kind: "hangar",
            name: "hangar".into(),
            language: None,
        }
    }

    /// A plugin's: `plain` when written for no Hangar world (`typed`).
    fn component(name: &str, typed: bool, toolchain: Toolchain) -> Source {
        Source {
            kind: if typed { "plain" } else { "component" },
            name: name.to_string(),
            language: Some(toolchain),
        }
    }

    /// The source of the catalog's tool `name` (a meta-tool's is Hangar).
    pub(super) fn of_tool(pipeline: &Pipeline, name: &str) -> Source {
        let catalog = pipeline.catalog();
        if meta::is_meta(catalog, None, name) {
            return Source::hangar();
        }
        match catalog.resolve(name) {
            Ok(tool) => Source::of_backend(&tool.backend),
            Err(_) => Source::hangar(),
        }
    }

    /// The source of a tool that runs on `backend`.
    pub(super) fn of_backend(backend: &Backend) -> Source {
        match backend {
            Backend::Wasm { plugin, .. } => {
                Source::component(plugin.name(), plugin.is_typed(), plugin.toolchain())
            }
            Backend::Sql(db) => Source {
                kind: "sql",
                name: db.connector_name().to_string(),
                language: None,
            },
            Backend::Upstream { upstream, .. } => Source {
                kind: "upstream",
                name: upstream.name.clone(),
                language: None,
            },
            Backend::UploadUrl(_) => Source::hangar(),
        }
    }

    /// The source of a resource, template or prompt served by `provider`.
    pub(super) fn of_provider(provider: Option<&Provider>) -> Source {
        match provider {
            Some(Provider::Wasm(plugin)) => {
                Source::component(plugin.name(), plugin.is_typed(), plugin.toolchain())
            }
            Some(Provider::Sql(db)) => Source {
                kind: "sql",
                name: db.connector_name().to_string(),
                language: None,
            },
            Some(Provider::Upstream(upstream)) => Source {
                kind: "upstream",
                name: upstream.name.clone(),
                language: None,
            },
            None => Source::hangar(),
        }
    }
}
