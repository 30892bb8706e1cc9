//! Running guest code under the three limits, and naming the one that stopped it.

use std::time::Instant;

use wasmtime::{Store, Trap, UpdateDeadline};

use super::state::GuestState;
use crate::config::Limits;
use crate::pipeline::{CallError, CancelToken, ErrorKind, Stage};

/// Arms a fresh store with fuel, the memory cap and a deadline that also
/// honours cancellation. Between ticks the guest yields to other tasks, so a
/// runaway guest cannot starve the executor.
pub fn arm(store: &mut Store<GuestState>, limits: &Limits, cancel: &CancelToken) {
    store
        .set_fuel(limits.fuel)
        .expect("fuel is enabled on the engine");
    store.limiter(|s| &mut s.memory);
    let deadline = Instant::now() + limits.deadline;
    let cancel = cancel.clone();
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if cancel.is_cancelled() || Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

/// Turns a failed guest call into a `CallError` that names the cause.
pub fn classify(
    err: wasmtime::Error,
    store: &Store<GuestState>,
    stage: Stage,
    limits: &Limits,
    cancel: &CancelToken,
) -> CallError {
    let limit = |msg: String| CallError::new(stage, ErrorKind::Limit, msg);
    if store.data().memory.refused {
        return limit(format!(
            "memory limit of {} MiB exceeded",
            limits.memory_mib
        ));
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => limit(format!("fuel exhausted (limit {})", limits.fuel)),
        Some(Trap::Interrupt) if cancel.is_cancelled() => CallError::cancelled(stage),
        Some(Trap::Interrupt) => limit(format!(
            "deadline of {} ms exceeded",
            limits.deadline.as_millis()
        )),
        Some(Trap::StackOverflow) => {
            CallError::new(stage, ErrorKind::Failed, "guest trapped: stack overflow")
        }
        Some(trap) => {
            let message = match panic_message(&store.data().stderr_text()) {
                Some(panic) => format!("guest panicked: {panic}"),
                None => format!("guest trapped: {trap}"),
            };
            CallError::new(stage, ErrorKind::Failed, message)
        }
        None => CallError::new(stage, ErrorKind::Failed, format!("guest failed: {err}")),
    }
}

/// The message of a Rust panic, from what the guest wrote to stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines();
    lines.find(|l| l.contains("panicked at"))?;
    let message = lines.next()?.trim();
    (!message.is_empty()).then(|| message.to_string())
}

/// Logs what a guest wrote to stderr, tagged with its plugin.
pub fn log_stderr(plugin: &str, store: &Store<GuestState>) {
    let text = store.data().stderr_text();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        tracing::warn!(plugin, "guest stderr: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_the_line_after_panicked_at() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom"));
        assert_eq!(panic_message("nothing"), None);
    }
}
