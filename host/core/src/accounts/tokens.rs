//! `Tokens`: personal tokens, for clients that cannot do OAuth. An operator
//! makes one for a subject (`hangar token create`); the client sends it as
//! `Authorization: Bearer hgr_…` (or in the path of `/mcp/t/TOKEN`), and it
//! stands for that subject and its claims wherever a bearer token does.
//!
//! A token is 32 random bytes after the `hgr_` prefix. Only its SHA-256
//! digest is stored, in the kv store (so `hangar token` works beside a
//! running server, and a token made for one replica serves all of them): a
//! copied store holds no usable token. A plain digest, not a password hash,
//! because the secret is random and 256 bits long: nothing is left to guess
//! that a slow hash would slow down, and a slow hash would tax every
//! request. Each row carries its public `id` (for listing and revoking one)
//! and expires with the token.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::Digest as _;

use crate::call::Principal;
use crate::kv::KvStore;

/// The kv namespace of personal tokens (a host namespace).
const TOKENS: &str = "accounts/tokens";
/// What every personal token starts with: how the door tells one from an
/// OAuth access token without asking the store.
pub const PREFIX: &str = "hgr_";
/// Random bytes in a token.
const SECRET_BYTES: usize = 32;
/// The claim that names the token a principal came from.
pub const TOKEN_CLAIM: &str = "hangar_token";
/// Tokens `list` and `revoke` read at most.
const MAX_LISTED: usize = 100_000;

/// A token's row: who it stands for, never the token.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TokenRecord {
    /// Public: names the token in `hangar token list` and `revoke --id`.
    pub id: String,
    pub subject: String,
    /// Claims besides `sub`, as `--claim k=v` gave them.
    #[serde(default)]
    pub claims: Map<String, Value>,
    /// Unix seconds.
    pub created: u64,
    /// Unix seconds; none: it does not expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
}

impl TokenRecord {
    /// The principal it stands for: its claims, `sub` and the token's id.
    pub fn principal(&self) -> Principal {
        let mut claims = self.claims.clone();
        claims.insert("sub".into(), Value::String(self.subject.clone()));
        claims.insert(TOKEN_CLAIM.into(), Value::String(self.id.clone()));
        Principal::new(self.subject.clone(), Value::Object(claims))
    }
}

/// Why a personal token was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    /// Unknown, revoked or expired: the client's failure.
    Invalid,
    /// The store did not answer: nobody's failure.
    Unavailable(String),
}

/// The personal tokens of the kv store.
#[derive(Clone)]
pub struct Tokens {
    kv: Option<Arc<KvStore>>,
}

impl Tokens {
    /// Tokens kept in `kv`; none: no store, so no token is taken.
    pub fn new(kv: Option<Arc<KvStore>>) -> Tokens {
        Tokens { kv }
    }

    fn kv(&self) -> Result<&KvStore, String> {
        self.kv
            .as_deref()
            .ok_or_else(|| "the kv store is unavailable".to_string())
    }

    /// Whether `token` is a personal token (by its form alone).
    pub fn is_personal(token: &str) -> bool {
        token.starts_with(PREFIX)
    }

    /// Makes a token for `subject`: the token (shown once) and its row.
    pub async fn create(
        &self,
        subject: &str,
        claims: Map<String, Value>,
        lifetime: Option<Duration>,
    ) -> Result<(String, TokenRecord), String> {
        if subject.is_empty() {
            return Err("the subject is empty".into());
        }
        let token = format!("{PREFIX}{}", super::seal::random_token(SECRET_BYTES));
        let created = now();
        let record = TokenRecord {
            id: super::seal::random_token(9),
            subject: subject.to_string(),
            claims,
            created,
            expires: lifetime.map(|l| created.saturating_add(l.as_secs().max(1))),
        };
        let value = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        let ttl_ms = lifetime.map(|l| l.as_millis().max(1000) as u64);
        self.kv()?
            .host_set(TOKENS, &digest(&token), value, ttl_ms)
            .await
            .map_err(|e| e.to_string())?;
        Ok((token, record))
    }

    /// The principal `token` stands for.
    pub async fn principal(&self, token: &str) -> Result<Principal, TokenRefusal> {
        if !Tokens::is_personal(token) {
            return Err(TokenRefusal::Invalid);
        }
        let kv = self.kv().map_err(TokenRefusal::Unavailable)?;
        let row = kv
            .host_get(TOKENS, &digest(token))
            .await
            .map_err(|e| TokenRefusal::Unavailable(e.to_string()))?
            .ok_or(TokenRefusal::Invalid)?;
        let record: TokenRecord =
            serde_json::from_slice(&row).map_err(|_| TokenRefusal::Invalid)?;
        if record.expires.is_some_and(|e| now() >= e) {
            return Err(TokenRefusal::Invalid);
        }
        Ok(record.principal())
    }

    /// Every live token's row (by digest), oldest first.
    async fn rows(&self) -> Result<Vec<(String, TokenRecord)>, String> {
        let kv = self.kv()?;
        let keys = kv
            .host_keys(TOKENS, MAX_LISTED)
            .await
            .map_err(|e| e.to_string())?;
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(value) = kv.host_get(TOKENS, &key).await.map_err(|e| e.to_string())? else {
                continue;
            };
            if let Ok(record) = serde_json::from_slice::<TokenRecord>(&value) {
                rows.push((key, record));
            }
        }
        rows.sort_by(|a, b| (a.1.created, &a.1.id).cmp(&(b.1.created, &b.1.id)));
        Ok(rows)
    }

    /// Every live token, without secrets, oldest first.
    pub async fn list(&self) -> Result<Vec<TokenRecord>, String> {
        Ok(self.rows().await?.into_iter().map(|(_, r)| r).collect())
    }

    /// Revokes `subject`'s tokens (only the one named `id`, when given):
    /// the rows revoked.
    pub async fn revoke(
        &self,
        subject: &str,
        id: Option<&str>,
    ) -> Result<Vec<TokenRecord>, String> {
        let kv = self.kv()?;
        let mut revoked = Vec::new();
        for (key, record) in self.rows().await? {
            if record.subject == subject && id.is_none_or(|id| id == record.id) {
                kv.host_delete(TOKENS, &key)
                    .await
                    .map_err(|e| e.to_string())?;
                revoked.push(record);
            }
        }
        Ok(revoked)
    }
}

/// The row key of `token`: its SHA-256, hex.
fn digest(token: &str) -> String {
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `k=v` as a claim: `v` read as JSON when it is a number, `true`/`false`,
/// an array or an object; else a string.
pub fn claim(text: &str) -> Result<(String, Value), String> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("claim {text:?}: expected k=v"))?;
    let k = k.trim();
    if k.is_empty() || k == "sub" || k == TOKEN_CLAIM {
        return Err(format!(
            "claim {text:?}: the name cannot be empty, sub or {TOKEN_CLAIM}"
        ));
    }
    let value = match serde_json::from_str::<Value>(v) {
        Ok(value) if !value.is_string() && !value.is_null() => value,
        _ => Value::String(v.to_string()),
    };
    Ok((k.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn tokens() -> (Tokens, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("hangar-tokens-{}", uuid::Uuid::new_v4()));
        let (kv, problems) = crate::kv::open(&Default::default(), &dir, None).await;
        assert!(problems.is_empty(), "{problems:?}");
        (Tokens::new(kv), dir)
    }

    #[tokio::test]
    async fn a_token_stands_for_its_subject_until_revoked() {
        let (tokens, dir) = tokens().await;
        let claims = Map::from_iter([claim("org=acme").unwrap()]);
        let (token, record) = tokens.create("alice", claims, None).await.unwrap();
        assert!(token.starts_with(PREFIX) && token.len() > 40);
        let p = tokens.principal(&token).await.unwrap();
        assert_eq!(p.subject, "alice");
        assert_eq!(p.claims["org"], "acme");
        assert_eq!(p.claims[TOKEN_CLAIM], json!(record.id));
        // The store holds the digest, never the token.
        let listed = tokens.list().await.unwrap();
        assert_eq!(listed, vec![record.clone()]);
        let secret = &token[PREFIX.len()..];
        let raw = std::fs::read(dir.join("kv.sqlite3")).unwrap();
        assert!(!raw.windows(secret.len()).any(|w| w == secret.as_bytes()));
        // Another subject's revoke leaves it; its own takes it.
        assert!(tokens.revoke("bob", None).await.unwrap().is_empty());
        assert_eq!(tokens.revoke("alice", None).await.unwrap(), vec![record]);
        assert_eq!(
            tokens.principal(&token).await.err(),
            Some(TokenRefusal::Invalid)
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn revoking_by_id_leaves_the_subjects_other_tokens() {
        let (tokens, dir) = tokens().await;
        let (one, first) = tokens.create("alice", Map::new(), None).await.unwrap();
        let (two, _) = tokens.create("alice", Map::new(), None).await.unwrap();
        let revoked = tokens.revoke("alice", Some(&first.id)).await.unwrap();
        assert_eq!(revoked, vec![first]);
        assert!(tokens.principal(&one).await.is_err());
        assert_eq!(tokens.principal(&two).await.unwrap().subject, "alice");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn unknown_forged_and_expired_tokens_are_refused() {
        let (tokens, dir) = tokens().await;
        let (token, _) = tokens
            .create("alice", Map::new(), Some(Duration::from_secs(1)))
            .await
            .unwrap();
        assert!(tokens.principal(&token).await.is_ok());
        let forged = format!("{token}x");
        assert_eq!(
            tokens.principal(&forged).await.err(),
            Some(TokenRefusal::Invalid)
        );
        assert_eq!(
            tokens.principal("eyJhbGciOi").await.err(),
            Some(TokenRefusal::Invalid)
        );
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert_eq!(
            tokens.principal(&token).await.err(),
            Some(TokenRefusal::Invalid)
        );
        assert!(tokens.list().await.unwrap().is_empty());
        let none = Tokens::new(None);
        assert!(matches!(
            none.principal(&token).await,
            Err(TokenRefusal::Unavailable(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn claims_read_json_or_text() {
        assert_eq!(claim("org=acme").unwrap(), ("org".into(), json!("acme")));
        assert_eq!(claim("admin=true").unwrap(), ("admin".into(), json!(true)));
        assert_eq!(
            claim("roles=[\"a\"]").unwrap(),
            ("roles".into(), json!(["a"]))
        );
        assert_eq!(claim("n=a=b").unwrap(), ("n".into(), json!("a=b")));
        assert!(claim("noequals").is_err());
        assert!(claim("sub=bob").is_err());
        assert!(claim("=x").is_err());
    }
}
