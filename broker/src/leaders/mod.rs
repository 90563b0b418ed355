//! The partitions this broker leads, kept in step with the assignment.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio::task::{AbortHandle, JoinHandle};
use vfs::Vfs;
use vfs::durable::ClaimToken;

use crate::cluster::assignment::Assignment;
use crate::cluster::heartbeat::Leaderships;
use crate::log::audit;
use crate::log::partition::CleanerLimits;
use crate::log::topic_config::{self, Overrides};
use crate::log::{LogConfig, LogError, PartitionLog, topic};

mod offline;
mod takeover;

pub struct Leaders {
    vfs: Arc<dyn Vfs>,
    broker: u32,
    token: ClaimToken,
    config: LogConfig,
    logs: Mutex<BTreeMap<(String, u32), Arc<PartitionLog>>>,
    /// Config overrides of the topics led here: read at each takeover,
    /// refreshed by `refresh_configs`.
    configs: Mutex<BTreeMap<String, Overrides>>,
    /// The partitions the newest assignment gives this broker, in their
    /// epoch: a takeover keeps the log it opened only if this still names it.
    wanted: Mutex<BTreeMap<(String, u32), u32>>,
    /// The takeovers under way, one per partition.
    opening: Mutex<BTreeMap<(String, u32), AbortHandle>>,
    /// Bounds the takeovers run at once (see `takeover::AT_ONCE`).
    takeover_permits: Arc<Semaphore>,
    /// Woken after every append, for fetches waiting for data.
    pub appended: tokio::sync::Notify,
    /// `(topic id, partition, epoch)` this broker can never lead in that
    /// epoch, with the newest epoch claimed on the volume when it was
    /// given up; reported in the heartbeat so the controller bumps the
    /// epoch, past that claim.
    stuck: Mutex<BTreeMap<(String, u32, u32), u32>>,
    /// Partitions whose files cannot be used, held in their epoch.
    offline: Mutex<offline::Offline>,
    metrics: crate::metrics::Metrics,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Leaders {
    pub fn new(vfs: Arc<dyn Vfs>, broker: u32, config: LogConfig) -> Self {
        Self {
            vfs,
            broker,
            token: ClaimToken::fresh(&format!("broker-{broker}")),
            config,
            logs: Mutex::new(BTreeMap::new()),
            configs: Mutex::new(BTreeMap::new()),
            wanted: Mutex::new(BTreeMap::new()),
            opening: Mutex::new(BTreeMap::new()),
            takeover_permits: Arc::new(Semaphore::new(takeover::AT_ONCE)),
            appended: tokio::sync::Notify::new(),
            stuck: Mutex::new(BTreeMap::new()),
            offline: Mutex::new(offline::Offline::default()),
            metrics: crate::metrics::Metrics::unobserved(),
        }
    }

    /// Counts takeovers into `metrics` (the broker's registry).
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// How many partitions this broker leads now.
    pub fn count(&self) -> usize {
        lock(&self.logs).len()
    }

    /// The partitions this broker leads now, by topic id and partition.
    pub fn led(&self) -> Vec<((String, u32), Arc<PartitionLog>)> {
        lock(&self.logs)
            .iter()
            .map(|(k, log)| (k.clone(), log.clone()))
            .collect()
    }

    /// Checkpoints every partition still led here (see
    /// [`PartitionLog::checkpoint`]): a broker that stops while it leads
    /// leaves its logs vouched for to their acknowledged end.
    pub async fn checkpoint_all(&self) {
        for ((topic_id, partition), log) in self.led() {
            if let Err(e) = log.checkpoint().await {
                tracing::warn!(topic_id, partition, error = %e, "checkpoint at shutdown not written");
            }
        }
    }

    /// The leaderships given up, and for those whose partition has an
    /// epoch claimed past theirs, the newest claim:
    /// see `Heartbeat::claimed_past`.
    pub fn stuck(&self) -> (Leaderships, Leaderships) {
        let stuck = lock(&self.stuck);
        let past = stuck
            .iter()
            .filter(|(key, newest)| **newest > key.2)
            .map(|((t, p, _), newest)| (t.clone(), *p, *newest))
            .collect();
        (stuck.keys().cloned().collect(), past)
    }

    /// Partitions assigned here that are held offline: their files are
    /// damaged. `(topic id, partition, epoch)`, for the heartbeat.
    pub fn offline(&self) -> Vec<(String, u32, u32)> {
        lock(&self.offline).list()
    }

    /// Whether a partition led here failed its last write for want of
    /// space, or one is held offline because the volume was full.
    pub fn volume_full(&self) -> bool {
        self.led().iter().any(|(_, log)| log.volume_full()) || lock(&self.offline).any_full()
    }

    /// Why `(topic, partition)` is held offline here, if it is.
    pub fn offline_because(&self, topic_id: &str, partition: u32) -> Option<String> {
        lock(&self.offline)
            .get(topic_id, partition)
            .map(|h| h.why.clone())
    }

    /// Gives up leading `(topic, partition)` in `epoch`: a retry in the same
    /// epoch could not succeed (its claim and files are half made or taken).
    /// The newest epoch claimed there goes with it: lost replies and an
    /// operator's repairs can leave claims far past the assignment's, and a
    /// controller that only stepped one epoch per report would spend a
    /// heartbeat on each of them (seed 893: 13 steps, past the liveness
    /// window) before an epoch this broker can claim.
    async fn give_up(&self, topic_id: &str, partition: u32, epoch: u32) {
        let dir = topic::partition_dir(topic_id, partition);
        let newest = match audit::newest_claim_from(self.vfs.as_ref(), &dir, epoch).await {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(topic_id, partition, error = %e, "newest epoch claim not read; asking for the next epoch");
                0
            }
        };
        lock(&self.stuck).insert((topic_id.to_owned(), partition, epoch), newest);
    }

    pub fn get(&self, topic_id: &str, partition: u32) -> Option<Arc<PartitionLog>> {
        lock(&self.logs)
            .get(&(topic_id.to_owned(), partition))
            .cloned()
    }

    /// The largest record set a topic accepts (max.message.bytes).
    pub fn max_message_bytes(&self, topic_id: &str) -> usize {
        let configs = lock(&self.configs);
        let empty = Overrides::new();
        let o = configs.get(topic_id).unwrap_or(&empty);
        topic_config::get_i64(o, "max.message.bytes").max(0) as usize
    }

    /// Re-reads the configs of the topics led here and applies them.
    pub async fn refresh_configs(&self) {
        let logs: Vec<((String, u32), Arc<PartitionLog>)> = lock(&self.logs)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut fresh: BTreeMap<String, Overrides> = BTreeMap::new();
        for ((t, _), log) in logs {
            if !fresh.contains_key(&t) {
                match topic_config::read(self.vfs.as_ref(), &t).await {
                    Ok((_, o)) => {
                        fresh.insert(t.clone(), o);
                    }
                    Err(e) => {
                        tracing::debug!(topic_id = %t, error = %e, "topic config not read; keeping the previous one");
                        continue;
                    }
                }
            }
            takeover::apply_limits(&log, &fresh[&t]);
        }
        lock(&self.configs).extend(fresh);
    }

    /// Applies retention to every partition led here. A partition whose
    /// log stopped after a storage error steps down, so the controller's
    /// next assignment can give it a fresh epoch.
    pub async fn enforce_retention(&self, now_ms: i64) {
        let logs: Vec<((String, u32), Arc<PartitionLog>)> = lock(&self.logs)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for ((t, p), log) in logs {
            match log.enforce_retention(now_ms).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(topic_id = %t, partition = p, segments = n, "retention removed segments")
                }
                Err(e) => self.failed(&t, p, log, e, "retention").await,
            }
        }
        let backlog = lock(&self.logs).values().map(|l| l.pending_deletes()).sum();
        self.metrics.retention_backlog(backlog);
    }

    /// After a log operation failed: a fenced log steps down (the
    /// successor leads; this copy only goes), a stopped one too, asking
    /// for a new epoch; anything else is retried at the next round.
    async fn failed(&self, t: &str, p: u32, log: Arc<PartitionLog>, e: LogError, what: &str) {
        match e {
            // Superseded by someone the assignment does not name (an
            // operator's repair) if the assignment still gives us this
            // epoch: a takeover in it again would read past the newer
            // epoch's manifest, so a new epoch is asked for. Otherwise
            // the report is dropped once the assignment moves on.
            LogError::Fenced(epoch) => {
                self.give_up(t, p, epoch).await;
                self.step_down_from(t, p, log).await;
            }
            LogError::Failed(why) => {
                tracing::warn!(topic_id = %t, partition = p, epoch = log.epoch(), "stepping down: {why}");
                self.give_up(t, p, log.epoch()).await;
                self.step_down_from(t, p, log).await;
            }
            e => {
                tracing::warn!(topic_id = %t, partition = p, error = %e, "{what} failed; retrying next round")
            }
        }
    }

    /// Whether a partition led here has cleaning to do now (see
    /// [`PartitionLog::cleaning_due`]).
    pub fn cleaning_due(&self, now_ms: i64) -> bool {
        lock(&self.logs).values().any(|l| l.cleaning_due(now_ms))
    }

    /// One cleaner round over every partition led here.
    pub async fn clean(&self, limits: &CleanerLimits, now_ms: i64) {
        let logs: Vec<((String, u32), Arc<PartitionLog>)> = lock(&self.logs)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for ((t, p), log) in logs {
            if let Err(e) = log.roll_if_due(now_ms).await {
                self.failed(&t, p, log, e, "rolling by segment.ms").await;
                continue;
            }
            let started = tokio::time::Instant::now();
            match log.compact(now_ms, limits).await {
                Ok(None) => {}
                Ok(Some(d)) => {
                    let took = started.elapsed();
                    self.metrics.compacted(took, Some(&d));
                    tracing::info!(
                        topic_id = %t,
                        partition = p,
                        segments_read = d.segments_read,
                        segments_written = d.segments_written,
                        bytes_read = d.bytes_read,
                        bytes_written = d.bytes_written,
                        ratio = format!("{:.3}", d.bytes_written as f64 / d.bytes_read.max(1) as f64),
                        records_kept = d.records_kept,
                        records_read = d.records_read,
                        keys = d.keys,
                        compressed_batches_kept = d.compressed_batches,
                        cleaned_until = d.cleaned_until,
                        seconds = format!("{:.3}", took.as_secs_f64()),
                        "compacted"
                    );
                }
                Err(e) => {
                    self.metrics.compacted(started.elapsed(), None);
                    self.failed(&t, p, log, e, "compaction").await;
                }
            }
        }
    }

    /// Stops leading a partition (fenced, or no longer assigned here).
    pub(crate) async fn step_down(&self, topic_id: &str, partition: u32) {
        let log = lock(&self.logs).remove(&(topic_id.to_owned(), partition));
        self.close(topic_id, partition, log).await;
    }

    /// Stops leading with `log` if it is still the log led here. A
    /// compaction or retention pass holds its log for as long as it runs
    /// and may fail long after this broker stepped down from that epoch and
    /// took the partition over in a newer one: stepping down from whatever
    /// is led now would drop the newer epoch's log, and the next sync would
    /// take that epoch over again from the epoch below, without what was
    /// acknowledged in it (seed 84 with the controller stepping one epoch
    /// per stuck report: compacted-write-lost).
    async fn step_down_from(&self, topic_id: &str, partition: u32, log: Arc<PartitionLog>) {
        let removed = {
            let mut logs = lock(&self.logs);
            let key = (topic_id.to_owned(), partition);
            match logs.get(&key) {
                Some(led) if Arc::ptr_eq(led, &log) => logs.remove(&key),
                _ => None,
            }
        };
        drop(log);
        self.close(topic_id, partition, removed).await;
    }

    async fn close(&self, topic_id: &str, partition: u32, log: Option<Arc<PartitionLog>>) {
        if let Some(log) = log.and_then(|l| Arc::try_unwrap(l).ok()) {
            if let Err(e) = log.close().await {
                tracing::warn!(topic_id, partition, error = %e, "closing a partition after stepping down");
            }
        }
    }

    /// Opens every partition the assignment gives this broker (in its
    /// epoch), lets go of the others and re-reads the configs of the topics
    /// led, returning once the takeovers it started have ended. A takeover
    /// that fails is retried at the next call.
    pub async fn sync(self: &Arc<Self>, a: &Assignment) {
        for started in self.start_sync(a).await {
            let _ = started.await;
        }
        self.refresh_configs().await;
    }

    /// [`Self::sync`] without waiting for the takeovers: a broker applying
    /// an assignment that gives it a topic just created must not keep the
    /// next one, a failover, waiting for that topic's partitions to open
    /// (seconds on a slow volume). Steps down at once from what the
    /// assignment moved away; a takeover still under way when its
    /// partition moves ends by stepping down (see `takeover`). Returns the
    /// takeovers started, to wait for them.
    pub async fn start_sync(self: &Arc<Self>, a: &Assignment) -> Vec<JoinHandle<()>> {
        let mine: BTreeMap<(String, u32), u32> = a
            .partitions
            .iter()
            .filter(|(_, _, l)| l.leader == self.broker)
            .map(|(t, p, l)| ((t.clone(), *p), l.leader_epoch))
            .collect();
        // Before the logs are looked at: a takeover that ends from now on
        // keeps its log only if this still names its epoch.
        *lock(&self.wanted) = mine.clone();
        let held: Vec<((String, u32), u32, bool)> = lock(&self.logs)
            .iter()
            .map(|(k, log)| (k.clone(), log.epoch(), log.has_stopped()))
            .collect();
        for ((t, p), epoch, stopped) in held {
            if stopped {
                tracing::info!(topic_id = %t, partition = p, epoch, "log stopped; asking for a new epoch");
                self.give_up(&t, p, epoch).await;
            }
            if stopped || mine.get(&(t.clone(), p)) != Some(&epoch) {
                if !stopped {
                    tracing::info!(topic_id = %t, partition = p, epoch, "no longer leading");
                }
                self.step_down(&t, p).await;
            }
        }
        // Reports stand until the assignment moved past them.
        lock(&self.stuck).retain(|(t, p, e), _| mine.get(&(t.clone(), *p)) == Some(e));
        lock(&self.offline).retain(|t, p, e| mine.get(&(t.to_owned(), p)) == Some(&e));
        self.start_takeovers(mine)
    }

    /// Stops the takeovers under way (the broker stops): each is re-driven
    /// by whoever leads the partition next, as after a crash.
    pub fn abort_takeovers(&self) {
        for task in lock(&self.opening).values() {
            task.abort();
        }
    }
}
