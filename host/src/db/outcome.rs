//! What running one statement gives back, whichever connector ran it:
//! its rows, or why it did not run. Below the connectors (postgres,
//! sqlite) and the DB tool that maps a failure to a `CallError`.

use serde_json::Value;

/// Rows of one result, and whether `max_rows` cut them.
pub struct Rows {
    pub rows: Vec<Value>,
    pub truncated: bool,
}

/// Why a statement did not run.
pub enum DbFailure {
    /// No connection could be had (the database is down or unreachable).
    Unavailable(String),
    /// The database refused or failed the statement.
    Query(String),
    /// Argument `index` (from 0) cannot be bound as the type of its
    /// parameter.
    Invalid { index: usize, why: String },
    /// The caller cancelled the call; its statement was stopped.
    Cancelled,
}
