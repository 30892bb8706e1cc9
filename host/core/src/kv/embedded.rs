//! The embedded kv backend: one SQLite file, `kv.sqlite3` under
//! `[server] cache_dir`, no server to run.
//!
//! One table keyed by (plugin, key); a TTL is stored as an expiry time in
//! Unix milliseconds and a row past it reads as absent. Expired rows of a
//! plugin are deleted when that plugin adds a key. The file is in WAL mode
//! and every statement runs on the blocking pool through one connection, so
//! writes of this process are serialized; the write that may add a key is a
//! `BEGIN IMMEDIATE` transaction (count, then insert), so `max_keys` holds
//! even with another Hangar process on the same file. Counting a plugin's
//! keys is a scan of its rows, paid only when a key is added.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::backend::{Backend, KvError, Result, add, parse_counter};

pub struct Embedded {
    conn: Arc<Mutex<Connection>>,
    path: String,
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS kv (
        plugin TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        expires_at INTEGER,
        PRIMARY KEY (plugin, key)
    ) WITHOUT ROWID;
";

/// How long opening the store waits for another process's hold on it.
const OPEN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// The store's journal, durability and schema (each idempotent).
fn set_up(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(SCHEMA)
}

/// Whether `e` is another connection's lock (SQLITE_BUSY or SQLITE_LOCKED).
fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A live row: no expiry, or one still ahead.
const LIVE: &str = "(expires_at IS NULL OR expires_at > ?3)";

impl Embedded {
    /// Opens (or creates) `cache_dir/kv.sqlite3`.
    pub fn open(cache_dir: &Path) -> std::result::Result<Embedded, String> {
        let path = cache_dir.join("kv.sqlite3");
        let fail = |e: &dyn std::fmt::Display| format!("cannot open {}: {e}", path.display());
        std::fs::create_dir_all(cache_dir).map_err(|e| fail(&e))?;
        let conn = Connection::open(&path).map_err(|e| fail(&e))?;
        conn.busy_timeout(OPEN_PATIENCE).map_err(|e| fail(&e))?;
        // Two processes opening one new file at once (replicas, or `hangar
        // check` beside a server, on one cache_dir): switching it to WAL or
        // creating its schema can answer SQLITE_BUSY at once, without the
        // busy handler (SQLite does so where waiting could deadlock). The
        // other process is done within milliseconds: the set-up is tried
        // again until OPEN_PATIENCE has passed.
        let deadline = std::time::Instant::now() + OPEN_PATIENCE;
        loop {
            match set_up(&conn) {
                Ok(()) => break,
                Err(e) if busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(fail(&e)),
            }
        }
        Ok(Embedded {
            conn: Arc::new(Mutex::new(conn)),
            path: path.display().to_string(),
        })
    }

    /// Runs `f` on the connection on the blocking pool. The closure owns
    /// what it needs, so a call dropped while it runs leaves nothing behind.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let conn = self.conn.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                f(&mut conn)
            })
            .await
            .unwrap_or_else(|e| Err(KvError::Unavailable(format!("kv task failed: {e}"))))
        })
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn db(e: rusqlite::Error) -> KvError {
    KvError::Unavailable(format!("sqlite: {e}"))
}

/// Whether `key` is live; if not, makes room for it: drops the plugin's
/// expired rows and fails with `quota` when it holds `max_keys` already.
fn admit(tx: &rusqlite::Transaction, ns: &str, key: &str, now: i64, max_keys: u64) -> Result<bool> {
    let live: Option<i64> = tx
        .query_row(
            &format!("SELECT 1 FROM kv WHERE plugin = ?1 AND key = ?2 AND {LIVE}"),
            params![ns, key, now],
            |r| r.get(0),
        )
        .optional()
        .map_err(db)?;
    if live.is_some() {
        return Ok(true);
    }
    tx.execute(
        "DELETE FROM kv WHERE plugin = ?1 AND expires_at <= ?2",
        params![ns, now],
    )
    .map_err(db)?;
    let count: i64 = tx
        .query_row("SELECT COUNT(*) FROM kv WHERE plugin = ?1", [ns], |r| {
            r.get(0)
        })
        .map_err(db)?;
    if count as u64 >= max_keys {
        return Err(KvError::Quota(format!(
            "the plugin holds {count} keys, the limit"
        )));
    }
    Ok(false)
}

impl Backend for Embedded {
    fn get<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        let (ns, key) = (ns.to_owned(), key.to_owned());
        self.run(move |conn| {
            conn.query_row(
                &format!("SELECT value FROM kv WHERE plugin = ?1 AND key = ?2 AND {LIVE}"),
                params![ns, key, now_ms()],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)
        })
    }

    fn set<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<()>> {
        let (ns, key) = (ns.to_owned(), key.to_owned());
        self.run(move |conn| {
            let now = now_ms();
            let expires = ttl_ms.map(|t| now.saturating_add(t as i64));
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db)?;
            admit(&tx, &ns, &key, now, max_keys)?;
            tx.execute(
                "INSERT INTO kv (plugin, key, value, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (plugin, key) DO UPDATE
                 SET value = excluded.value, expires_at = excluded.expires_at",
                params![ns, key, value, expires],
            )
            .map_err(db)?;
            tx.commit().map_err(db)
        })
    }

    fn delete<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<()>> {
        let (ns, key) = (ns.to_owned(), key.to_owned());
        self.run(move |conn| {
            conn.execute(
                "DELETE FROM kv WHERE plugin = ?1 AND key = ?2",
                params![ns, key],
            )
            .map(drop)
            .map_err(db)
        })
    }

    fn take<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        let (ns, key) = (ns.to_owned(), key.to_owned());
        self.run(move |conn| {
            // One statement: SQLite runs it under one write lock.
            let taken: Option<(Vec<u8>, bool)> = conn
                .query_row(
                    &format!(
                        "DELETE FROM kv WHERE plugin = ?1 AND key = ?2 RETURNING value, {LIVE}"
                    ),
                    params![ns, key, now_ms()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(db)?;
            Ok(taken.and_then(|(value, live)| live.then_some(value)))
        })
    }

    fn claim<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        value: Vec<u8>,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool>> {
        let (ns, key) = (ns.to_owned(), key.to_owned());
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db)?;
            tx.execute(
                "DELETE FROM kv WHERE plugin = ?1 AND key = ?2 AND expires_at <= ?3",
                params![ns, key, now],
            )
            .map_err(db)?;
            let added = tx
                .execute(
                    "INSERT OR IGNORE INTO kv (plugin, key, value, expires_at) VALUES (?1, ?2, ?3, ?4)",
                    params![ns, key, value, now.saturating_add(ttl_ms as i64)],
                )
                .map_err(db)?;
            tx.commit().map_err(db)?;
            Ok(added == 1)
        })
    }

    fn keys<'a>(&'a self, ns: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<String>>> {
        let ns = ns.to_owned();
        self.run(move |conn| {
            let mut statement = conn
                .prepare(&format!(
                    "SELECT key FROM kv WHERE plugin = ?1 AND {LIVE} LIMIT ?2"
                ))
                .map_err(db)?;
            let keys = statement
                .query_map(params![ns, limit as i64, now_ms()], |r| r.get(0))
                .map_err(db)?
                .collect::<rusqlite::Result<Vec<String>>>()
                .map_err(db)?;
            Ok(keys)
        })
    }

    fn increment<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        delta: i64,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<i64>> {
        let (ns, key) = (ns.to_owned(), key.to_owned());
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db)?;
            let next = if admit(&tx, &ns, &key, now, max_keys)? {
                let value: Vec<u8> = tx
                    .query_row(
                        "SELECT value FROM kv WHERE plugin = ?1 AND key = ?2",
                        params![ns, key],
                        |r| r.get(0),
                    )
                    .map_err(db)?;
                let next = add(parse_counter(&value)?, delta)?;
                tx.execute(
                    "UPDATE kv SET value = ?3 WHERE plugin = ?1 AND key = ?2",
                    params![ns, key, next.to_string().into_bytes()],
                )
                .map_err(db)?;
                next
            } else {
                tx.execute(
                    "INSERT OR REPLACE INTO kv (plugin, key, value, expires_at)
                     VALUES (?1, ?2, ?3, NULL)",
                    params![ns, key, delta.to_string().into_bytes()],
                )
                .map_err(db)?;
                delta
            };
            tx.commit().map_err(db)?;
            Ok(next)
        })
    }

    fn describe(&self) -> String {
        format!("embedded (SQLite file {})", self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_expires_and_keeps_namespaces_apart() {
        let dir = std::env::temp_dir().join(format!("hangar-kv-test-{}", uuid::Uuid::new_v4()));
        let kv = Embedded::open(&dir).unwrap();
        assert_eq!(kv.increment("a", "n", 2, 10).await.unwrap(), 2);
        assert_eq!(kv.increment("a", "n", 3, 10).await.unwrap(), 5);
        assert_eq!(kv.get("a", "n").await.unwrap().as_deref(), Some(&b"5"[..]));
        assert_eq!(kv.get("b", "n").await.unwrap(), None);
        kv.set("a", "t", b"x".to_vec(), Some(1), 10).await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(kv.get("a", "t").await.unwrap(), None);
        // The expired key no longer counts: two live keys fit under 2.
        kv.set("a", "u", b"y".to_vec(), None, 2).await.unwrap();
        let full = kv.set("a", "v", b"z".to_vec(), None, 2).await;
        assert!(matches!(full, Err(KvError::Quota(_))), "{full:?}");
        // Replacing a key that exists is not an addition.
        kv.set("a", "u", b"w".to_vec(), None, 2).await.unwrap();
        let bad = kv.increment("a", "u", 1, 10).await;
        assert!(matches!(bad, Err(KvError::Invalid(_))), "{bad:?}");
        kv.delete("a", "u").await.unwrap();
        assert_eq!(kv.get("a", "u").await.unwrap(), None);
        let over = kv.increment("a", "n", i64::MAX, 10).await;
        assert!(matches!(over, Err(KvError::Invalid(_))), "{over:?}");
        std::fs::remove_dir_all(dir).ok();
    }
}
