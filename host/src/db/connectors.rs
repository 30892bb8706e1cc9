//! The configured databases (`[connectors.NAME]`): each opened once at load
//! by its kind (a Postgres pool that connects lazily, a SQLite file), and
//! the one way a statement runs on either.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::outcome::{DbFailure, Rows};
use super::template::{self, ParamStyle, TemplateError};
use super::{postgres, sqlite};
use hangar_config::{Config, ConnectorConfig};
use hangar_core::call::CancelToken;
use hangar_core::cluster::Cluster;

/// A configured database.
pub enum Connector {
    Postgres(postgres::Postgres),
    Sqlite(sqlite::Sqlite),
}

impl Connector {
    pub(super) fn style(&self) -> ParamStyle {
        match self {
            Connector::Postgres(_) => ParamStyle::Dollar,
            Connector::Sqlite(_) => ParamStyle::QuestionNumbered,
        }
    }

    /// Runs `sql` with `params`; a parameter with bytes in `blobs` (at its
    /// index) is bound as those bytes (a blob, a `bytea`) instead.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[Value],
        blobs: &[Option<bytes::Bytes>],
        read_only: bool,
        max_rows: usize,
        cancel: &CancelToken,
    ) -> Result<Rows, DbFailure> {
        match self {
            Connector::Postgres(pg) => {
                pg.query(sql, params, blobs, read_only, max_rows, cancel)
                    .await
            }
            Connector::Sqlite(lite) => {
                lite.query(sql, params, blobs, read_only, max_rows, cancel)
                    .await
            }
        }
    }
}

impl Connector {
    /// Connections lent out and calls waiting for one (Postgres pools;
    /// SQLite's are not counted).
    pub fn pool_use(&self) -> (u64, u64) {
        match self {
            Connector::Postgres(pg) => pg.pool_use(),
            Connector::Sqlite(_) => (0, 0),
        }
    }
}

/// Every connector by name; one that could not be set up keeps its error,
/// which its tools report at the env stage.
pub struct Connectors {
    by_name: BTreeMap<String, Result<Arc<Connector>, TemplateError>>,
    /// The replicas' shared Redis (`[cluster]`): the result caches' second tier.
    shared: Option<Arc<Cluster>>,
}

impl Connectors {
    /// Result caches of the tools built on these connectors get a second
    /// tier in `cluster`'s Redis.
    pub fn shared_by(mut self, cluster: Option<Arc<Cluster>>) -> Connectors {
        self.shared = cluster;
        self
    }

    /// Sets up every configured connector. Postgres pools connect lazily, so
    /// a database that is down does not stop startup.
    pub fn open(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Connectors> {
        let mut by_name = BTreeMap::new();
        for (name, cfg) in &config.connectors {
            let connector = match cfg {
                ConnectorConfig::Postgres(pg) => template::substitute_env(&pg.url, env)
                    .map(|url| postgres::Postgres::new(pg, &url).map(Connector::Postgres)),
                ConnectorConfig::Sqlite(lite) => {
                    template::substitute_env(&lite.path, env).map(|path| {
                        let path = config.resolve(Path::new(&path));
                        let init = lite.init.as_deref().map(|p| config.resolve(p));
                        sqlite::Sqlite::open(lite, &path, init.as_deref()).map(Connector::Sqlite)
                    })
                }
            };
            let connector = match connector {
                Ok(Ok(c)) => Ok(Arc::new(c)),
                Ok(Err(e)) => anyhow::bail!("connector {name}: {e}"),
                Err(e) => Err(e),
            };
            by_name.insert(name.clone(), connector);
        }
        Ok(Connectors {
            by_name,
            shared: None,
        })
    }

    /// The connector called `name` (or why it could not be set up), if one is configured.
    pub(super) fn get(&self, name: &str) -> Option<&Result<Arc<Connector>, TemplateError>> {
        self.by_name.get(name)
    }

    /// The second tier of the result caches on these connectors, if any.
    pub(super) fn shared(&self) -> Option<&Arc<Cluster>> {
        self.shared.as_ref()
    }

    /// Env variables that connectors need and do not have, for reporting.
    pub fn problems(&self) -> Vec<(String, String)> {
        self.by_name
            .iter()
            .filter_map(|(name, c)| {
                c.as_ref()
                    .err()
                    .map(|e| (name.clone(), format!("connector {name}: {e}")))
            })
            .collect()
    }
}
