//! `AuthFailures`: how many failed authentications each client address may
//! make (`[server] auth_failures`), so key and token guessing is slow and
//! cheap. A client over its allowance is answered 429 *before* any auth
//! check runs — no auth component is instantiated, no issuer asked — until
//! the allowance refills. Successful checks cost nothing here.
//!
//! Counted per process (a replica counts its own clients), keyed by
//! [`client_key`] (an IPv6 client by its /64). Calls with no client address
//! (a meta-tool's inner call) are never counted or refused.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};

use hangar_config::RateLimit;
use hangar_core::call::{CallError, ErrorKind, Stage, client_key};

type Keyed =
    RateLimiter<IpAddr, governor::state::keyed::DefaultKeyedStateStore<IpAddr>, DefaultClock>;

/// Clients refused at once are remembered this many at most (the oldest
/// and least used go first).
const BLOCKED_CAPACITY: usize = 65_536;
/// Forget clients back at a full allowance, once in this many failures.
const RETAIN_EVERY: u32 = 1024;

/// Failed authentications per client, and the clients refused until a time.
pub struct AuthFailures {
    limit: RateLimit,
    counted: Keyed,
    /// Clients over their allowance, with when they may try again.
    blocked: quick_cache::sync::Cache<IpAddr, Instant>,
    failures: AtomicU32,
    /// Refusals counted, and callers refused unchecked, since start-up.
    failed_total: AtomicU64,
    throttled_total: AtomicU64,
}

impl AuthFailures {
    pub fn new(limit: RateLimit) -> AuthFailures {
        // The failure that spends the allowance blocks the client, so "10/m"
        // means ten refusals and then 429: the limiter holds one cell fewer
        // than the allowance, and the failure it cannot admit is the last.
        let period = Duration::from_secs(if limit.per_minute { 60 } else { 1 });
        let quota = Quota::with_period(period / limit.calls.get())
            .expect("a period of at least a microsecond")
            .allow_burst(NonZeroU32::new(limit.calls.get() - 1).unwrap_or(NonZeroU32::MIN));
        AuthFailures {
            limit,
            counted: RateLimiter::keyed(quota),
            blocked: quick_cache::sync::Cache::new(BLOCKED_CAPACITY),
            failures: AtomicU32::new(0),
            failed_total: AtomicU64::new(0),
            throttled_total: AtomicU64::new(0),
        }
    }

    /// Whether `client` may be checked now; otherwise how long until it may.
    pub fn admit(&self, client: Option<IpAddr>) -> Result<(), Duration> {
        let Some(key) = client.map(client_key) else {
            return Ok(());
        };
        match self.blocked.get(&key) {
            Some(until) => {
                let now = Instant::now();
                if now < until {
                    self.throttled_total.fetch_add(1, Ordering::Relaxed);
                    Err(until - now)
                } else {
                    // Kept: a client let out of a block is on probation
                    // (see `failed`).
                    Ok(())
                }
            }
            None => Ok(()),
        }
    }

    /// Refusals counted and callers refused unchecked, since start-up.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.failed_total.load(Ordering::Relaxed),
            self.throttled_total.load(Ordering::Relaxed),
        )
    }

    /// [`AuthFailures::admit`] as the error a call ends with (429 over REST).
    pub fn admit_call(&self, client: Option<IpAddr>) -> Result<(), CallError> {
        self.admit(client).map_err(|wait| self.refusal(wait))
    }

    /// The 429 a refused client gets.
    pub fn refusal(&self, wait: Duration) -> CallError {
        CallError {
            retry_after: Some(wait.max(Duration::from_secs(1))),
            ..CallError::new(
                Stage::Auth,
                ErrorKind::RateLimited,
                format!(
                    "too many failed authentications from this address (auth_failures = \"{}\"); try again later",
                    self.limit
                ),
            )
        }
    }

    /// A check refused `client`: counts it, and blocks the client once its
    /// allowance is spent.
    pub fn failed(&self, client: Option<IpAddr>) {
        let Some(key) = client.map(client_key) else {
            return;
        };
        self.failed_total.fetch_add(1, Ordering::Relaxed);
        if self.failures.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            self.counted.retain_recent();
            self.counted.shrink_to_fit();
        }
        let period = Duration::from_secs(if self.limit.per_minute { 60 } else { 1 });
        let refill = period / self.limit.calls.get();
        // A client whose block ended less than a period ago is on probation:
        // it was let out for one try per refill, and failing it blocks it
        // again (else the cell that refilled would let a second try through).
        let now = Instant::now();
        let on_probation = self
            .blocked
            .get(&key)
            .is_some_and(|until| now < until + period);
        let counted = if self.limit.calls.get() == 1 {
            // No cell to hold: every failure spends the allowance.
            Err(refill)
        } else {
            self.counted
                .check_key(&key)
                .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
        };
        let spent = match counted {
            Err(wait) => Some(wait.max(if on_probation { refill } else { Duration::ZERO })),
            Ok(()) if on_probation => Some(refill),
            Ok(()) => None,
        };
        if let Some(wait) = spent {
            tracing::warn!(target: "hangar::auth", client = %key, "too many failed authentications; refusing for {wait:?}");
            self.blocked.insert(key, now + wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failures(limit: &str) -> AuthFailures {
        AuthFailures::new(limit.parse().unwrap())
    }

    #[test]
    fn a_client_is_refused_once_its_failures_are_spent_and_others_are_not() {
        let f = failures("3/m");
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..3 {
            assert!(f.admit(Some(a)).is_ok(), "three failures are allowed");
            f.failed(Some(a));
        }
        let wait = f.admit(Some(a)).unwrap_err();
        assert!(
            wait > Duration::from_secs(10) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(f.admit(Some(b)).is_ok());
        let e = f.admit_call(Some(a)).unwrap_err();
        assert_eq!((e.kind, e.stage), (ErrorKind::RateLimited, Stage::Auth));
        assert!(e.retry_after.is_some());
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let f = failures("2/m");
        for low in 1..=2 {
            let ip: IpAddr = format!("2001:db8:0:1::{low}").parse().unwrap();
            f.failed(Some(ip));
        }
        let sibling: IpAddr = "2001:db8:0:1:ffff::9".parse().unwrap();
        assert!(f.admit(Some(sibling)).is_err());
        let elsewhere: IpAddr = "2001:db8:0:2::1".parse().unwrap();
        assert!(f.admit(Some(elsewhere)).is_ok());
    }

    #[test]
    fn calls_without_an_address_are_never_counted() {
        let f = failures("1/m");
        for _ in 0..5 {
            f.failed(None);
        }
        assert!(f.admit(None).is_ok());
    }

    #[test]
    fn the_block_lifts_when_the_allowance_refills() {
        for limit in ["1/s", "2/s"] {
            let f = failures(limit);
            let a: IpAddr = "192.0.2.1".parse().unwrap();
            f.failed(Some(a));
            f.failed(Some(a));
            assert!(f.admit(Some(a)).is_err(), "{limit}");
            std::thread::sleep(Duration::from_millis(1100));
            assert!(f.admit(Some(a)).is_ok(), "{limit}");
            // One try per refill: failing it blocks the client again.
            f.failed(Some(a));
            assert!(
                f.admit(Some(a)).is_err(),
                "{limit}: a second try after the refill"
            );
        }
    }
}
