//! `Exchanger`: OAuth 2.0 Token Exchange (RFC 8693) of a caller's access
//! token for one scoped to an upstream server, so the upstream is called on
//! the caller's behalf and never with the caller's own token (the MCP
//! authorization spec forbids passing it through).
//!
//! Tokens are kept per subject token until shortly before they expire, so a
//! caller's calls exchange once per token lifetime; one exchange at a time
//! per subject token (concurrent first calls wait for it). The grant is
//! asked as the other grants of this module are: HTTP Basic client
//! authentication, the answer read under a size cap and a timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::Digest as _;

use super::locks::KeyedLocks;
use super::provider::{self, GrantError};

/// `grant_type` of RFC 8693.
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the subject token and of the token asked for.
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// An exchanged token is used again until this long before it expires.
const MARGIN: Duration = Duration::from_secs(30);
/// How long a token whose answer named no lifetime is used again.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(60);
/// Exchanged tokens kept at most (least used go first).
const KEPT: usize = 10_000;

/// Where and as whom to exchange, and for what.
#[derive(Debug, Clone)]
pub struct ExchangeSettings {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
    /// RFC 8693 `audience`: the upstream, as the authorization server names it.
    pub audience: Option<String>,
    /// RFC 8707 `resource`: the upstream's URL, when the server wants one.
    pub resource: Option<String>,
    pub scopes: Vec<String>,
}

/// Exchanges callers' access tokens for one upstream (see the module doc).
pub struct Exchanger {
    settings: ExchangeSettings,
    http: reqwest::Client,
    /// Exchanged tokens by digest of the subject token, with when to stop using them.
    kept: quick_cache::sync::Cache<String, (Arc<str>, Instant)>,
    /// One exchange at a time per subject token.
    running: KeyedLocks,
}

impl Exchanger {
    pub fn new(settings: ExchangeSettings, tls: rustls::ClientConfig) -> Exchanger {
        Exchanger {
            settings,
            http: crate::outbound::client(tls, Duration::from_secs(10)),
            kept: quick_cache::sync::Cache::new(KEPT),
            running: KeyedLocks::default(),
        }
    }

    /// A token for the upstream, acting for the holder of `subject_token`.
    /// The error is safe to show the caller (no token in it).
    pub async fn token(&self, subject_token: &str) -> Result<Arc<str>, String> {
        let key = hex::encode(sha2::Sha256::digest(subject_token.as_bytes()));
        if let Some(token) = self.fresh(&key) {
            return Ok(token);
        }
        let lock = self.running.get(&key);
        let outcome = async {
            let _one_at_a_time = lock.lock().await;
            // Another call may have exchanged it while this one waited.
            if let Some(token) = self.fresh(&key) {
                return Ok(token);
            }
            self.exchange(&key, subject_token).await
        }
        .await;
        self.running.forget(&key, lock);
        outcome
    }

    fn fresh(&self, key: &str) -> Option<Arc<str>> {
        let (token, until) = self.kept.get(key)?;
        (Instant::now() < until).then_some(token)
    }

    async fn exchange(&self, key: &str, subject_token: &str) -> Result<Arc<str>, String> {
        let s = &self.settings;
        let scope = s.scopes.join(" ");
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN),
            ("requested_token_type", ACCESS_TOKEN),
        ];
        if let Some(audience) = &s.audience {
            form.push(("audience", audience));
        }
        if let Some(resource) = &s.resource {
            form.push(("resource", resource));
        }
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        let granted = provider::grant_at(
            &self.http,
            &s.token_url,
            (&s.client_id, &s.client_secret),
            &form,
        )
        .await
        .map_err(|e| match e {
            GrantError::Refused(why) => format!("token exchange refused ({why})"),
            GrantError::Failed(why) => format!("token exchange failed: {why}"),
        })?;
        let lifetime = granted
            .expires_in
            .map_or(UNSTATED_LIFETIME, Duration::from_secs);
        let token: Arc<str> = granted.access_token.into();
        if let Some(until) = Instant::now().checked_add(lifetime.saturating_sub(MARGIN))
            && lifetime > MARGIN
        {
            self.kept.insert(key.to_string(), (token.clone(), until));
        }
        Ok(token)
    }
}
