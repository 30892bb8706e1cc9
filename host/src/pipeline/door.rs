//! `Door`: what stands in front of every auth check, so nothing costly
//! happens for a caller who has not proved who it is.
//!
//! - Failed checks count against the client's allowance
//!   ([`AuthFailures`]); a client over it is refused (429) before the auth
//!   component is even instantiated.
//! - An auth check's answer for *listings* (`tools/list`, `GET /tools`,
//!   `/openapi.json`, `/healthz`, a toolset's own check for its listings)
//!   is kept for [`LISTING_TTL`] per check and credential, so a client
//!   polling a listing runs the auth component once per few seconds, not
//!   once per request. The check is part of the key: one check's answer
//!   never opens the listings another check guards.
//!
//! One `Door` lives as long as the process (a reload keeps it).

use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::failures::AuthFailures;
use crate::catalog::AuthStage;
use hangar_config::RateLimit;
use hangar_core::call::{CallContext, CallError, ErrorKind, Principal, client_key};

/// How long a listing's answer from the server-wide check is kept.
pub const LISTING_TTL: Duration = Duration::from_secs(5);
/// Listing answers kept at most (least used go first).
const LISTING_CAPACITY: usize = 16_384;

/// Headers that never carry a credential and change from request to
/// request: left out of the key a listing's answer is kept under.
const NOT_CREDENTIALS: &[&str] = &[
    "accept",
    "accept-encoding",
    "accept-language",
    "baggage",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "origin",
    "referer",
    "traceparent",
    "tracestate",
    "user-agent",
];

pub struct Door {
    failures: AuthFailures,
    /// Auth components run.
    checks: AtomicU64,
    /// A check's answer by (check, toolset, client, credential headers).
    listings: quick_cache::sync::Cache<u64, (Instant, Option<Principal>)>,
    hasher: std::hash::RandomState,
}

impl Default for Door {
    fn default() -> Door {
        Door::new(hangar_config::ServerConfig::default().auth_failures)
    }
}

impl Door {
    pub fn new(auth_failures: RateLimit) -> Door {
        Door {
            failures: AuthFailures::new(auth_failures),
            checks: AtomicU64::new(0),
            listings: quick_cache::sync::Cache::new(LISTING_CAPACITY),
            hasher: std::hash::RandomState::new(),
        }
    }

    pub fn failures(&self) -> &AuthFailures {
        &self.failures
    }

    /// What `/metrics` shows of the door.
    pub fn counts(&self) -> crate::metrics::AuthCounts {
        let (failures, throttled) = self.failures.counts();
        crate::metrics::AuthCounts {
            checks: self.checks.load(Ordering::Relaxed),
            failures,
            throttled,
        }
    }

    /// Runs `auth` for the call `cx` carries: refused with 429 at once when
    /// the client is over its allowance; a refusal counts against it.
    pub async fn check(
        &self,
        auth: &AuthStage,
        what: &str,
        cx: &CallContext,
    ) -> Result<Principal, CallError> {
        self.checked(auth, what, cx, true).await
    }

    /// Who `auth` says calls, for a quota kept per caller before the call
    /// runs: a throttled client is not checked, and a refusal is not
    /// counted (the call that follows runs the check and counts it).
    pub async fn identify(
        &self,
        auth: &AuthStage,
        what: &str,
        cx: &CallContext,
    ) -> Option<Principal> {
        self.checked(auth, what, cx, false).await.ok()
    }

    async fn checked(
        &self,
        auth: &AuthStage,
        what: &str,
        cx: &CallContext,
        count: bool,
    ) -> Result<Principal, CallError> {
        let client = client_ip(cx);
        self.failures.admit_call(client)?;
        self.checks.fetch_add(1, Ordering::Relaxed);
        let outcome = auth
            .plugin
            .authenticate(what, &auth.policy, cx, &auth.limits)
            .await;
        if count
            && outcome
                .as_ref()
                .is_err_and(|e| e.kind == ErrorKind::Unauthorized)
        {
            self.failures.failed(client);
        }
        outcome
    }

    /// Who the server-wide check says is listing: its answer for the same
    /// client and credentials within [`LISTING_TTL`], else asked now. A
    /// client over its allowance lists as an anonymous caller, unasked.
    /// A refusal counts as a failed authentication only when the request
    /// carried a header that may be a credential: a plain client listing
    /// anonymously is not guessing.
    pub async fn lister(&self, auth: &AuthStage, cx: &CallContext) -> Option<Principal> {
        let (key, credentials) = self.listing_key(auth, cx);
        if let Some((at, principal)) = self.listings.get(&key)
            && at.elapsed() < LISTING_TTL
        {
            return principal;
        }
        let principal = self.checked(auth, "", cx, credentials).await.ok();
        self.listings
            .insert(key, (Instant::now(), principal.clone()));
        principal
    }

    /// The key of a listing's answer, and whether the request carried any
    /// header that may be a credential. The check is named by its component
    /// (its name and the instance loaded, so a reload's new component is a
    /// new key) and its policy; the toolset the listing goes through, too.
    fn listing_key(&self, auth: &AuthStage, cx: &CallContext) -> (u64, bool) {
        let mut h = self.hasher.build_hasher();
        let mut credentials = false;
        auth.plugin.name().hash(&mut h);
        (std::sync::Arc::as_ptr(&auth.plugin) as usize).hash(&mut h);
        auth.policy.hash(&mut h);
        cx.toolset.as_ref().map(|t| t.name()).hash(&mut h);
        client_ip(cx).map(client_key).hash(&mut h);
        if let Some(request) = &cx.request {
            for (name, value) in &request.headers {
                if !NOT_CREDENTIALS.contains(&name.as_str()) {
                    credentials = true;
                    name.as_str().hash(&mut h);
                    value.as_bytes().hash(&mut h);
                }
            }
        }
        (h.finish(), credentials)
    }
}

/// The address of the client that sent the call, if it came over HTTP.
fn client_ip(cx: &CallContext) -> Option<IpAddr> {
    cx.request
        .as_ref()
        .and_then(|r| r.client_addr)
        .map(|a| a.ip())
}
