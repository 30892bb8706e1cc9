//! `[connectors.X]`: the databases DB tools and resources run on.

use super::*;

/// A database connection: `kind = "postgres"` or `kind = "sqlite"`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ConnectorConfig {
    /// A PostgreSQL server, through a pool of connections.
    Postgres(PostgresConfig),
    /// An SQLite file, run in the host.
    Sqlite(SqliteConfig),
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// A libpq-style URL; may hold `{{ env.VAR }}`.
    pub url: String,
    /// Connections kept open at most.
    #[serde(default = "default_pg_pool")]
    pub pool_size: usize,
    /// How long a statement may run before the server cancels it.
    #[serde(default = "default_timeout_ms")]
    pub statement_timeout_ms: u64,
    /// How long a call waits for a connection (and to connect) before failing.
    #[serde(default = "default_timeout_ms")]
    pub wait_timeout_ms: u64,
    /// TLS: `disable`, `prefer` (the default, as libpq), `require`,
    /// `verify-ca` or `verify-full`; overrides the URL's `sslmode`.
    pub sslmode: Option<String>,
    /// PEM certificates trusted besides the system's roots (the URL's
    /// `sslrootcert` when not set).
    pub ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// The database file; may hold `{{ env.VAR }}`.
    pub path: String,
    /// Connections kept open at most.
    #[serde(default = "default_sqlite_pool")]
    pub pool_size: usize,
    /// SQL run once when the file does not exist yet (schema and seed data).
    pub init: Option<PathBuf>,
    /// How long a statement waits for another connection's lock.
    #[serde(default = "default_timeout_ms")]
    pub busy_timeout_ms: u64,
    /// How long a statement may run before it is interrupted.
    #[serde(default = "default_timeout_ms")]
    pub statement_timeout_ms: u64,
    /// How long a call waits for a free connection before failing.
    #[serde(default = "default_timeout_ms")]
    pub wait_timeout_ms: u64,
}

fn default_pg_pool() -> usize {
    16
}

fn default_sqlite_pool() -> usize {
    4
}

fn default_timeout_ms() -> u64 {
    5000
}
