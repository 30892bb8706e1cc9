//! 2025-11-25 sessions in Redis: one hash per session, `<prefix>:session:<id>`,
//! whose TTL is the session timeout and is pushed back by every request
//! that finds it, on any replica.
//!
//! Fields: `version` (the negotiated protocol version; a hash without it is
//! no session), `owner` (the bearer token's subject, absent without one),
//! `elicitation`, `sampling` and `roots` (`1` when the client declared them),
//! `level` (the log level it asked for) and one `sub:<uri>` per resource
//! subscription. Reading a session is one round trip (`HGETALL` and
//! `PEXPIRE`, pipelined).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use super::{Cluster, Result};

/// What every replica knows of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRecord {
    pub version: String,
    pub owner: Option<String>,
    pub elicitation: bool,
    pub sampling: bool,
    pub roots: bool,
    /// The log level's name (`"debug"`, …), when the client set one.
    pub log_level: Option<String>,
    pub subscriptions: BTreeSet<String>,
}

const SUB: &str = "sub:";

impl SessionRecord {
    fn fields(&self) -> Vec<(String, String)> {
        let flag = |b: bool| if b { "1" } else { "0" }.to_string();
        let mut out = vec![
            ("version".to_string(), self.version.clone()),
            ("elicitation".to_string(), flag(self.elicitation)),
            ("sampling".to_string(), flag(self.sampling)),
            ("roots".to_string(), flag(self.roots)),
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
            sampling: fields.get("sampling").is_some_and(|v| v == "1"),
            roots: fields.get("roots").is_some_and(|v| v == "1"),
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
    fn session_key(&self, id: &str) -> String {
        self.key(&format!("session:{id}"))
    }

    /// Stores a new session for `ttl`.
    pub async fn session_create(
        &self,
        id: &str,
        record: &SessionRecord,
        ttl: Duration,
    ) -> Result<()> {
        let key = self.session_key(id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(&key)
            .ignore()
            .hset_multiple(&key, &record.fields())
            .ignore()
            .pexpire(&key, millis(ttl) as i64)
            .ignore();
        self.pipe(pipe).await
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
    /// session gone meanwhile stays gone.
    async fn session_field(&self, id: &str, field: &str, value: Option<&str>) -> Result<()> {
        let key = self.session_key(id);
        let script = redis::Script::new(
            r#"
if redis.call('HEXISTS', KEYS[1], 'version') == 0 then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1])
else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return 1
"#,
        );
        let mut invocation = script.key(key);
        invocation
            .arg(field)
            .arg(if value.is_some() { "1" } else { "" })
            .arg(value.unwrap_or(""));
        let _: i64 = self.script(invocation).await?;
        Ok(())
    }

    pub async fn session_set_level(&self, id: &str, level: &str) -> Result<()> {
        self.session_field(id, "level", Some(level)).await
    }

    pub async fn session_subscribe(&self, id: &str, uri: &str, on: bool) -> Result<()> {
        let field = format!("{SUB}{uri}");
        self.session_field(id, &field, on.then_some("1")).await
    }

    /// Ends the session for every replica; whether it existed.
    pub async fn session_remove(&self, id: &str) -> Result<bool> {
        let removed: i64 = self
            .query(redis::cmd("DEL").arg(self.session_key(id)).clone())
            .await?;
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
            sampling: false,
            roots: true,
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
