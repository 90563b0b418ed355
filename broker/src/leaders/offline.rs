//! Partitions held offline here: assigned to this broker, but their files
//! on the volume cannot be used (`LogError::Unusable`). A new epoch would
//! find the same damage, so none is asked for: the partition stays in its
//! epoch, answers KAFKA_STORAGE_ERROR, is reported in the heartbeat (the
//! controller marks it offline in the assignment, so Metadata shows it
//! without a leader) and its takeover is retried every `RETRY`, in the
//! same epoch (a takeover is idempotent up to its first write), so a
//! restored file brings it back by itself.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

/// How often a takeover of a partition held offline is tried again.
pub(crate) const RETRY: Duration = Duration::from_secs(30);
/// ... when it was held because the volume was full: space comes back
/// when an operator frees or grows it, and the partition should follow.
pub(crate) const RETRY_FULL: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub epoch: u32,
    pub why: String,
    /// Held because the volume was full, not for damage.
    pub full: bool,
    pub retry_at: Instant,
}

#[derive(Default)]
pub(crate) struct Offline(BTreeMap<(String, u32), Held>);

impl Offline {
    /// Records a failed takeover of `(topic, partition)` in `epoch`, for
    /// damage or (`full`) for want of space; true
    /// the first time (worth an error line), false for a retry that found
    /// the same.
    pub fn hold(
        &mut self,
        topic: &str,
        partition: u32,
        epoch: u32,
        why: String,
        full: bool,
    ) -> bool {
        let retry = if full { RETRY_FULL } else { RETRY };
        let held = Held {
            epoch,
            why,
            full,
            retry_at: Instant::now() + retry,
        };
        let previous = self.0.insert((topic.to_owned(), partition), held);
        previous.is_none_or(|p| p.epoch != epoch)
    }

    /// Whether a takeover of `(topic, partition)` in `epoch` waits now.
    pub fn waits(&self, topic: &str, partition: u32, epoch: u32) -> bool {
        self.0
            .get(&(topic.to_owned(), partition))
            .is_some_and(|h| h.epoch == epoch && Instant::now() < h.retry_at)
    }

    /// Whether one is held because the volume was full.
    pub fn any_full(&self) -> bool {
        self.0.values().any(|h| h.full)
    }

    pub fn get(&self, topic: &str, partition: u32) -> Option<&Held> {
        self.0.get(&(topic.to_owned(), partition))
    }

    /// Forgets a partition led again, or no longer assigned here in the
    /// epoch it was held in.
    pub fn release(&mut self, topic: &str, partition: u32) -> Option<Held> {
        self.0.remove(&(topic.to_owned(), partition))
    }

    /// Keeps only the holds `still` says are assigned here in their epoch.
    pub fn retain(&mut self, still: impl Fn(&str, u32, u32) -> bool) {
        self.0.retain(|(t, p), h| still(t, *p, h.epoch));
    }

    /// `(topic id, partition, epoch)` of each, for the heartbeat.
    pub fn list(&self) -> Vec<(String, u32, u32)> {
        self.0
            .iter()
            .map(|((t, p), h)| (t.clone(), *p, h.epoch))
            .collect()
    }
}
