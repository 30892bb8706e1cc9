//! Watching one call go through the stages: [`StageClock`] notes when each
//! stage starts and ends (stage latency for [`Metrics`]), and [`ended`]
//! counts the call once it is over. The clock rides in the
//! [`CallContext`](super::CallContext) because [`super::proceed`], which
//! every stage passes, sees only the context.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{CallContext, CallError, ErrorKind, Stage, ToolResult, access};
use crate::metrics::{CallOutcome, Metrics, UNKNOWN_TOOL};

/// The running stage of one call and when it began; inert (and free) in a
/// context that no [`super::Pipeline::call`] started.
#[derive(Clone, Default)]
pub struct StageClock(Option<Arc<Mutex<Clock>>>);

struct Clock {
    metrics: Arc<Metrics>,
    current: Option<(Stage, Instant)>,
}

impl std::fmt::Debug for StageClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StageClock")
    }
}

impl StageClock {
    /// A clock for a call that starts now, in its resolve stage.
    pub(super) fn start(metrics: &Arc<Metrics>) -> StageClock {
        StageClock(Some(Arc::new(Mutex::new(Clock {
            metrics: metrics.clone(),
            current: Some((Stage::Resolve, Instant::now())),
        }))))
    }

    /// Ends the running stage and starts `next`.
    pub(super) fn enter(&self, next: Stage) {
        if let Some(clock) = &self.0 {
            let mut clock = clock.lock().unwrap();
            let now = Instant::now();
            clock.stop(now);
            clock.current = Some((next, now));
        }
    }

    /// Ends the running stage: the call is over.
    pub(super) fn finish(&self) {
        if let Some(clock) = &self.0 {
            clock.lock().unwrap().stop(Instant::now());
        }
    }
}

impl Clock {
    fn stop(&mut self, now: Instant) {
        if let Some((stage, since)) = self.current.take() {
            self.metrics
                .stage_took(stage.as_str(), now.duration_since(since));
        }
    }
}

/// Counts a finished call of `tool` that burned `fuel`.
pub(super) fn ended(
    metrics: &Metrics,
    tool: &str,
    cx: &CallContext,
    outcome: &Result<ToolResult, CallError>,
    fuel: u64,
) {
    let (result, stage) = access::outcome(outcome);
    let unknown = matches!(outcome, Err(e) if e.kind == ErrorKind::NotFound);
    metrics.call_ended(CallOutcome {
        tool: if unknown { UNKNOWN_TOOL } else { tool },
        stage,
        outcome: result,
        fuel,
        dropped_events: cx.events.dropped(),
    });
}
