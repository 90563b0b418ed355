//! Wall-clock time, for the few decisions Kafka ties to record timestamps
//! (retention by time, commit timestamps). It never decides whether a
//! write counts: epochs and the volume do.
//!
//! `SystemTime::now` is safe in the simulator: madsim replaces the clock
//! the standard library reads, so simulated runs see simulated time. Each
//! broker reads it through its own [`WallClock`], which the simulator skews
//! and jumps per node (real clocks disagree and jump; madsim has one).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Milliseconds since the Unix epoch.
#[allow(clippy::disallowed_methods)] // the one reader of the wall clock
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The wall clock of one broker: the system clock plus an offset that is
/// zero in production.
#[derive(Clone, Debug, Default)]
pub struct WallClock(Arc<AtomicI64>);

impl WallClock {
    pub fn now_ms(&self) -> i64 {
        now_ms().saturating_add(self.0.load(Ordering::Relaxed))
    }

    /// Moves this clock by `ms` (negative: backwards), like an NTP step.
    pub fn jump(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(crate) fn offset_ms(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_moves_only_its_clock() {
        let a = WallClock::default();
        let b = a.clone();
        let other = WallClock::default();
        a.jump(-60_000);
        assert_eq!((b.offset_ms(), other.offset_ms()), (-60_000, 0));
        assert!(other.now_ms() - b.now_ms() >= 59_000);
    }
}
