//! A finished span as the pipeline hands it to the tracer: ids, times,
//! what it stands for, and an error. It borrows its strings from the call
//! and lives only until it is encoded ([`super::encode`]), on the worker
//! that ran the call: a span costs the request path no allocation, and
//! nothing but bytes crosses to the exporter thread. A call span's name
//! and constant attributes come from the encoder.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, TraceId};

use hangar_core::call::{Stage, Tick};

/// What a span stands for.
#[derive(Debug, Clone, Copy)]
pub enum What<'a> {
    /// A `tools/call` Hangar answers (kind server).
    Call {
        tool: &'a str,
        session: Option<&'a str>,
        /// The stage a failed call failed in.
        failed_in: Option<&'static str>,
    },
    /// One stage of a call (kind internal), named for the stage.
    Stage(Stage),
}

/// The MCP method a call span stands for.
pub const CALL_METHOD: &str = "tools/call";

/// The span's parent: a span of this process, or one an incoming
/// `traceparent` named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    pub span_id: SpanId,
    pub remote: bool,
}

/// One finished span.
#[derive(Debug, Clone, Copy)]
pub struct SpanRecord<'a> {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<Parent>,
    pub what: What<'a>,
    /// Nanoseconds since the Unix epoch.
    pub start: u64,
    pub end: u64,
    /// Set when the span failed: its status is `Error` with this message,
    /// and its `error.type` attribute says the same.
    pub error: Option<&'static str>,
}

/// A span clock: wall time (what OTLP wants) read once per call, and the
/// monotonic ticks the pipeline reads at every stage boundary anyway
/// turned into wall time from it.
#[derive(Debug, Clone, Copy)]
pub struct SpanClock {
    wall: u64,
    at: Tick,
}

impl SpanClock {
    /// Reads the wall clock once; `at` is the same moment on the monotonic one.
    pub fn new(at: Tick) -> SpanClock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        SpanClock { wall, at }
    }

    /// Nanoseconds since the Unix epoch when the clock was made.
    pub fn start(&self) -> u64 {
        self.wall
    }

    /// Nanoseconds since the Unix epoch at `tick`.
    pub fn nanos(&self, tick: Tick) -> u64 {
        self.wall + tick.since(self.at)
    }
}
