//! `GuestLog`: what reaches the host log from one plugin's `host.log` calls
//! and stderr. A guest can call `log` a million times with megabyte
//! messages; the host log gets lines cut to [`LINE_MAX`] bytes at a rate
//! capped per plugin (`governor`), and a count of what was held back.
//!
//! As a [`Capability`] ([`HostLog`]): `hangar:plugin/host` (`log`,
//! `progress`). Each plugin keeps its `GuestLog`; each call a [`LogCall`],
//! which also writes a line to the call's events (the client's log
//! notifications) and a panic line to its stderr.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use wasmtime::component::{HasSelf, Linker};

use super::shape::{CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems};
use crate::bindings::tool::hangar::plugin::host;
use crate::stderr::StderrCapture;
use hangar_core::call::{EventSink, LogLevel};

/// The host-log capability (see the module doc).
pub struct HostLog;

impl Capability for HostLog {
    const IMPORTS: &'static [&'static str] = &[];
    type Load = ();
    type Plugin = Arc<GuestLog>;
    type Call = LogCall;

    fn load(_: &LoadSetup<'_>, _: &mut Problems) {}

    fn configure(_: &(), _: &PluginSetup<'_>, _: &mut Problems) -> Arc<GuestLog> {
        Arc::default()
    }

    fn per_call(log: &Arc<GuestLog>, call: &CallSetup<'_>) -> anyhow::Result<LogCall> {
        Ok(LogCall {
            log: log.clone(),
            plugin: call.plugin.clone(),
            events: call.events.clone(),
            stderr: call.stderr.clone(),
        })
    }

    fn next_call(state: &mut LogCall, call: &CallSetup<'_>) {
        state.events = call.events.clone();
        state.stderr = call.stderr.clone();
    }

    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut LogCall,
    ) -> anyhow::Result<()> {
        host::add_to_linker::<T, HasSelf<LogCall>>(linker, get)
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    }
}

/// One call's side of the host log.
pub struct LogCall {
    log: Arc<GuestLog>,
    plugin: Arc<str>,
    events: EventSink,
    stderr: StderrCapture,
}

impl LogCall {
    /// Writes a line of the call's guest to the host log (see [`GuestLog::line`]).
    pub fn line(&self, level: LogLevel, message: &str) {
        self.log.line(&self.plugin, level, message);
    }
}

impl host::Host for LogCall {
    fn log(&mut self, level: host::LogLevel, message: String) {
        let level = LogLevel::from(level);
        // A slim guest has no stderr: its SDK's panic hook reports the panic
        // here, and it is kept where a WASI guest's panic would be written,
        // so the call's error names it the same way.
        if level == LogLevel::Error && message.starts_with("panicked at ") {
            self.stderr.write_line(&message);
            return;
        }
        self.log.line(&self.plugin, level, &message);
        self.events.log(level, &self.plugin, &message);
    }

    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.events.progress(progress, total, message);
    }
}

impl From<host::LogLevel> for LogLevel {
    fn from(l: host::LogLevel) -> LogLevel {
        use host::LogLevel as W;
        match l {
            W::Debug => LogLevel::Debug,
            W::Info => LogLevel::Info,
            W::Notice => LogLevel::Notice,
            W::Warning => LogLevel::Warning,
            W::Error => LogLevel::Error,
            W::Critical => LogLevel::Critical,
            W::Alert => LogLevel::Alert,
            W::Emergency => LogLevel::Emergency,
        }
    }
}

/// Longest guest line written to the host log, in bytes.
pub const LINE_MAX: usize = 1024;
/// Guest lines per second per plugin, after a burst of [`BURST`].
const LINES_PER_SECOND: u32 = 50;
const BURST: u32 = 200;

/// One plugin's share of the host log.
pub struct GuestLog {
    limiter: DefaultDirectRateLimiter,
    /// Lines held back since the last one written.
    suppressed: AtomicU64,
}

impl Default for GuestLog {
    fn default() -> Self {
        let quota = Quota::per_second(NonZeroU32::new(LINES_PER_SECOND).unwrap())
            .allow_burst(NonZeroU32::new(BURST).unwrap());
        GuestLog {
            limiter: RateLimiter::direct(quota),
            suppressed: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for GuestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestLog")
            .field("suppressed", &self.suppressed.load(Ordering::Relaxed))
            .finish()
    }
}

impl GuestLog {
    /// Writes one guest line to the host log, tagged with its plugin, unless
    /// the plugin is over its rate; then it is only counted.
    pub fn line(&self, plugin: &str, level: LogLevel, message: &str) {
        if self.limiter.check().is_err() {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let held_back = self.suppressed.swap(0, Ordering::Relaxed);
        if held_back > 0 {
            tracing::warn!(
                plugin,
                "{held_back} guest log lines suppressed (over {LINES_PER_SECOND} lines/s)"
            );
        }
        let message = clip(message);
        match level {
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info | LogLevel::Notice => tracing::info!(plugin, "{message}"),
            LogLevel::Warning => tracing::warn!(plugin, "{message}"),
            _ => tracing::error!(plugin, "{message}"),
        }
    }
}

/// `message` cut to `LINE_MAX` bytes (at a character boundary), saying how long it was.
fn clip(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= LINE_MAX {
        return message.into();
    }
    let mut end = LINE_MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &message[..end], message.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_clipped_at_a_char_boundary() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(LINE_MAX);
        let clipped = clip(&long);
        assert!(clipped.len() < LINE_MAX + 32);
        assert!(clipped.ends_with(&format!("… ({} bytes)", 2 * LINE_MAX)));
    }

    #[test]
    fn lines_past_the_burst_are_counted_not_written() {
        let log = GuestLog::default();
        for _ in 0..(BURST + 50) {
            log.line("p", LogLevel::Info, "x");
        }
        assert!(log.suppressed.load(Ordering::Relaxed) >= 49);
    }
}
