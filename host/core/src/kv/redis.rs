//! The Redis kv backend: state shared by every Hangar process that points
//! at the same server and prefix.
//!
//! Layout, for plugin `P` (escaped so it holds no `:`, `{`, `}`) under the
//! configured prefix (default `hangar:kv`):
//! - `<prefix>:{P}:<key>` — a string per key, TTL set with `PX`, so Redis
//!   expires it;
//! - `<prefix>:{P}` — the plugin's index, a sorted set of its keys scored
//!   by expiry time in Unix milliseconds (`+inf`: none). It is what
//!   `max_keys` counts: a write that adds a key first drops the index
//!   entries already expired, then compares its size with `max_keys`.
//!
//! `set` and `increment` are Lua scripts, so the count, the write and the
//! index update are one atomic step even with many Hangar processes (the
//! `{P}` hash tag keeps a plugin's keys in one cluster slot). `delete`
//! removes the key and its index entry in one `MULTI`. A key written to
//! Redis by someone else is not in the index and does not count.
//!
//! The connection is a [`RedisLink`]: made on first use and retried on each
//! call until it succeeds; after that the connection manager reconnects by
//! itself. Every request is bounded by a response timeout, and the call by
//! its deadline. When kv lives in the cluster's Redis it speaks through the
//! cluster's link (and its timeouts), so the process holds one connection.

use std::sync::Arc;
use std::time::Duration;

use ::redis::{Script, Value};
use futures::future::BoxFuture;

use super::backend::{Backend, KvError, Result, message};
use crate::cluster::link::{Connection, RedisLink};

const TIMEOUT: Duration = Duration::from_secs(2);

/// `KEYS[1]` the key, `KEYS[2]` the index; `ARGV`: the plain key, the value,
/// the TTL in ms (0: none), `max_keys`. Answers `{0, 0}` or `{1, count}` (quota).
const SET: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  local count = redis.call('ZCARD', KEYS[2])
  if count >= tonumber(ARGV[4]) then return {1, count} end
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
end
return {0, 0}
"#;

/// `KEYS` as for `SET`; `ARGV`: the plain key, the delta, `max_keys`.
/// Answers `{0, new value}`, `{1, count}` (quota) or `{2, message}` (not an
/// integer, overflow). A new key gets no TTL; an existing one keeps its own.
const INCREMENT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local known = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not known then
  local count = redis.call('ZCARD', KEYS[2])
  if count >= tonumber(ARGV[3]) then return {1, count} end
end
local n = redis.pcall('INCRBY', KEYS[1], ARGV[2])
if type(n) == 'table' and n.err then return {2, n.err} end
if not known then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl > 0 then
    redis.call('ZADD', KEYS[2], now + pttl, ARGV[1])
  else
    redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
  end
end
return {0, n}
"#;

pub struct Redis {
    link: Arc<RedisLink>,
    prefix: String,
    set: Script,
    increment: Script,
}

impl Redis {
    /// Parses the URL; connects later.
    pub fn open(url: &str, prefix: &str) -> std::result::Result<Redis, String> {
        // The URL may hold a password: the error does not quote it.
        let link = RedisLink::open(url, TIMEOUT, TIMEOUT * 2)
            .map_err(|e| format!("url is not a Redis URL ({e:?})"))?;
        Ok(Redis::over(link, prefix))
    }

    /// Keys under `prefix`, through a connection already open (the
    /// cluster's, when kv lives in the same Redis).
    pub fn over(link: Arc<RedisLink>, prefix: &str) -> Redis {
        Redis {
            link,
            prefix: prefix.to_owned(),
            set: Script::new(SET),
            increment: Script::new(INCREMENT),
        }
    }

    /// Connects and sends `PING`: whether the server answers now.
    pub async fn ping(&self) -> std::result::Result<(), String> {
        let mut con = self.connection().await.map_err(|e| message(&e))?;
        let ping = ::redis::cmd("PING");
        let pong = ping.query_async::<String>(&mut con);
        match tokio::time::timeout(TIMEOUT, pong).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("redis at {}: {e}", self.link.addr())),
            Err(_) => Err(format!("redis at {}: no answer to PING", self.link.addr())),
        }
    }

    /// The shared connection, made on first use.
    async fn connection(&self) -> Result<Connection> {
        self.link.connection().await.map_err(KvError::Unavailable)
    }

    fn unavailable(&self, e: ::redis::RedisError) -> KvError {
        KvError::Unavailable(format!("redis at {}: {e}", self.link.addr()))
    }

    /// The plugin's part of the key space: `<prefix>:{<escaped plugin>}`.
    fn index(&self, ns: &str) -> String {
        let mut out = format!("{}:{{", self.prefix);
        for c in ns.chars() {
            match c {
                '%' => out.push_str("%25"),
                ':' => out.push_str("%3A"),
                '{' => out.push_str("%7B"),
                '}' => out.push_str("%7D"),
                c => out.push(c),
            }
        }
        out.push('}');
        out
    }

    fn key(&self, ns: &str, key: &str) -> String {
        format!("{}:{key}", self.index(ns))
    }

    /// Reads a script's `{code, x}` answer.
    fn answer(&self, v: Value) -> Result<i64> {
        let Value::Array(items) = v else {
            return Err(KvError::Unavailable(format!(
                "redis: unexpected answer {v:?}"
            )));
        };
        match items.as_slice() {
            [Value::Int(0), Value::Int(n)] => Ok(*n),
            [Value::Int(1), Value::Int(count)] => Err(KvError::Quota(format!(
                "the plugin holds {count} keys, the limit"
            ))),
            [Value::Int(2), msg] => Err(KvError::Invalid(match msg {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                other => format!("{other:?}"),
            })),
            other => Err(KvError::Unavailable(format!(
                "redis: unexpected answer {other:?}"
            ))),
        }
    }
}

impl Backend for Redis {
    fn get<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            let mut con = self.connection().await?;
            ::redis::cmd("GET")
                .arg(self.key(ns, key))
                .query_async::<Option<Vec<u8>>>(&mut con)
                .await
                .map_err(|e| self.unavailable(e))
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
        Box::pin(async move {
            let mut con = self.connection().await?;
            let answer = self
                .set
                .key(self.key(ns, key))
                .key(self.index(ns))
                .arg(key)
                .arg(value)
                .arg(ttl_ms.unwrap_or(0))
                .arg(max_keys)
                .invoke_async::<Value>(&mut con)
                .await
                .map_err(|e| self.unavailable(e))?;
            self.answer(answer).map(drop)
        })
    }

    fn delete<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut con = self.connection().await?;
            ::redis::pipe()
                .atomic()
                .del(self.key(ns, key))
                .ignore()
                .zrem(self.index(ns), key)
                .ignore()
                .query_async::<()>(&mut con)
                .await
                .map_err(|e| self.unavailable(e))
        })
    }

    fn take<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            let mut con = self.connection().await?;
            let (value,): (Option<Vec<u8>>,) = ::redis::pipe()
                .atomic()
                .cmd("GETDEL")
                .arg(self.key(ns, key))
                .zrem(self.index(ns), key)
                .ignore()
                .query_async(&mut con)
                .await
                .map_err(|e| self.unavailable(e))?;
            Ok(value)
        })
    }

    fn increment<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        delta: i64,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<i64>> {
        Box::pin(async move {
            let mut con = self.connection().await?;
            let answer = self
                .increment
                .key(self.key(ns, key))
                .key(self.index(ns))
                .arg(key)
                .arg(delta)
                .arg(max_keys)
                .invoke_async::<Value>(&mut con)
                .await
                .map_err(|e| self.unavailable(e))?;
            self.answer(answer)
        })
    }

    fn claim<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        value: Vec<u8>,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut con = self.connection().await?;
            // Not in the plugin's index: a claim is not one of its keys.
            let set: Option<String> = ::redis::cmd("SET")
                .arg(self.key(ns, key))
                .arg(value)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms.max(1))
                .query_async(&mut con)
                .await
                .map_err(|e| self.unavailable(e))?;
            Ok(set.is_some())
        })
    }

    fn keys<'a>(&'a self, ns: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            let mut con = self.connection().await?;
            // The index's scores are expiry times: those past now are gone.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            ::redis::cmd("ZRANGEBYSCORE")
                .arg(self.index(ns))
                .arg(format!("({now}"))
                .arg("+inf")
                .arg("LIMIT")
                .arg(0)
                .arg(limit)
                .query_async::<Vec<String>>(&mut con)
                .await
                .map_err(|e| self.unavailable(e))
        })
    }

    fn describe(&self) -> String {
        format!("redis at {}, keys under {}:", self.link.addr(), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_cannot_reach_into_each_other() {
        let r = Redis::open("redis://127.0.0.1:6379", "hangar:kv").unwrap();
        assert_eq!(r.key("echo", "n"), "hangar:kv:{echo}:n");
        // "a:b" + "c" and "a" + "b:c" must not name the same Redis key.
        assert_ne!(r.key("a:b", "c"), r.key("a", "b:c"));
        assert_eq!(r.index("a}:{b"), "hangar:kv:{a%7D%3A%7Bb}");
    }
}
