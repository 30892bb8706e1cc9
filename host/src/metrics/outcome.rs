//! What one call hands the metrics when it ends: its outcome and its
//! stages' times. Their own file so the per-thread tallies read them
//! without naming the registry.

use hangar_core::call::Stage;

/// How one call ended, as the access line says it.
#[derive(Debug, Clone, Copy)]
pub struct CallOutcome<'a> {
    pub tool: &'a str,
    /// Where it ended (`handler` for a tool error, `-` when it succeeded).
    pub stage: &'static str,
    /// `ok`, `tool_error` or the error kind (`unauthorized`, `busy`, …).
    pub outcome: &'static str,
    /// Fuel its tool's guest burned.
    pub fuel: u64,
    /// Events (logs, progress) it lost to its budget or a full channel.
    pub dropped_events: u64,
    /// How long each stage it entered took.
    pub stages: StageTimes,
    /// Made by a code-mode program (`run`).
    pub in_program: bool,
}

/// How long each stage of one call took (`None`: the call did not get
/// there). Handed over once, when the call ends: one count per call, not
/// one per stage.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimes([Option<u64>; Stage::COUNT]);

impl StageTimes {
    /// Notes that `stage` took `nanos` nanoseconds.
    pub fn set(&mut self, stage: Stage, nanos: u64) {
        self.0[stage as usize] = Some(nanos);
    }

    /// The stages entered and their nanoseconds, in stage order.
    pub(super) fn entered(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.map(|n| (i, n)))
    }
}
