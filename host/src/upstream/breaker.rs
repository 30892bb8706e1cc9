//! A circuit breaker per upstream: after `failures` outages in a row (no
//! connection, timeout, 5xx) calls fail fast for `cooldown`; then calls go
//! through again, and the first success closes it (one more failure opens
//! it again at once). It owns only counting; what counts is `super`'s.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Breaker {
    threshold: u32,
    cooldown: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    failures: u32,
    open_until: Option<Instant>,
}

/// What `/healthz` shows of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    /// Failing fast, or letting calls through to try again after a cool-down.
    Open,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Breaker {
        Breaker {
            threshold: threshold.max(1),
            cooldown,
            state: Mutex::default(),
        }
    }

    /// `Err(time left)` while open.
    pub fn admit(&self) -> Result<(), Duration> {
        let state = self.state.lock().expect("breaker lock");
        match state.open_until {
            Some(until) if until > Instant::now() => Err(until - Instant::now()),
            _ => Ok(()),
        }
    }

    pub fn success(&self) {
        *self.state.lock().expect("breaker lock") = State::default();
    }

    /// Counts an outage; returns whether this one opened the breaker.
    pub fn failure(&self) -> bool {
        let mut state = self.state.lock().expect("breaker lock");
        state.failures = state.failures.saturating_add(1);
        if state.failures >= self.threshold {
            let was_open = state.open_until.is_some_and(|u| u > Instant::now());
            state.open_until = Some(Instant::now() + self.cooldown);
            return !was_open;
        }
        false
    }

    pub fn state(&self) -> (BreakerState, u32) {
        let state = self.state.lock().expect("breaker lock");
        let open = state.failures >= self.threshold;
        let s = if open {
            BreakerState::Open
        } else {
            BreakerState::Closed
        };
        (s, state.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_and_closes_on_success() {
        let b = Breaker::new(2, Duration::from_secs(60));
        assert!(b.admit().is_ok());
        assert!(!b.failure());
        assert_eq!(b.state(), (BreakerState::Closed, 1));
        assert!(b.failure());
        assert!(b.admit().is_err());
        assert_eq!(b.state().0, BreakerState::Open);
        b.success();
        assert!(b.admit().is_ok());
        assert_eq!(b.state(), (BreakerState::Closed, 0));
    }

    #[test]
    fn after_the_cooldown_calls_go_through_and_one_failure_reopens() {
        let b = Breaker::new(1, Duration::ZERO);
        b.failure();
        assert!(b.admit().is_ok());
        assert_eq!(b.state().0, BreakerState::Open);
        b.failure();
        assert_eq!(b.state().0, BreakerState::Open);
    }
}
