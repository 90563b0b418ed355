//! A request that created topics or partitions answers once they have
//! leaders, as Kafka's does: some clients (kafka-python, aiokafka) take a
//! first Metadata answer without a leader as final for a while, and their
//! first send then waits for a metadata refresh, or times out.

use std::time::Duration;

use tokio::time::Instant;

use super::Api;

/// How long a request that created something waits for its leaders before
/// answering without them (LEADER_NOT_AVAILABLE, which clients retry). On
/// one broker leaders come within a takeover; on a cluster whose controller
/// is another broker, within this broker's next heartbeat (written at once:
/// it announces the new topics, see `cluster::announced`), a tick of the
/// controller and a tick of each broker.
pub const LEADERS_WAIT: Duration = Duration::from_secs(5);

/// How often the wait looks again: the assignment is published before the
/// partitions it gives this broker are open, and the opening has no
/// notification of its own.
const POLL: Duration = Duration::from_millis(10);

impl Api {
    /// Tells the controller about topics this broker just created.
    pub(super) fn announce(&self, created: &[(String, u32)]) {
        if !created.is_empty() {
            self.announced
                .add(created.iter().map(|(id, _)| id.as_str()));
            self.created.notify_one();
        }
    }

    /// Waits until every partition below each `(topic id, partitions)` has
    /// a leader in this broker's assignment, opened already where that
    /// leader is this broker, or until `deadline`. True when they all have.
    pub(super) async fn await_leaders(&self, wanted: &[(String, u32)], deadline: Instant) -> bool {
        if wanted.is_empty() {
            return true;
        }
        self.created.notify_one();
        loop {
            if self.have_leaders(wanted) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                tracing::info!(
                    ?wanted,
                    "new topics or partitions still without leaders; answering without them"
                );
                return false;
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
        }
    }

    /// [`Self::await_leaders`] for CreateTopics and CreatePartitions: up to
    /// the request's `timeout_ms` (0: no wait, as in Kafka), at most
    /// [`LEADERS_WAIT`].
    pub(super) async fn await_leaders_within(&self, wanted: &[(String, u32)], timeout_ms: i32) {
        let wait = Duration::from_millis(timeout_ms.max(0) as u64).min(LEADERS_WAIT);
        if !wait.is_zero() {
            self.await_leaders(wanted, Instant::now() + wait).await;
        }
    }

    fn have_leaders(&self, wanted: &[(String, u32)]) -> bool {
        let Some(a) = self.current() else {
            return false;
        };
        wanted.iter().all(|(id, partitions)| {
            (0..*partitions).all(|p| match a.leadership(id, p) {
                None => false,
                Some(l) if l.leader == self.config.broker_id => self
                    .leaders
                    .get(id, p)
                    .is_some_and(|log| log.epoch() == l.leader_epoch),
                // Another broker's: it opens the partition at its next
                // tick; a send before that is answered NOT_LEADER_OR_FOLLOWER,
                // which every client retries after a metadata refresh.
                Some(_) => true,
            })
        })
    }
}
