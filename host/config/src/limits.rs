//! `[limits]`: what one guest call may use, and the partial overrides a
//! plugin or tool can set.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// What one guest call may use: the three run limits (fuel, deadline,
/// memory), how many calls may run at once, and how much a call may send
/// back (events and output).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wasm fuel: roughly one unit per instruction.
    pub fuel: u64,
    /// Wall-clock time, enforced by epoch interruption and, around every
    /// export call, by a timer (a guest blocked in a host call is stopped too).
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub deadline: Duration,
    /// Linear-memory cap in MiB.
    pub memory_mib: u64,
    /// Calls running at once: per plugin when set globally or on a plugin,
    /// per tool when set on a tool. 0: no cap but the instance pool.
    pub max_concurrent: u32,
    /// How long a call waits for a concurrency permit or an instance slot
    /// before it fails with `busy:`.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub queue_timeout: Duration,
    /// Log and progress notifications one call may send; later ones are
    /// dropped and counted in one final warning.
    pub max_events: u32,
    /// Bytes of log and progress messages one call may send.
    pub max_event_bytes: u64,
    /// Bytes of result (text, data, URIs, structured content) one call may return.
    pub max_output_bytes: u64,
    /// Content blocks one call may return.
    pub max_content_blocks: u32,
    /// Response body bytes one call may receive over outbound HTTP.
    pub max_http_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 1_000_000_000,
            deadline: Duration::from_secs(5),
            memory_mib: 64,
            max_concurrent: 0,
            queue_timeout: Duration::from_secs(1),
            max_events: 1000,
            max_event_bytes: 1 << 20,
            max_output_bytes: 8 << 20,
            max_content_blocks: 1000,
            max_http_bytes: 16 << 20,
        }
    }
}

impl Limits {
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mib as usize) << 20
    }

    /// These limits with any field set in `over` replacing ours.
    pub fn overridden_by(self, over: &LimitOverrides) -> Limits {
        Limits {
            fuel: over.fuel.unwrap_or(self.fuel),
            deadline: over.deadline.unwrap_or(self.deadline),
            memory_mib: over.memory_mib.unwrap_or(self.memory_mib),
            max_concurrent: over.max_concurrent.unwrap_or(self.max_concurrent),
            queue_timeout: over.queue_timeout.unwrap_or(self.queue_timeout),
            max_events: over.max_events.unwrap_or(self.max_events),
            max_event_bytes: over.max_event_bytes.unwrap_or(self.max_event_bytes),
            max_output_bytes: over.max_output_bytes.unwrap_or(self.max_output_bytes),
            max_content_blocks: over.max_content_blocks.unwrap_or(self.max_content_blocks),
            max_http_bytes: over.max_http_bytes.unwrap_or(self.max_http_bytes),
        }
    }
}

/// Overrides of `[limits]` for a plugin, tool, resource or prompt: each key
/// as in `[limits]`; those not set keep the value from above.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    pub fuel: Option<u64>,
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<super::schema::Humantime>")]
    pub deadline: Option<Duration>,
    pub memory_mib: Option<u64>,
    pub max_concurrent: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<super::schema::Humantime>")]
    pub queue_timeout: Option<Duration>,
    pub max_events: Option<u32>,
    pub max_event_bytes: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub max_content_blocks: Option<u32>,
    pub max_http_bytes: Option<u64>,
}
