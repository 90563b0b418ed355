//! Wall-clock time, for the few decisions Kafka ties to record timestamps
//! (retention by time). It never decides whether a write counts.
//!
//! `SystemTime::now` is safe in the simulator: madsim replaces the clock
//! the standard library reads, so simulated runs see simulated time.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
