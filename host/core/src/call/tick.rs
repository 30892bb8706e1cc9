//! [`Tick`]: a reading of the monotonic clock as plain nanoseconds.
//!
//! A call reads the clock at every stage boundary when metrics or traces
//! are on (six times for an echo call), and turns each pair of readings
//! into a stage time and span times. With `std::time::Instant` each of
//! those differences is a `Duration` built by checked, normalising
//! arithmetic on seconds and nanoseconds; measured with callgrind, that
//! was ~640 instructions per echo call, more than the clock reads
//! themselves. A `Tick` is read with the same `clock_gettime` call and
//! subtracts as one integer.

/// Nanoseconds on the monotonic clock (`CLOCK_MONOTONIC`), from an
/// unspecified start: only differences between two ticks mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(u64);

impl Tick {
    /// Reads the clock.
    pub fn now() -> Tick {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write into, and
        // CLOCK_MONOTONIC exists on every system Hangar runs on; on the
        // (impossible) failure `ts` stays zero, which only makes a time 0.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Tick((ts.tv_sec as u64).wrapping_mul(1_000_000_000) + ts.tv_nsec as u64)
    }

    /// Nanoseconds from `earlier` to this tick (0 if `earlier` is later).
    pub fn since(self, earlier: Tick) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn ticks_measure_what_instant_measures() {
        let (t0, i0) = (Tick::now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (i1, t1) = (Instant::now(), Tick::now());
        let ticked = t1.since(t0);
        let timed = i1.duration_since(i0).as_nanos() as u64;
        assert!(ticked >= 20_000_000, "{ticked}");
        // The tick pair brackets the instant pair, so it reads a little more.
        assert!(
            ticked >= timed && ticked - timed < 5_000_000,
            "{ticked} vs {timed}"
        );
        assert_eq!(t0.since(t1), 0);
    }
}
