//! The SQLite connector: the embedded default. Two small pools of
//! connections to one file — read-only tools get connections opened
//! read-only — each connection with its own statement cache, used off the
//! async threads.
//!
//! A call may be abandoned at any await (a REST client hangs up, an MCP
//! client cancels): the connection then lives on in the blocking thread,
//! which stops its statement and puts it back in its pool itself (a
//! [`Lease`] returns it on drop). Nothing here panics while holding a lock.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::outcome::{DbFailure, Rows};
use hangar_config::SqliteConfig;
use hangar_core::call::CancelToken;

/// SQLite VM instructions between two checks of a statement's deadline.
const CHECK_EVERY_OPS: i32 = 1000;

/// Pools of connections to one database file.
pub struct Sqlite {
    read_write: Arc<Pool>,
    read_only: Arc<Pool>,
    /// How long a call waits for a connection.
    wait: Duration,
    /// How long a statement may run.
    statement_timeout: Duration,
}

/// Idle connections, and one permit per connection the pool may lend.
struct Pool {
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
    opener: Opener,
}

/// Opens a connection of one pool: the first ones at start-up, and a
/// replacement when one was lost.
#[derive(Clone)]
struct Opener {
    path: PathBuf,
    busy_timeout: Duration,
    read_only: bool,
}

impl Opener {
    fn open(&self) -> Result<Connection, String> {
        let path = &self.path;
        let access = if self.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        };
        let mut conn = Connection::open_with_flags(path, access | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(self.busy_timeout)
            .map_err(|e| e.to_string())?;
        conn.set_prepared_statement_cache_capacity(128);
        if self.read_only {
            // Belt and braces: the file is open read-only, writes are off
            // for the connection, and statements that would change the
            // connection itself (transactions, ATTACH, pragmas that set) are
            // refused when prepared.
            conn.pragma_update(None, "query_only", true)
                .map_err(|e| e.to_string())?;
            conn.authorizer(Some(read_only_authorizer))
                .map_err(|e| e.to_string())?;
        }
        Ok(conn)
    }
}

/// What a read-only connection may prepare: reads, functions, and pragmas
/// that only report.
fn read_only_authorizer(cx: AuthContext<'_>) -> Authorization {
    match cx.action {
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Recursive => Authorization::Allow,
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } if pragma_value.is_none() || REPORTING_PRAGMAS.contains(&pragma_name) => {
            Authorization::Allow
        }
        _ => Authorization::Deny,
    }
}

/// Pragmas that take an argument and still only report.
const REPORTING_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
];

impl Pool {
    fn new(opener: Opener, size: usize, first: Option<Connection>) -> Result<Pool, String> {
        let mut conns: Vec<Connection> = first.into_iter().collect();
        while conns.len() < size {
            conns.push(opener.open()?);
        }
        Ok(Pool {
            idle: Mutex::new(conns),
            permits: Arc::new(Semaphore::new(size)),
            opener,
        })
    }

    /// The idle list; a panic elsewhere never makes it unusable.
    fn idle(&self) -> MutexGuard<'_, Vec<Connection>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `wait` for a permit, then takes an idle connection (or
    /// none, if one was lost: the lease opens a new one).
    async fn lease(self: &Arc<Pool>, wait: Duration) -> Result<Lease, DbFailure> {
        let timed_out = || {
            DbFailure::Unavailable(
                "database unavailable: timed out waiting for a connection".into(),
            )
        };
        let permit = tokio::time::timeout(wait, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| timed_out())?
            .map_err(|_| timed_out())?;
        let conn = self.idle().pop();
        Ok(Lease {
            pool: self.clone(),
            conn,
            _permit: permit,
        })
    }
}

/// One connection out of its pool, with the permit it holds. Dropped — on
/// the blocking thread when the statement ends, abandoned or not, or while
/// unwinding — it puts the connection back before the permit goes.
struct Lease {
    pool: Arc<Pool>,
    conn: Option<Connection>,
    _permit: OwnedSemaphorePermit,
}

impl Lease {
    fn connection(&mut self) -> Result<&mut Connection, DbFailure> {
        if self.conn.is_none() {
            let conn = self.pool.opener.open().map_err(DbFailure::Unavailable)?;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("set above"))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.idle().push(conn);
        }
    }
}

/// Stops the statement of a call that was abandoned (its future dropped).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Sqlite {
    /// Opens the pools; a new file first gets the `init` script.
    pub fn open(cfg: &SqliteConfig, path: &Path, init: Option<&Path>) -> Result<Sqlite, String> {
        let is_new = !path.exists();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let writer = Opener {
            path: path.to_path_buf(),
            busy_timeout: Duration::from_millis(cfg.busy_timeout_ms),
            read_only: false,
        };
        let first = writer.open()?;
        if is_new && let Some(init) = init {
            let sql = std::fs::read_to_string(init)
                .map_err(|e| format!("cannot read init script {}: {e}", init.display()))?;
            if let Err(e) = first.execute_batch(&sql) {
                drop(first);
                let _ = std::fs::remove_file(path);
                return Err(format!("init script {} failed: {e}", init.display()));
            }
        }
        // WAL lets readers go on while a writer writes.
        first
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| e.to_string())?;
        let size = cfg.pool_size.max(1);
        let reader = Opener {
            read_only: true,
            ..writer.clone()
        };
        Ok(Sqlite {
            read_write: Arc::new(Pool::new(writer, size, Some(first))?),
            read_only: Arc::new(Pool::new(reader, size, None)?),
            wait: Duration::from_millis(cfg.wait_timeout_ms),
            statement_timeout: Duration::from_millis(cfg.statement_timeout_ms),
        })
    }

    /// Runs one cached prepared statement on a blocking thread, interrupted
    /// at `statement_timeout_ms` or when the call is cancelled or abandoned.
    pub async fn query(
        &self,
        sql: &str,
        params: &[Value],
        blobs: &[Option<bytes::Bytes>],
        read_only: bool,
        max_rows: usize,
        cancel: &CancelToken,
    ) -> Result<Rows, DbFailure> {
        let pool = if read_only {
            &self.read_only
        } else {
            &self.read_write
        };
        let mut lease = tokio::select! {
            lease = pool.lease(self.wait) => lease?,
            _ = cancel.cancelled() => return Err(DbFailure::Cancelled),
        };
        let sql = sql.to_string();
        let params: Vec<SqlValue> = params
            .iter()
            .enumerate()
            .map(|(i, v)| match blobs.get(i) {
                Some(Some(bytes)) => SqlValue::Blob(bytes.to_vec()),
                _ => to_sql(v),
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = StopOnDrop(stop.clone());
        let timeout = self.statement_timeout;
        let task = tokio::task::spawn_blocking(move || {
            let conn = lease.connection()?;
            let deadline = Instant::now() + timeout;
            let check = stop.clone();
            conn.progress_handler(
                CHECK_EVERY_OPS,
                Some(move || check.load(Ordering::Relaxed) || Instant::now() >= deadline),
            )
            .map_err(|e| DbFailure::Query(e.to_string()))?;
            let result = run(conn, &sql, &params, read_only, max_rows);
            let _ = conn.progress_handler(0, None::<fn() -> bool>);
            // A statement such as BEGIN must not leave its transaction to
            // the next caller of this connection.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            result.map_err(|e| match e {
                DbFailure::Query(m)
                    if m.starts_with("interrupted") && stop.load(Ordering::Relaxed) =>
                {
                    DbFailure::Query(format!("{m}: the call was cancelled"))
                }
                DbFailure::Query(m) if m.starts_with("interrupted") => DbFailure::Query(format!(
                    "{m}: statement timeout of {} ms exceeded",
                    timeout.as_millis()
                )),
                other => other,
            })
            // `lease` drops here: the connection is back before the permit.
        });
        let joined = tokio::select! {
            joined = task => joined,
            _ = cancel.cancelled() => return Err(DbFailure::Cancelled),
        };
        drop(stopped);
        joined.unwrap_or_else(|e| Err(DbFailure::Query(format!("query thread failed: {e}"))))
    }
}

fn run(
    conn: &Connection,
    sql: &str,
    params: &[SqlValue],
    read_only: bool,
    max_rows: usize,
) -> Result<Rows, DbFailure> {
    let failure = |e: rusqlite::Error| DbFailure::Query(e.to_string());
    let mut stmt = conn.prepare_cached(sql).map_err(|e| {
        if read_only && e.sqlite_error_code() == Some(ErrorCode::AuthorizationForStatementDenied) {
            DbFailure::Query(format!(
                "the statement does more than read, but read_only = true ({e})"
            ))
        } else {
            failure(e)
        }
    })?;
    if read_only && !stmt.readonly() {
        return Err(DbFailure::Query(
            "the statement writes, but read_only = true".into(),
        ));
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(failure)?;
    let mut out = Vec::new();
    let mut truncated = false;
    while let Some(row) = rows.next().map_err(failure)? {
        if out.len() == max_rows {
            truncated = true;
            break;
        }
        let mut obj = Map::with_capacity(columns.len());
        for (i, name) in columns.iter().enumerate() {
            obj.insert(name.clone(), to_json(row.get_ref(i).map_err(failure)?));
        }
        out.push(Value::Object(obj));
    }
    Ok(Rows {
        rows: out,
        truncated,
    })
}

fn to_sql(v: &Value) -> SqlValue {
    match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(*b as i64),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        other => SqlValue::Text(other.to_string()),
    }
}

fn to_json(v: ValueRef) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => Value::from(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(B64.encode(b)),
    }
}
