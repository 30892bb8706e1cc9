//! The Postgres connector: a deadpool pool of tokio-postgres connections,
//! statements prepared once per connection (`prepare_cached`), JSON values
//! bound by the type Postgres infers for each parameter, TLS by `sslmode`.
//!
//! Pooled sessions are shared by every caller, so no call may leave state
//! behind: every statement is followed by a reset of the session, sent with
//! it, in one round trip.
//!
//! A read-only call is two messages, pipelined: the statement (bound and
//! executed, prepared once per connection) and one simple query that resets
//! the session ([`READ_ONLY_RESET`]). The statement runs in a transaction of
//! its own that is read-only because the read-only pool's sessions default
//! to read-only transactions (`default_transaction_read_only`, a startup
//! option, which `RESET ALL` puts back if the statement turned it off for
//! later calls). What a call costs Postgres is mostly its messages, not
//! their statements: each one ends in a Sync, which the server answers with
//! a flush of its own (a `send`, and a wake-up of this side). Fewer is not
//! possible through tokio-postgres, which ends every request with a Sync.
//! An earlier form, `START TRANSACTION READ ONLY`, the statement, then
//! `ROLLBACK; SELECT pg_advisory_unlock_all()`, was three messages; two
//! served ~12 % more cache misses in an interleaved A/B.
//!
//! Not done, on purpose: leaving each connection idle inside an open
//! read-only transaction between calls, so that a call is the statement and
//! one message ending this transaction and beginning the next. `now()` is
//! the time a transaction began, so a tool's `now()` would be when the
//! previous call on its connection ended, minutes ago on a quiet pool; and
//! pooled connections would sit `idle in transaction`, where
//! `idle_in_transaction_session_timeout` closes them under the next caller.

use std::error::Error as StdError;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::BytesMut;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use futures::StreamExt;
use postgres_types::{FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use serde_json::{Map, Value};
use tokio_postgres::Statement;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::outcome::{DbFailure, Rows};
use super::pg_tls::{self, SslMode};
use hangar_config::PostgresConfig;
use hangar_core::call::CancelToken;

type BoxError = Box<dyn StdError + Sync + Send>;

/// After a read-only statement, in one message: the session user, role and
/// every setting as the session was opened (`set_config(..., false)`
/// outlives the statement's transaction), its cursors closed, its `LISTEN`s undone (allowed in a
/// read-only transaction, and kept when it commits) and its advisory locks
/// dropped (session locks are not transactional). Temporary tables and
/// sequence values cannot be made in a read-only transaction.
const READ_ONLY_RESET: &str = "SET SESSION AUTHORIZATION DEFAULT; RESET ALL; CLOSE ALL; \
     UNLISTEN *; SELECT pg_advisory_unlock_all()";
/// After a writer's statement: the session back as it was opened (its
/// settings, role, cursors, listeners, locks, temp tables).
const READ_WRITE_END: &str = "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; \
     UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES";

/// A pool for read-only tools and one for writers; the read-only one's
/// sessions also default to read-only transactions.
pub struct Postgres {
    read_only: Pool,
    read_write: Pool,
    /// For cancel requests, which open a connection of their own.
    tls: MakeRustlsConnect,
}

impl Postgres {
    /// Connections lent out and calls waiting for one, over both pools.
    pub fn pool_use(&self) -> (u64, u64) {
        [&self.read_only, &self.read_write]
            .iter()
            .map(|p| p.status())
            .fold((0, 0), |(used, waiting), s| {
                (
                    used + s.size.saturating_sub(s.available) as u64,
                    waiting + s.waiting as u64,
                )
            })
    }

    /// Builds the pools; nothing connects until the first call.
    pub fn new(cfg: &PostgresConfig, url: &str) -> Result<Postgres, String> {
        let url = pg_tls::split_url(url);
        let mode = match cfg.sslmode.as_deref().or(url.sslmode.as_deref()) {
            Some(mode) => SslMode::parse(mode)?,
            None => SslMode::Prefer,
        };
        let ca_file = pg_tls::ca_file(cfg.ca_file.as_deref(), url.sslrootcert.as_deref());
        let tls = pg_tls::connector(mode, ca_file.as_deref())?;
        let pool = |read_only: bool| -> Result<Pool, String> {
            let mut pg: tokio_postgres::Config = url
                .rest
                .parse()
                .map_err(|e| format!("invalid postgres url: {e}"))?;
            pg.ssl_mode(mode.negotiation());
            let mut options = pg.get_options().unwrap_or_default().to_string();
            options.push_str(&format!(
                " -c statement_timeout={}",
                cfg.statement_timeout_ms
            ));
            if read_only {
                options.push_str(" -c default_transaction_read_only=on");
            }
            pg.options(options.trim());
            let wait = Duration::from_millis(cfg.wait_timeout_ms);
            pg.connect_timeout(wait);
            let manager = Manager::from_config(
                pg,
                tls.clone(),
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(cfg.pool_size.max(1))
                .wait_timeout(Some(wait))
                .create_timeout(Some(wait))
                .recycle_timeout(Some(wait))
                .runtime(Runtime::Tokio1)
                .build()
                .map_err(|e| format!("cannot build the pool: {e}"))
        };
        Ok(Postgres {
            read_only: pool(true)?,
            read_write: pool(false)?,
            tls,
        })
    }

    /// Runs one prepared statement, reading at most `max_rows` rows. A call
    /// cancelled (or abandoned) while its statement runs has the statement
    /// cancelled and its connection closed, never handed to another caller.
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
        let work = async {
            let client = pool
                .get()
                .await
                .map_err(|e| DbFailure::Unavailable(pool_message(&e)))?;
            let stmt = client.prepare_cached(sql).await.map_err(query_error)?;
            let running = Running {
                client: Some(client),
                tls: self.tls.clone(),
            };
            let client = running.client.as_deref().expect("set above");
            // Each future sends its request when first polled, so they go
            // out in this order, together; the answers come back in order.
            let rows = if read_only {
                let (rows, ended) = futures::join!(
                    read_rows(client, &stmt, params, blobs, max_rows),
                    client.batch_execute(READ_ONLY_RESET),
                );
                rows.and_then(|rows| ended.map(|_| rows).map_err(query_error))
            } else {
                let (rows, ended) = futures::join!(
                    read_rows(client, &stmt, params, blobs, max_rows),
                    client.batch_execute(READ_WRITE_END),
                );
                rows.and_then(|rows| ended.map(|_| rows).map_err(query_error))
            };
            running.finish();
            rows
        };
        tokio::select! {
            rows = work => rows,
            _ = cancel.cancelled() => Err(DbFailure::Cancelled),
        }
    }
}

/// How long an abandoned connection gets to fall idle after a cancel
/// request before the request is sent again.
const CANCEL_RETRY: Duration = Duration::from_millis(500);
/// Cancel requests sent for one abandoned statement before its connection
/// is closed anyway.
const CANCEL_TRIES: u32 = 20;
/// How long one cancel request may take (its own connection, TLS and the
/// request). A server that takes the connection and never answers would
/// otherwise hold the retries up for good, and with them the abandoned
/// connection, while the statement runs on.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection whose statement may still run. Dropped before
/// [`Running::finish`] — the call was cancelled or its caller went away —
/// it leaves the pool for good: its statement is cancelled and the
/// connection closed, so the cancel request cannot hit a later caller's
/// statement on it.
///
/// One cancel request is not enough. The statement goes out pipelined
/// behind `BEGIN`, and a server clears a pending cancel when it starts
/// its next message, so a cancel that lands before the statement has begun
/// is lost, and closing the socket does not stop a statement that never
/// writes (`pg_sleep`). So the cancel is repeated until an empty query
/// sent behind the statement comes back, which proves the session idle.
struct Running {
    client: Option<Object>,
    tls: MakeRustlsConnect,
}

impl Running {
    /// The statement is done: the connection goes back to the pool.
    fn finish(mut self) {
        self.client.take();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let token = client.cancel_token();
        let client = Object::take(client);
        let tls = self.tls.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for _ in 0..CANCEL_TRIES {
                    let _ =
                        tokio::time::timeout(CANCEL_TIMEOUT, token.cancel_query(tls.clone())).await;
                    if tokio::time::timeout(CANCEL_RETRY, client.simple_query(""))
                        .await
                        .is_ok()
                    {
                        break;
                    }
                }
                drop(client);
            });
        }
    }
}

/// The rows of one execution of `stmt`, at most `max_rows`.
async fn read_rows(
    client: &tokio_postgres::Client,
    stmt: &Statement,
    params: &[Value],
    blobs: &[Option<bytes::Bytes>],
    max_rows: usize,
) -> Result<Rows, DbFailure> {
    let params = params.iter().enumerate().map(|(index, value)| PgParam {
        index,
        value,
        blob: blobs.get(index).and_then(Option::as_deref),
    });
    let stream = client.query_raw(stmt, params).await.map_err(query_error)?;
    let columns: Vec<String> = stmt
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let mut stream = std::pin::pin!(stream);
    let mut rows = Vec::new();
    let mut truncated = false;
    while let Some(row) = stream.next().await {
        let row = row.map_err(query_error)?;
        if rows.len() == max_rows {
            truncated = true;
            break;
        }
        let mut obj = Map::with_capacity(columns.len());
        for (i, name) in columns.iter().enumerate() {
            let Cell(value) = row
                .try_get(i)
                .map_err(|e| DbFailure::Query(format!("column {name}: {e}")))?;
            obj.insert(name.clone(), value);
        }
        rows.push(Value::Object(obj));
    }
    Ok(Rows { rows, truncated })
}

fn pool_message(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Timeout(_) => {
            "database unavailable: timed out waiting for a connection".into()
        }
        deadpool_postgres::PoolError::Backend(e) => {
            format!("database unavailable: {}", error_text(e))
        }
        other => format!("database unavailable: {other}"),
    }
}

fn query_error(e: tokio_postgres::Error) -> DbFailure {
    if let Some(bind) = e.source().and_then(|s| s.downcast_ref::<BindError>()) {
        return DbFailure::Invalid {
            index: bind.index,
            why: bind.why.clone(),
        };
    }
    if e.is_closed()
        || e.as_db_error().is_none() && e.source().is_some_and(|s| s.is::<std::io::Error>())
    {
        return DbFailure::Unavailable(format!("database unavailable: {}", error_text(&e)));
    }
    DbFailure::Query(error_text(&e))
}

/// The database's own message (with its SQLSTATE), or the client's.
fn error_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => match e.source() {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// A JSON argument bound as whatever type Postgres expects for its
/// parameter (`index` counts from 0).
#[derive(Debug)]
struct PgParam<'a> {
    index: usize,
    value: &'a Value,
    /// An upload's bytes, bound as they are (a `bytea`).
    blob: Option<&'a [u8]>,
}

/// Why argument `index` could not be bound: the caller's mistake, told at
/// the validate stage.
#[derive(Debug)]
struct BindError {
    index: usize,
    why: String,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl StdError for BindError {}

impl ToSql for PgParam<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        if let Some(bytes) = self.blob {
            return bytes.to_sql(ty, out);
        }
        bind(self.value, ty, out).map_err(|e| {
            Box::new(BindError {
                index: self.index,
                why: format!("cannot be bound as {}: {e}", ty.name()),
            }) as BoxError
        })
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// An array's element: bound as the element type; its errors are the array's.
#[derive(Debug)]
struct Element<'a>(&'a Value);

impl ToSql for Element<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        bind(self.0, ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn bind(v: &Value, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    if v.is_null() {
        return Ok(IsNull::Yes);
    }
    if let Kind::Array(_) = ty.kind() {
        let items: Vec<Element> = v
            .as_array()
            .ok_or("expected an array")?
            .iter()
            .map(Element)
            .collect();
        return items.to_sql(ty, out);
    }
    match *ty {
        Type::BOOL => v.as_bool().ok_or("expected a boolean")?.to_sql(ty, out),
        Type::INT2 => i16::try_from(int(v)?)?.to_sql(ty, out),
        Type::INT4 => i32::try_from(int(v)?)?.to_sql(ty, out),
        Type::INT8 => int(v)?.to_sql(ty, out),
        Type::OID => u32::try_from(int(v)?)?.to_sql(ty, out),
        Type::FLOAT4 => (float(v)? as f32).to_sql(ty, out),
        Type::FLOAT8 => float(v)?.to_sql(ty, out),
        Type::NUMERIC => {
            super::pg_numeric::encode(&number_text(v)?, out)?;
            Ok(IsNull::No)
        }
        Type::JSON | Type::JSONB => v.to_sql(ty, out),
        Type::UUID => uuid::Uuid::parse_str(text(v)?)?.to_sql(ty, out),
        Type::TIMESTAMPTZ => DateTime::parse_from_rfc3339(text(v)?)?
            .with_timezone(&Utc)
            .to_sql(ty, out),
        Type::TIMESTAMP => text(v)?.parse::<NaiveDateTime>()?.to_sql(ty, out),
        Type::DATE => text(v)?.parse::<NaiveDate>()?.to_sql(ty, out),
        Type::TIME => text(v)?.parse::<NaiveTime>()?.to_sql(ty, out),
        Type::BYTEA => B64.decode(text(v)?)?.to_sql(ty, out),
        // Text-like and unknown types take the value's text.
        _ => match v {
            Value::String(s) => s.as_str().to_sql(&Type::TEXT, out),
            other => other.to_string().as_str().to_sql(&Type::TEXT, out),
        },
    }
}

fn int(v: &Value) -> Result<i64, BoxError> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| "expected an integer".into()),
        Value::String(s) => Ok(s.trim().parse()?),
        _ => Err("expected an integer".into()),
    }
}

fn float(v: &Value) -> Result<f64, BoxError> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| "expected a number".into()),
        Value::String(s) => Ok(s.trim().parse()?),
        _ => Err("expected a number".into()),
    }
}

fn number_text(v: &Value) -> Result<String, BoxError> {
    match v {
        Value::Number(n) => Ok(n.to_string()),
        Value::String(s) => Ok(s.clone()),
        _ => Err("expected a number or a decimal string".into()),
    }
}

fn text(v: &Value) -> Result<&str, BoxError> {
    v.as_str().ok_or_else(|| "expected a string".into())
}

/// One result cell as JSON, faithful to its Postgres type.
struct Cell(Value);

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, BoxError> {
        if let Kind::Array(_) = ty.kind() {
            let items = Vec::<Cell>::from_sql(ty, raw)?;
            return Ok(Cell(Value::Array(items.into_iter().map(|c| c.0).collect())));
        }
        let v = match *ty {
            Type::BOOL => Value::from(bool::from_sql(ty, raw)?),
            Type::INT2 => Value::from(i16::from_sql(ty, raw)?),
            Type::INT4 => Value::from(i32::from_sql(ty, raw)?),
            Type::INT8 => Value::from(i64::from_sql(ty, raw)?),
            Type::OID => Value::from(u32::from_sql(ty, raw)?),
            Type::FLOAT4 => finite(f32::from_sql(ty, raw)? as f64),
            Type::FLOAT8 => finite(f64::from_sql(ty, raw)?),
            Type::NUMERIC => Value::String(super::pg_numeric::decode(raw)?),
            Type::JSON | Type::JSONB => Value::from_sql(ty, raw)?,
            Type::UUID => Value::String(uuid::Uuid::from_sql(ty, raw)?.to_string()),
            Type::TIMESTAMPTZ => Value::String(
                DateTime::<Utc>::from_sql(ty, raw)?
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            ),
            Type::TIMESTAMP => Value::String(
                NaiveDateTime::from_sql(ty, raw)?
                    .format("%Y-%m-%dT%H:%M:%S%.f")
                    .to_string(),
            ),
            Type::DATE => Value::String(NaiveDate::from_sql(ty, raw)?.to_string()),
            Type::TIME => Value::String(NaiveTime::from_sql(ty, raw)?.to_string()),
            Type::BYTEA => Value::String(B64.encode(<&[u8]>::from_sql(ty, raw)?)),
            _ => Value::String(String::from_utf8_lossy(raw).into_owned()),
        };
        Ok(Cell(v))
    }

    fn from_sql_null(_: &Type) -> Result<Cell, BoxError> {
        Ok(Cell(Value::Null))
    }

    fn accepts(ty: &Type) -> bool {
        match ty.kind() {
            Kind::Array(member) => Cell::accepts(member),
            // Text-like types arrive as UTF-8 in the binary format too.
            _ => {
                matches!(
                    *ty,
                    Type::BOOL
                        | Type::INT2
                        | Type::INT4
                        | Type::INT8
                        | Type::OID
                        | Type::FLOAT4
                        | Type::FLOAT8
                        | Type::NUMERIC
                        | Type::JSON
                        | Type::JSONB
                        | Type::UUID
                        | Type::TIMESTAMPTZ
                        | Type::TIMESTAMP
                        | Type::DATE
                        | Type::TIME
                        | Type::BYTEA
                        | Type::TEXT
                        | Type::VARCHAR
                        | Type::BPCHAR
                        | Type::NAME
                        | Type::UNKNOWN
                ) || matches!(ty.kind(), Kind::Enum(_))
                    || ty.name() == "citext"
            }
        }
    }
}

/// A float as JSON; NaN and infinities, which JSON lacks, as strings.
fn finite(f: f64) -> Value {
    if f.is_finite() {
        Value::from(f)
    } else {
        Value::String(f.to_string())
    }
}
