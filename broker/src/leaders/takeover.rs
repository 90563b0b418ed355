//! Taking partitions over, each in a task of its own, so that applying an
//! assignment never waits for a takeover. On a real NFS volume a broker
//! applying the assignment of a topic just created spent 2.2 s opening its
//! partitions while the next assignment, a failover, waited behind it
//! (issue 49, campaign seed 11 round 42: "led again" 15.2 s after a power
//! loss, past the session timeout + 5 s).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::{Leaders, lock, offline};
use crate::log::fence::{EpochClaims, LeadershipFence};
use crate::log::topic_config::{self, Overrides};
use crate::log::{LogConfig, LogError, PartitionLog, topic};

/// How many partition takeovers a broker runs at once: each is a dozen
/// round trips to the volume, so on NFS (a few ms each) a broker inheriting
/// hundreds of partitions one by one would leave them unwritable for
/// seconds past the failover.
pub(super) const AT_ONCE: usize = 32;

/// Sets what a topic's config says on a log's limits.
pub(super) fn apply_limits(log: &PartitionLog, o: &Overrides) {
    let deletes = topic_config::deletes_by_retention(o);
    let limit = |name| Some(topic_config::get_i64(o, name)).filter(|v| deletes && *v >= 0);
    log.set_limits(|c: &mut LogConfig| {
        c.segment_bytes = topic_config::get_i64(o, "segment.bytes").max(14) as u64;
        c.segment_ms = Some(topic_config::get_i64(o, "segment.ms")).filter(|v| *v > 0);
        c.retention_ms = limit("retention.ms");
        c.retention_bytes = limit("retention.bytes").map(|v| v as u64);
        c.compaction = topic_config::compaction(o);
    });
}

impl Leaders {
    /// Starts a takeover of each partition in `mine` that is neither led
    /// here, nor being taken over, nor given up or held in its epoch.
    pub(super) fn start_takeovers(
        self: &Arc<Self>,
        mine: BTreeMap<(String, u32), u32>,
    ) -> Vec<JoinHandle<()>> {
        let mut started = Vec::new();
        let mut opening = lock(&self.opening);
        for ((t, p), epoch) in mine {
            if opening.contains_key(&(t.clone(), p))
                || self.get(&t, p).is_some()
                || lock(&self.stuck).contains_key(&(t.clone(), p, epoch))
                || lock(&self.offline).waits(&t, p, epoch)
            {
                continue;
            }
            let leaders = self.clone();
            let key = (t.clone(), p);
            let task = tokio::spawn(async move { leaders.take_over_while_assigned(t, p).await });
            opening.insert(key, task.abort_handle());
            started.push(task);
        }
        started
    }

    /// Takes `(t, p)` over in the epoch the newest assignment gives it, and
    /// again if the assignment moved to another epoch here meanwhile; a log
    /// opened for an epoch no longer assigned is closed at once (its
    /// successor is fenced by the newer claim).
    async fn take_over_while_assigned(self: Arc<Self>, t: String, p: u32) {
        let key = (t.clone(), p);
        // Never closed, so an acquire cannot fail.
        let _permit = self.takeover_permits.clone().acquire_owned().await;
        loop {
            let Some(epoch) = lock(&self.wanted).get(&key).copied() else {
                break;
            };
            if lock(&self.stuck).contains_key(&(t.clone(), p, epoch))
                || lock(&self.offline).waits(&t, p, epoch)
            {
                break;
            }
            let Some(log) = self.take_over(&t, p, epoch).await else {
                break;
            };
            let log = Arc::new(log);
            // Under `wanted`: `start_sync` sets it before it looks at the
            // logs, so a log kept here is either seen by that look or
            // matches what it set.
            let kept = {
                let wanted = lock(&self.wanted);
                let kept = wanted.get(&key) == Some(&epoch);
                if kept {
                    lock(&self.logs).insert(key.clone(), log.clone());
                }
                kept
            };
            if kept {
                tracing::info!(topic_id = %t, partition = p, epoch, "leading");
                break;
            }
            tracing::info!(topic_id = %t, partition = p, epoch, "the assignment moved on during the takeover; stepping down");
            self.close(&t, p, Some(log)).await;
        }
        // After the log went in: a `start_sync` in between sees the
        // partition either being opened or led, never neither.
        lock(&self.opening).remove(&key);
    }

    /// Opens `(t, p)` as leader in `epoch` with its topic's config; on
    /// failure, records why (held offline, or given up for a new epoch).
    async fn take_over(&self, t: &str, p: u32, epoch: u32) -> Option<PartitionLog> {
        let dir = topic::partition_dir(t, p);
        let fence: Arc<dyn LeadershipFence> =
            Arc::new(EpochClaims::new(self.vfs.clone(), dir.clone()));
        let began = tokio::time::Instant::now();
        let open = PartitionLog::open_as_leader(
            self.vfs.clone(),
            dir,
            (t, p),
            epoch,
            &self.token,
            fence.clone(),
            self.config.clone(),
        );
        // Read beside the opening, not after it: a takeover's time is
        // failover time.
        let (opened, config) = tokio::join!(open, topic_config::read(self.vfs.as_ref(), t));
        // A partition held offline is retried in its epoch; once a newer
        // epoch exists (an operator's `fsck --truncate-damaged` took it
        // over), a retry there would read an older manifest than the
        // newest: ask for an epoch past it instead.
        let opened = match opened {
            Err(LogError::Unusable(_) | LogError::Io(_))
                if matches!(fence.still_leader(epoch).await, Ok(false)) =>
            {
                Err(LogError::Fenced(epoch))
            }
            o => o,
        };
        self.metrics
            .takeover("partition", began.elapsed(), opened.is_ok());
        match opened {
            Ok(log) => {
                if let Some(held) = lock(&self.offline).release(t, p) {
                    tracing::warn!(topic_id = %t, partition = p, epoch, was = held.why, "the partition's files are usable again: back online");
                }
                match config {
                    Ok((_, o)) => {
                        apply_limits(&log, &o);
                        lock(&self.configs).insert(t.to_owned(), o);
                    }
                    Err(e) => {
                        tracing::debug!(topic_id = %t, error = %e, "topic config not read; the last one read applies");
                        if let Some(o) = lock(&self.configs).get(t) {
                            apply_limits(&log, o);
                        }
                    }
                }
                Some(log)
            }
            // A takeover writes a segment and a manifest; with no room
            // for them, a new epoch would fail the same way: held in this
            // one, tried again every few seconds.
            Err(LogError::Io(e)) if crate::log::partition::is_full(&e) => {
                let why = format!("the volume is full: {e}");
                if lock(&self.offline).hold(t, p, epoch, why.clone(), true) {
                    tracing::error!(topic_id = %t, partition = p, epoch, error = why, "partition held offline until space is freed");
                }
                None
            }
            Err(LogError::Unusable(why)) => {
                if lock(&self.offline).hold(t, p, epoch, why.clone(), false) {
                    tracing::error!(
                        topic_id = %t,
                        partition = p,
                        epoch,
                        error = why,
                        retry_secs = offline::RETRY.as_secs(),
                        "partition held offline: its files on the volume are damaged; produce and \
                         fetch answer KAFKA_STORAGE_ERROR until they are restored or repaired \
                         (run kaas fsck; see the runbook)"
                    );
                } else {
                    tracing::debug!(topic_id = %t, partition = p, epoch, error = why, "partition still damaged");
                }
                None
            }
            Err(e) => {
                tracing::warn!(topic_id = %t, partition = p, epoch, error = %e, "takeover failed; asking for a new epoch");
                self.give_up(t, p, epoch).await;
                None
            }
        }
    }
}
