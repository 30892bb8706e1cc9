//! Per-caller rate limits of a tool: its own, its plugin's (shared by the
//! plugin's tools) and the server's (shared by every tool), each a keyed
//! `governor` limiter. A call must fit under every one that applies.
//!
//! With `[cluster]` the counters are in the replicas' shared Redis (the
//! same GCRA, one script per check), so a limit holds across replicas;
//! while Redis is unreachable each replica counts in-process again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};

use hangar_config::RateLimit;
use hangar_core::call::{CallContext, CallError};
use hangar_core::cluster::Cluster;

type Keyed =
    RateLimiter<String, governor::state::keyed::DefaultKeyedStateStore<String>, DefaultClock>;

/// One limit, keyed by caller.
pub struct Limiter {
    limit: RateLimit,
    /// What the limit is on, for the message: `tool x`, `plugin p`, `server`.
    scope: String,
    keyed: Keyed,
    checks: AtomicU32,
    /// Where the counters are shared (`[cluster]`); `None`: in-process only.
    shared: Option<Arc<Cluster>>,
}

/// Forget callers idle long enough to be back at a full allowance, this often.
const RETAIN_EVERY: u32 = 4096;

impl Limiter {
    pub fn new(limit: RateLimit, scope: String, shared: Option<&Arc<Cluster>>) -> Arc<Limiter> {
        let quota = if limit.per_minute {
            Quota::per_minute(limit.calls)
        } else {
            Quota::per_second(limit.calls)
        };
        Arc::new(Limiter {
            limit,
            scope,
            keyed: RateLimiter::keyed(quota),
            checks: AtomicU32::new(0),
            shared: shared.cloned(),
        })
    }

    /// Admits one call of `key`, or says how long until it would fit: in
    /// the shared Redis when there is one and it answers, else here.
    async fn check(&self, key: &str) -> Result<(), Duration> {
        if let Some(cluster) = &self.shared {
            let period = Duration::from_secs(if self.limit.per_minute { 60 } else { 1 });
            match cluster
                .rate_check(&self.scope, key, self.limit.calls.get(), period)
                .await
            {
                Ok(verdict) => return verdict,
                Err(e) => tracing::debug!("rate limit counted in-process: {e}"),
            }
        }
        self.check_here(key)
    }

    fn check_here(&self, key: &str) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            self.keyed.retain_recent();
            self.keyed.shrink_to_fit();
        }
        self.keyed
            .check_key(&key.to_string())
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

/// The limits a tool's calls count against.
#[derive(Default, Clone)]
pub struct RateLimits(Vec<Arc<Limiter>>);

impl RateLimits {
    pub fn new(limiters: impl IntoIterator<Item = Option<Arc<Limiter>>>) -> RateLimits {
        RateLimits(limiters.into_iter().flatten().collect())
    }

    /// Admits the call, or fails it with how long to wait.
    pub async fn admit(&self, cx: &CallContext) -> Result<(), CallError> {
        if self.0.is_empty() {
            return Ok(());
        }
        let key = caller_key(cx);
        for limiter in &self.0 {
            if let Err(wait) = limiter.check(&key).await {
                return Err(CallError::rate_limited(
                    format!(
                        "rate limit of {} on {} exceeded",
                        limiter.limit, limiter.scope
                    ),
                    wait,
                ));
            }
        }
        Ok(())
    }
}

/// Who the limit counts: the principal, or the client's address (without
/// its port; an IPv6 client by its /64) when the call is anonymous.
fn caller_key(cx: &CallContext) -> String {
    if let Some(p) = &cx.principal {
        return format!("sub:{}", p.subject);
    }
    match cx.request.as_ref().and_then(|r| r.client_addr) {
        Some(sock) => format!("ip:{}", hangar_core::call::client_key(sock.ip())),
        None => "anonymous".to_string(),
    }
}
