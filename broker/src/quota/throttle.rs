//! Byte budgets: one token bucket per quota budget, on this broker (Kafka's
//! quotas are per broker too).
//!
//! A budget refills at its rate and holds at most [`BURST`] of it. A request
//! spends what it carries (a produce) or what it is sent (a fetch) even if
//! that takes the budget below zero; the debt, divided by the rate, is how
//! long the client is throttled (KIP-219: told in `throttle_time_ms`, and
//! its connection is not read from until then). So over any stretch of
//! time a budget passes at most its rate times that time, plus one burst,
//! plus one request per connection.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::doc::{Budget, Kind};

/// How much of its rate a budget may save up while idle.
pub const BURST: Duration = Duration::from_secs(1);
/// The longest one throttle lasts; a larger debt throttles the next
/// request as well.
pub const MAX_THROTTLE: Duration = Duration::from_secs(30);
/// A budget idle (and full) this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(120);

struct Bucket {
    /// Bytes that may pass now; negative: a debt.
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, rate: f64, now: Instant) {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() * rate;
        self.tokens = (self.tokens + gained).min(rate * BURST.as_secs_f64());
        self.at = now;
    }

    fn throttle(&self, rate: f64) -> Duration {
        if self.tokens >= 0.0 || rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(-self.tokens / rate).min(MAX_THROTTLE)
    }
}

#[derive(Default)]
pub struct Buckets {
    buckets: Mutex<BTreeMap<(Kind, Budget), Bucket>>,
}

impl Buckets {
    /// How long a request must wait before spending from `budget`: its
    /// debt, if any (a fetch of a client in debt is answered empty).
    pub fn debt(&self, kind: Kind, budget: &Budget, rate: u64, now: Instant) -> Duration {
        let mut buckets = self.lock();
        match buckets.get_mut(&(kind, budget.clone())) {
            Some(b) => {
                b.refill(rate as f64, now);
                b.throttle(rate as f64)
            }
            None => Duration::ZERO,
        }
    }

    /// Spends `bytes` from `budget`; the throttle the client owes.
    pub fn spend(
        &self,
        kind: Kind,
        budget: &Budget,
        rate: u64,
        bytes: usize,
        now: Instant,
    ) -> Duration {
        let rate = rate as f64;
        let mut buckets = self.lock();
        if buckets.len() > 1024 {
            buckets.retain(|_, b| now.saturating_duration_since(b.at) < FORGET_AFTER);
        }
        let b = buckets
            .entry((kind, budget.clone()))
            .or_insert_with(|| Bucket {
                tokens: rate * BURST.as_secs_f64(),
                at: now,
            });
        b.refill(rate, now);
        b.tokens -= bytes as f64;
        b.throttle(rate)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Kind, Budget), Bucket>> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            user: None,
            client_id: Some("app".into()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_the_debt_is_the_throttle() {
        let b = Buckets::default();
        let now = Instant::now();
        // 1,000 B/s: a second's worth passes at once.
        let d = b.spend(Kind::Produce, &budget(), 1000, 1000, now);
        assert_eq!(d, Duration::ZERO);
        let d = b.spend(Kind::Produce, &budget(), 1000, 500, now);
        assert_eq!(d, Duration::from_millis(500));
        assert_eq!(b.debt(Kind::Produce, &budget(), 1000, now), d);
        // Paid off after half a second; the other kind was never spent.
        let later = now + Duration::from_millis(500);
        assert_eq!(
            b.debt(Kind::Produce, &budget(), 1000, later),
            Duration::ZERO
        );
        assert_eq!(b.debt(Kind::Fetch, &budget(), 1000, now), Duration::ZERO);
        // A huge request throttles for at most MAX_THROTTLE at a time.
        let d = b.spend(Kind::Fetch, &budget(), 1000, 10_000_000, now);
        assert_eq!(d, MAX_THROTTLE);
    }

    #[tokio::test(start_paused = true)]
    async fn over_time_a_budget_passes_its_rate() {
        let b = Buckets::default();
        let start = Instant::now();
        let mut now = start;
        let mut passed = 0usize;
        // A client that waits out each throttle, sending 300 bytes a time.
        while now < start + Duration::from_secs(20) {
            passed += 300;
            now += b.spend(Kind::Produce, &budget(), 1000, 300, now) + Duration::from_millis(1);
        }
        // 20 s at 1,000 B/s, plus the burst, plus one request.
        assert!(passed <= 20_000 + 1000 + 300, "{passed}");
        assert!(passed >= 19_000, "{passed}");
    }
}
