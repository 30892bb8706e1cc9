//! Running guest code under its limits, and naming the one that stopped it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, Trap, UpdateDeadline};

use super::guest_state::GuestState;
use super::lane::TurnKey;
use super::sched::Scheduler;
use hangar_config::Limits;
use hangar_core::call::{CallError, CancelToken, ErrorKind, Stage};

/// How long past its deadline a guest call may take before the timer around
/// it gives up on it (a running guest is stopped by the epoch tick first; a
/// guest waiting for its lane turn or blocked in a host call, by the timer).
pub const GRACE: Duration = Duration::from_millis(5);

/// Arms a store with fuel, the memory cap and a deadline that also honours
/// cancellation. At every epoch tick the guest yields to other tasks and
/// runs on only with CPU-lane permits for its next tick (see
/// [`super::sched`]): the ones it holds while no older call waits, free ones
/// at once, otherwise after waiting its turn.
pub fn arm(
    store: &mut Store<GuestState>,
    limits: &Limits,
    cancel: &CancelToken,
    sched: &Arc<Scheduler>,
) {
    store
        .set_fuel(limits.fuel)
        .expect("fuel is enabled on the engine");
    store.limiter(|s| &mut s.memory);
    // Set when the store's state was readied for this call, a moment ago
    // (`GuestState::new` / `reset_for_call`), so its capabilities know it too.
    let deadline = store.data().deadline;
    let turn = store.data().turn.clone();
    let (sched, cancel) = (sched.clone(), cancel.clone());
    // Ticks this call's guest code has run into: what makes it long-running
    // is the CPU it took, not how long it waited for its turns (a call
    // counted long by its age would, under load, queue behind the long lane
    // for having waited — see `Scheduler::is_long`).
    let mut ran: u32 = 0;
    // The call's age for its CPU turns (see [`super::sched`]): when the
    // store was readied for it.
    let since = deadline.checked_sub(limits.deadline).unwrap_or(deadline);
    sched.starting();
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        let now = Instant::now();
        if cancel.is_cancelled() || now >= deadline {
            return Ok(UpdateDeadline::Interrupt);
        }
        ran = ran.saturating_add(1);
        let long = sched.is_long(ran);
        // Its first turn (it ran into one tick: most such calls are short)
        // before any later turn; then the older first. A long call asks with
        // the age of this tick: after every call already waiting, so it
        // never keeps the lane from them.
        let key = TurnKey {
            later: ran > 1,
            age: if long { now } else { since },
        };
        // While other calls are starting, a long call rests a tick (without
        // the CPU permit, with the long-running one) before asking again for
        // both, so the core it ran on is theirs half the time.
        if long && sched.calls_starting() {
            let rest = turn.rest_then_wait(&sched, key, deadline, cancel.clone());
            return Ok(UpdateDeadline::YieldCustom(1, Box::pin(rest)));
        }
        if turn.next_tick(&sched, long, key) {
            // tokio's own yield puts the task behind the others (wasmtime's
            // plain `Yield` wakes it at once, and measured here a guest
            // re-polled that way kept its worker from short calls).
            return Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ));
        }
        let wait = turn.wait(&sched, long, key, deadline, cancel.clone());
        Ok(UpdateDeadline::YieldCustom(1, Box::pin(wait)))
    });
}

/// Runs `guest` (an instantiation or an export call of the store armed with
/// `limits`) until it ends, its deadline plus [`GRACE`] passes, or the call
/// is cancelled — whatever the guest is doing, even blocked in a host call
/// that no epoch tick reaches. `deadline` is the store's (`GuestState::deadline`).
/// The guest counts as running for `sched`'s epoch ticker meanwhile.
pub async fn bounded<T>(
    sched: &Scheduler,
    deadline: Instant,
    limits: &Limits,
    cancel: &CancelToken,
    stage: Stage,
    guest: impl Future<Output = wasmtime::Result<T>>,
) -> Result<wasmtime::Result<T>, CallError> {
    let _ticked = sched.running();
    tokio::select! {
        biased;
        out = guest => Ok(out),
        _ = cancel.cancelled() => Err(CallError::cancelled(stage)),
        _ = tokio::time::sleep_until((deadline + GRACE).into()) => Err(deadline_exceeded(stage, limits)),
    }
}

fn deadline_exceeded(stage: Stage, limits: &Limits) -> CallError {
    CallError::new(
        stage,
        ErrorKind::Limit,
        format!("deadline of {} ms exceeded", limits.deadline.as_millis()),
    )
}

/// The outcome of a [`bounded`] guest call, with a failure classified.
pub fn settle<T>(
    out: Result<wasmtime::Result<T>, CallError>,
    store: &Store<GuestState>,
    stage: Stage,
    limits: &Limits,
    cancel: &CancelToken,
) -> Result<T, CallError> {
    match out {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(classify(e, store, stage, limits, cancel)),
        Err(e) => Err(e),
    }
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
        Some(Trap::Interrupt) => deadline_exceeded(stage, limits),
        Some(Trap::StackOverflow) => {
            CallError::new(stage, ErrorKind::Failed, "guest trapped: stack overflow")
        }
        Some(trap) => {
            let message = match panic_message(&store.data().stderr.contents().0) {
                Some(panic) => format!("guest panicked: {panic}"),
                None => format!("guest trapped: {trap}"),
            };
            CallError::new(stage, ErrorKind::Failed, message)
        }
        // A host function refused the guest (e.g. a WASI cap): the cause is the
        // innermost error; the outer ones only say where in the guest it was.
        None => CallError::new(
            stage,
            ErrorKind::Failed,
            format!("guest failed: {}", err.root_cause()),
        ),
    }
}

/// The message of a Rust panic, from what the guest wrote to stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines();
    lines.find(|l| l.contains("panicked at"))?;
    let message = lines.next()?.trim();
    (!message.is_empty()).then(|| message.to_string())
}

/// Logs what a guest wrote to stderr, tagged with its plugin (rate-limited
/// with its log lines), and how much of it was not kept.
pub fn log_stderr(store: &Store<GuestState>) {
    let state = store.data();
    let (text, dropped) = state.stderr.contents();
    let plugin = &state.plugin;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        state.caps.log.line(
            hangar_core::call::LogLevel::Warning,
            &format!("guest stderr: {line}"),
        );
    }
    if dropped > 0 {
        tracing::warn!(plugin = %plugin, "guest stderr: {dropped} bytes dropped (the last {} KiB are kept)", super::stderr::CAPTURE >> 10);
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
