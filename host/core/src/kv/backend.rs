//! What the kv store and its backends share: the typed errors, the
//! [`Backend`] trait each storage implements, and the counter arithmetic
//! both backends do the same way. Below `kv/mod.rs` (which opens a backend
//! and checks bounds) and the backends themselves.

use futures::future::BoxFuture;

/// Why a kv operation failed. The same cases as the WIT `kv-error`, which
/// `crate::wasm::capability::kv` converts it to for a guest; defined here so the store
/// names nothing of the guest runtime.
#[derive(Clone)]
pub enum KvError {
    /// A key or value over its bound.
    TooLarge(String),
    /// A write that would add a key past `max_keys`.
    Quota(String),
    /// The backend cannot be reached (or `[kv]` could not be opened).
    Unavailable(String),
    /// A bad request: empty key, bad TTL, a value that is no counter.
    Invalid(String),
}

/// The same text as the WIT binding's `Debug`, which the host's own error
/// messages (tasks) and logs printed before the store moved here.
impl std::fmt::Debug for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::TooLarge(e) => f.debug_tuple("KvError::TooLarge").field(e).finish(),
            KvError::Quota(e) => f.debug_tuple("KvError::Quota").field(e).finish(),
            KvError::Unavailable(e) => f.debug_tuple("KvError::Unavailable").field(e).finish(),
            KvError::Invalid(e) => f.debug_tuple("KvError::Invalid").field(e).finish(),
        }
    }
}

/// What a backend stores. Keys and values arrive already bounded; `ns` is
/// the plugin's name, which the backend keeps apart from every other.
pub(super) trait Backend: Send + Sync {
    fn get<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>>;
    /// Replaces the value and TTL; adding a key past `max_keys` is `quota`.
    fn set<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<()>>;
    fn delete<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<()>>;
    /// The live value, deleted in the same step: of two takers of one key,
    /// one gets it (single-use tickets and flow states).
    fn take<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>>;
    /// Atomic add on a decimal integer value; an absent key counts as 0 and
    /// is created without TTL (past `max_keys`: `quota`).
    fn increment<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        delta: i64,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<i64>>;
    /// Sets `key` to `value` for `ttl_ms` only if it holds no live value:
    /// whether it did (of two claimers of one key, one gets it). A claim
    /// is not counted against `max_keys`.
    fn claim<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        value: Vec<u8>,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool>>;
    /// The live keys of `ns`, at most `limit` of them (in no set order).
    fn keys<'a>(&'a self, ns: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<String>>>;
    /// Where the data lives, for the log (no credentials).
    fn describe(&self) -> String;
}

/// The human part, as the host's own messages show it.
impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&message(self))
    }
}

pub type Result<T> = std::result::Result<T, KvError>;

/// The human part of an error.
pub(super) fn message(e: &KvError) -> String {
    match e {
        KvError::TooLarge(m)
        | KvError::Quota(m)
        | KvError::Unavailable(m)
        | KvError::Invalid(m) => m.clone(),
    }
}

/// Parses a stored value as the decimal integer `increment` works on.
pub(super) fn parse_counter(value: &[u8]) -> Result<i64> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| KvError::Invalid("the value is not a decimal integer".into()))
}

/// `value + delta`, or `invalid` on overflow.
pub(super) fn add(value: i64, delta: i64) -> Result<i64> {
    value
        .checked_add(delta)
        .ok_or_else(|| KvError::Invalid("increment would overflow a 64-bit integer".into()))
}
