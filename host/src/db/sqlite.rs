//! The SQLite connector: the embedded default. A few connections, each with
//! its own statement cache, used off the async threads.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use super::{DbFailure, Rows};
use crate::config::SqliteConfig;

/// A small pool of connections to one database file.
pub struct Sqlite {
    idle: Arc<Mutex<Vec<Connection>>>,
    permits: Semaphore,
}

impl Sqlite {
    /// Opens the pool; a new file first gets the `init` script.
    pub fn open(cfg: &SqliteConfig, path: &Path, init: Option<&Path>) -> Result<Sqlite, String> {
        let is_new = !path.exists();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let open = || -> Result<Connection, String> {
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            conn.busy_timeout(Duration::from_millis(cfg.busy_timeout_ms))
                .map_err(|e| e.to_string())?;
            conn.set_prepared_statement_cache_capacity(128);
            Ok(conn)
        };
        let first = open()?;
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
        let mut conns = vec![first];
        for _ in 1..size {
            conns.push(open()?);
        }
        Ok(Sqlite {
            idle: Arc::new(Mutex::new(conns)),
            permits: Semaphore::new(size),
        })
    }

    /// Runs one cached prepared statement on a blocking thread.
    pub async fn query(
        &self,
        sql: &str,
        params: &[Value],
        read_only: bool,
        max_rows: usize,
    ) -> Result<Rows, DbFailure> {
        let permit = self
            .permits
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let conn = self
            .idle
            .lock()
            .unwrap()
            .pop()
            .expect("a permit means an idle connection");
        let sql = sql.to_string();
        let params: Vec<SqlValue> = params.iter().map(to_sql).collect();
        let joined = tokio::task::spawn_blocking(move || {
            let result = run(&conn, &sql, &params, read_only, max_rows);
            (conn, result)
        })
        .await;
        match joined {
            Ok((conn, result)) => {
                self.idle.lock().unwrap().push(conn);
                result
            }
            Err(e) => {
                // The connection went down with the thread: retire its permit too.
                permit.forget();
                Err(DbFailure::Query(format!("query thread failed: {e}")))
            }
        }
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
    let mut stmt = conn.prepare_cached(sql).map_err(failure)?;
    if read_only && !stmt.readonly() {
        return Err(DbFailure::Query(
            "the statement writes, but the tool is read_only".into(),
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
