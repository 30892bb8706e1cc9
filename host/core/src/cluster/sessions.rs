//! 2025-11-25 sessions in Redis: one hash per session, `<prefix>:session:<id>`,
//! whose TTL is the session timeout and is pushed back by every request
//! that finds it, on any replica.
//!
//! Fields: `version` (the negotiated protocol version; a hash without it is
//! no session), `owner` (the bearer token's subject, absent without one),
//! `elicitation`, `sampling` and `roots` (`1` when the client declared them),
//! `apps` (`1` when it declared it renders MCP Apps),
//! `level` (the log level it asked for), `counted` (the count sets below it
//! is in) and one `sub:<uri>` per resource subscription. Reading a session
//! is one round trip (`HGETALL` and `PEXPIRE`, pipelined).
//!
//! Bounded: a write that would add a field to a hash holding
//! [`FIXED_FIELDS`] + `max_subscriptions_per_session` fields adds none
//! (the caller bounds each URI's length and the owner is a verified
//! token's subject).
//!
//! Sessions per client across the cluster: each session's id is in one
//! sorted set per key it counts under (`<prefix>:clients:ip:<addr>`,
//! `<prefix>:clients:sub:<subject>`), scored by when it stops counting
//! (opened + session timeout). Creating a session drops the expired members,
//! refuses when a set holds `max_sessions_per_client`, and adds the id —
//! one script, so replicas racing cannot pass the cap together. Ending
//! one removes it. A session kept alive past its first timeout stops
//! counting here (it still counts on the replica holding it).
//!
//! On a Redis Cluster these keys carry the hash tag `{sessions}` after the
//! prefix (`<prefix>:{sessions}:session:<id>`), so the scripts that touch a
//! session and its count sets (and the one that reads the sets' names from
//! the session) find all of them in one slot. On one server the names stay
//! as they were, so replicas of two versions agree during an upgrade.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use super::{Cluster, Result};

/// What every replica knows of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRecord {
    pub version: String,
    pub owner: Option<String>,
    pub elicitation: bool,
    pub elicitation_url: bool,
    pub sampling: bool,
    pub roots: bool,
    pub apps: bool,
    /// The log level's name (`"debug"`, …), when the client set one.
    pub log_level: Option<String>,
    pub subscriptions: BTreeSet<String>,
}

const SUB: &str = "sub:";

/// Fields a session hash holds besides its subscriptions, at most.
pub const FIXED_FIELDS: usize = 9;

impl SessionRecord {
    fn fields(&self) -> Vec<(String, String)> {
        let flag = |b: bool| if b { "1" } else { "0" }.to_string();
        let mut out = vec![
            ("version".to_string(), self.version.clone()),
            ("elicitation".to_string(), flag(self.elicitation)),
            ("elicitation_url".to_string(), flag(self.elicitation_url)),
            ("sampling".to_string(), flag(self.sampling)),
            ("roots".to_string(), flag(self.roots)),
            ("apps".to_string(), flag(self.apps)),
        ];
        if let Some(owner) = &self.owner {
            out.push(("owner".into(), owner.clone()));
        }
        if let Some(level) = &self.log_level {
            out.push(("level".into(), level.clone()));
        }
        for uri in &self.subscriptions {
            out.push((format!("{SUB}{uri}"), "1".into()));
        }
        out
    }

    /// From `HGETALL`; `None` when the hash is no (whole) session.
    fn from_fields(mut fields: HashMap<String, String>) -> Option<SessionRecord> {
        let version = fields.remove("version")?;
        Some(SessionRecord {
            version,
            owner: fields.remove("owner"),
            elicitation: fields.get("elicitation").is_some_and(|v| v == "1"),
            elicitation_url: fields.get("elicitation_url").is_some_and(|v| v == "1"),
            sampling: fields.get("sampling").is_some_and(|v| v == "1"),
            roots: fields.get("roots").is_some_and(|v| v == "1"),
            apps: fields.get("apps").is_some_and(|v| v == "1"),
            log_level: fields.remove("level"),
            subscriptions: fields
                .keys()
                .filter_map(|k| k.strip_prefix(SUB))
                .map(str::to_string)
                .collect(),
        })
    }
}

fn millis(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

impl Cluster {
    /// `<prefix>:session:<id>`, or `<prefix>:{sessions}:session:<id>` on a
    /// Redis Cluster (see the module's doc).
    fn session_key(&self, id: &str) -> String {
        self.session_space(&format!("session:{id}"))
    }

    fn session_space(&self, part: &str) -> String {
        if self.link.is_cluster() {
            self.key(&format!("{{sessions}}:{part}"))
        } else {
            self.key(part)
        }
    }

    /// Stores a new session for `ttl`, counted under each of `counted`
    /// (see the module's doc); false (nothing stored) when one of them
    /// holds `max` sessions already.
    pub async fn session_create(
        &self,
        id: &str,
        record: &SessionRecord,
        ttl: Duration,
        counted: &[String],
        max: usize,
    ) -> Result<bool> {
        let script = redis::Script::new(
            r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, max = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 2, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= max then return 0 end
end
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
"#,
        );
        let sets: Vec<String> = counted
            .iter()
            .map(|k| self.session_space(&format!("clients:{k}")))
            .collect();
        let mut invocation = script.key(self.session_key(id));
        for set in &sets {
            invocation.key(set);
        }
        invocation.arg(id).arg(millis(ttl)).arg(max);
        for (field, value) in record.fields() {
            invocation.arg(field).arg(value);
        }
        invocation.arg("counted").arg(sets.join("\n"));
        let created: i64 = self.script(invocation).await?;
        Ok(created == 1)
    }

    /// The session `id`, its TTL pushed back to `ttl`; `None` when it
    /// expired or was deleted (on any replica).
    pub async fn session_load(&self, id: &str, ttl: Duration) -> Result<Option<SessionRecord>> {
        let key = self.session_key(id);
        // Pipelined, not a transaction: if the hash expires between the two,
        // the `PEXPIRE` finds nothing and the read said so already.
        let mut pipe = redis::pipe();
        pipe.hgetall(&key)
            .pexpire(&key, millis(ttl) as i64)
            .ignore();
        let (fields,): (HashMap<String, String>,) = self.pipe(pipe).await?;
        Ok(SessionRecord::from_fields(fields))
    }

    /// Sets (`Some`) or clears (`None`) one field of a live session; a
    /// session gone meanwhile stays gone, and a hash holding `max_fields`
    /// fields gains none. Whether the field was written.
    async fn session_field(
        &self,
        id: &str,
        field: &str,
        value: Option<&str>,
        max_fields: usize,
    ) -> Result<bool> {
        let key = self.session_key(id);
        let script = redis::Script::new(
            r#"
if redis.call('HEXISTS', KEYS[1], 'version') == 0 then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) return 1 end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
  and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"#,
        );
        let mut invocation = script.key(key);
        invocation
            .arg(field)
            .arg(if value.is_some() { "1" } else { "" })
            .arg(value.unwrap_or(""))
            .arg(max_fields);
        let written: i64 = self.script(invocation).await?;
        Ok(written == 1)
    }

    pub async fn session_set_level(&self, id: &str, level: &str) -> Result<()> {
        self.session_field(id, "level", Some(level), FIXED_FIELDS)
            .await
            .map(drop)
    }

    /// Subscribes (or not) session `id` to `uri`; false when the session is
    /// gone or holds `max` subscriptions already.
    pub async fn session_subscribe(
        &self,
        id: &str,
        uri: &str,
        on: bool,
        max: usize,
    ) -> Result<bool> {
        let field = format!("{SUB}{uri}");
        self.session_field(id, &field, on.then_some("1"), FIXED_FIELDS + max)
            .await
    }

    /// Ends the session for every replica (and its counting against its
    /// client's cap); whether it existed.
    pub async fn session_remove(&self, id: &str) -> Result<bool> {
        let script = redis::Script::new(
            r#"
local counted = redis.call('HGET', KEYS[1], 'counted')
local removed = redis.call('DEL', KEYS[1])
if counted then
  for set in string.gmatch(counted, '[^\n]+') do redis.call('ZREM', set, ARGV[1]) end
end
return removed
"#,
        );
        let mut invocation = script.key(self.session_key(id));
        invocation.arg(id);
        let removed: i64 = self.script(invocation).await?;
        Ok(removed > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_its_fields() {
        let record = SessionRecord {
            version: "2025-11-25".into(),
            owner: Some("alice".into()),
            elicitation: true,
            elicitation_url: true,
            sampling: false,
            roots: true,
            apps: true,
            log_level: Some("debug".into()),
            subscriptions: ["file:///a".to_string(), "sub:x".to_string()].into(),
        };
        let fields: HashMap<String, String> = record.fields().into_iter().collect();
        assert_eq!(SessionRecord::from_fields(fields), Some(record));
        // A hash without a version (a field written after expiry) is no session.
        let partial = HashMap::from([("level".to_string(), "info".to_string())]);
        assert_eq!(SessionRecord::from_fields(partial), None);
    }
}
