//! Group coordination: consumer groups and their committed offsets, kept
//! as files on the shared volume.
//!
//! Groups are spread over a fixed number of coordinator slots (a hash of
//! the group id). The controller assigns each slot to a broker with a
//! coordinator epoch, exactly like a partition: the broker claims
//! `groups/<slot>/epoch-<e>` before reading the slot's files, writes a
//! group only into its own epoch's file (`store`), and acknowledges a write
//! only after a fresh check that no newer epoch was claimed.
//!
//! Two group protocols: the classic one (`group`, `api`: JoinGroup and
//! SyncGroup, a leader member assigns) and the consumer protocol of KIP-848
//! (`consumer`, `consumer_api`, `assignor`: the coordinator assigns and
//! members reconcile by heartbeat). A group is of one protocol at a time;
//! both keep their state and offsets in the same file.

pub mod api;
pub mod assignor;
pub mod audit;
pub mod consumer;
mod consumer_api;
pub mod group;
mod offsets_api;
pub mod store;
pub(crate) mod txn_offsets;

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;
use vfs::Vfs;
use vfs::durable::ClaimToken;

use crate::cluster::assignment::{Assignment, COORDINATOR_SLOTS};
use crate::log::fence::{self, EpochClaims, LeadershipFence};
use group::Group;

/// The coordinator slot of a group or transactional id.
pub(crate) fn slot_of(key: &str) -> u32 {
    crc32c::crc32c(key.as_bytes()) % COORDINATOR_SLOTS
}

/// Settings of the group coordinator.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// Kafka's group.initial.rebalance.delay.ms: a new group waits this
    /// long for more members before its first generation.
    pub initial_rebalance_delay: Duration,
    pub min_session_timeout: Duration,
    pub max_session_timeout: Duration,
    /// For commit timestamps.
    pub clock: crate::clock::WallClock,
    /// Groups of the consumer protocol (KIP-848).
    pub consumer: consumer::Settings,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            initial_rebalance_delay: Duration::from_millis(3000),
            min_session_timeout: Duration::from_millis(6000),
            max_session_timeout: Duration::from_secs(1800),
            clock: crate::clock::WallClock::default(),
            // Kafka's group.consumer.session.timeout.ms and
            // group.consumer.heartbeat.interval.ms.
            consumer: consumer::Settings {
                session_timeout: Duration::from_secs(45),
                heartbeat_interval: Duration::from_secs(5),
            },
        }
    }
}

/// A group as its slot holds it: the state machine and the epoch of its
/// newest file on the volume.
pub struct Entry {
    pub group: Group,
    stored: Option<u32>,
}

/// One coordinator slot this broker leads, for one coordinator epoch.
pub struct Slot {
    pub slot: u32,
    pub epoch: u32,
    pub(crate) vfs: Arc<dyn Vfs>,
    fence: EpochClaims,
    pub groups: tokio::sync::Mutex<BTreeMap<String, Entry>>,
    /// The transactional ids of the slot (`crate::txn_store`).
    pub txns: tokio::sync::Mutex<BTreeMap<String, crate::txn_store::Entry>>,
    fenced: AtomicBool,
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl Slot {
    fn dir(slot: u32) -> PathBuf {
        store::slot_dir(slot)
    }

    /// Takes the slot over in `epoch`: the claim first (from now on the
    /// previous coordinator cannot acknowledge anything), every unclaimed
    /// epoch below fenced, then the groups the listing shows are loaded. Groups
    /// a stale listing hides are loaded by name when first asked for.
    async fn take_over(
        vfs: Arc<dyn Vfs>,
        slot: u32,
        epoch: u32,
        token: &ClaimToken,
    ) -> io::Result<Self> {
        let dir = Self::dir(slot);
        match vfs.mkdir(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        // Every epoch below gets a claim, before this epoch's own: walking
        // down only to the first claimed one is not enough (a coordinator
        // of an unclaimed epoch, waking up late, could claim it and pass
        // its fence check), and fencing after the own claim leaves such
        // epochs unclaimed under a decided claim when the takeover fails
        // in between (both found by `kaas fsck` in the simulator). Claims
        // are never removed, so what the listing shows exists; what a
        // stale listing misses is claimed again, harmlessly.
        let before = vfs.read_dir(&dir).await?;
        let claimed: std::collections::BTreeSet<u32> = before
            .iter()
            .filter_map(|e| crate::layout::parse_epoch_claim(&e.name))
            .collect();
        for e in (1..epoch).rev().filter(|e| !claimed.contains(e)) {
            fence::fence_epoch(vfs.as_ref(), &dir, e, token).await?;
            vfs::fault_point!(vfs, "group-load.older-epoch-fenced");
        }
        fence::claim_epoch(vfs.as_ref(), &dir, epoch, token).await?;
        // Listed again after the claim: a file an older coordinator wrote
        // and had acknowledged before it is in this listing.
        let listing = vfs.read_dir(&dir).await?;
        let now = Instant::now();
        let mut newest: BTreeMap<String, u32> = BTreeMap::new();
        for entry in &listing {
            if let Some((hash, e)) = store::parse_name(&entry.name) {
                let slot_newest = newest.entry(hash.to_owned()).or_insert(e);
                *slot_newest = (*slot_newest).max(e);
            }
        }
        vfs::fault_point!(vfs, "group-load.listed");
        let txns = crate::txn_store::load_listed(vfs.as_ref(), slot, epoch, &listing).await?;
        let mut groups = BTreeMap::new();
        for (hash, e) in newest {
            let p = store::path_of_hash(slot, &hash, e);
            match store::read_at(vfs.as_ref(), &p).await {
                Ok(Some(r)) if !r.deleted => {
                    // Written again as this epoch's before the slot serves:
                    // a deposed coordinator's late write to its own older
                    // file (members it timed out while cut off) is then
                    // never what a later successor loads.
                    if e < epoch {
                        store::save(vfs.as_ref(), slot, epoch, &r, Some(e)).await?;
                    }
                    groups.insert(
                        r.group_id.clone(),
                        Entry {
                            group: Group::from_record(r, now),
                            stored: Some(epoch),
                        },
                    );
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(path = %p.display(), error = %err, "group not loaded; it is read again when asked for")
                }
            }
        }
        vfs::fault_point!(vfs, "group-load.adopted");
        tracing::info!(slot, epoch, groups = groups.len(), "coordinating");
        Ok(Self {
            slot,
            epoch,
            fence: EpochClaims::new(vfs.clone(), dir),
            vfs,
            groups: tokio::sync::Mutex::new(groups),
            txns: tokio::sync::Mutex::new(txns),
            fenced: AtomicBool::new(false),
        })
    }

    pub(crate) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Relaxed)
    }

    /// The group's entry, loaded from the volume if this slot has not seen
    /// it yet; with `create`, a new empty group when there is none.
    pub async fn entry<'a>(
        &self,
        groups: &'a mut BTreeMap<String, Entry>,
        group_id: &str,
        create: bool,
    ) -> Result<Option<&'a mut Entry>, i16> {
        if !groups.contains_key(group_id) {
            let found = store::load(self.vfs.as_ref(), self.slot, group_id, self.epoch)
                .await
                .map_err(|e| {
                    tracing::warn!(group = group_id, error = %e, "loading a group");
                    code(ResponseError::CoordinatorNotAvailable)
                })?;
            vfs::fault_point!(self.vfs, "group-load.read");
            let entry = match found {
                Some((r, e)) if !r.deleted => Entry {
                    group: Group::from_record(r, Instant::now()),
                    stored: Some(e),
                },
                Some((_, e)) if create => Entry {
                    group: Group::new(group_id),
                    stored: Some(e),
                },
                None if create => Entry {
                    group: Group::new(group_id),
                    stored: None,
                },
                _ => return Ok(None),
            };
            groups.insert(group_id.to_owned(), entry);
        }
        Ok(groups.get_mut(group_id))
    }

    /// Persists `record` as this epoch's file of the group and confirms the
    /// epoch afterwards. Only then may the caller acknowledge.
    pub(crate) async fn persist(
        &self,
        entry: &mut Entry,
        record: &store::GroupRecord,
    ) -> Result<(), i16> {
        if self.is_fenced() {
            return Err(code(ResponseError::NotCoordinator));
        }
        vfs::fault_point!(self.vfs, "group-save.decided");
        if let Err(e) = store::save(
            self.vfs.as_ref(),
            self.slot,
            self.epoch,
            record,
            entry.stored,
        )
        .await
        {
            tracing::warn!(slot = self.slot, group = %record.group_id, error = %e, "group not persisted");
            return Err(code(ResponseError::CoordinatorNotAvailable));
        }
        vfs::fault_point!(self.vfs, "group-save.saved");
        self.confirm().await?;
        entry.stored = Some(self.epoch);
        Ok(())
    }

    /// Whether this epoch still coordinates the slot, by a fresh read: after
    /// a write, before it is acknowledged, and for an answer from memory (a
    /// coordinator superseded while it was away, a zombie that just woke
    /// up, would otherwise answer from before its successor's commits).
    pub(crate) async fn confirm(&self) -> Result<(), i16> {
        if self.is_fenced() {
            return Err(code(ResponseError::NotCoordinator));
        }
        match self.fence.still_leader(self.epoch).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                tracing::info!(slot = self.slot, epoch = self.epoch, "coordinator fenced");
                self.fenced.store(true, Ordering::Relaxed);
                Err(code(ResponseError::NotCoordinator))
            }
            Err(e) => {
                tracing::warn!(slot = self.slot, error = %e, "coordinator epoch not confirmed");
                Err(code(ResponseError::CoordinatorNotAvailable))
            }
        }
    }

    /// Session expiry and round deadlines; groups that emptied are persisted.
    async fn tick(&self, config: &GroupConfig) {
        let now = Instant::now();
        let mut groups = self.groups.lock().await;
        let ids: Vec<String> = groups.keys().cloned().collect();
        for id in ids {
            let Some(entry) = groups.get_mut(&id) else {
                continue;
            };
            let changed = match &mut entry.group.consumer {
                Some(c) => {
                    let topics = c.state.topics.clone();
                    c.tick(now, config.consumer, &topics)
                }
                None => entry.group.tick(now, config.initial_rebalance_delay),
            };
            if changed {
                let record = entry.group.record();
                let _ = self.persist(entry, &record).await;
            }
        }
    }
}

/// The coordinator slots this broker leads, kept in step with the assignment.
pub struct Coordinators {
    vfs: Arc<dyn Vfs>,
    broker: u32,
    token: ClaimToken,
    pub config: GroupConfig,
    slots: Mutex<BTreeMap<u32, Arc<Slot>>>,
    /// `(slot, epoch)` this broker can never coordinate in that epoch.
    stuck: Mutex<std::collections::BTreeSet<(u32, u32)>>,
    /// Woken when a transaction was decided (or a slot taken over): its
    /// markers are due.
    pub txn_decided: tokio::sync::Notify,
    metrics: crate::metrics::Metrics,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Coordinators {
    pub fn new(vfs: Arc<dyn Vfs>, broker: u32, config: GroupConfig) -> Self {
        Self {
            vfs,
            broker,
            token: ClaimToken::fresh(&format!("coordinator-{broker}")),
            config,
            slots: Mutex::new(BTreeMap::new()),
            stuck: Mutex::new(std::collections::BTreeSet::new()),
            txn_decided: tokio::sync::Notify::new(),
            metrics: crate::metrics::Metrics::unobserved(),
        }
    }

    /// Counts slot takeovers into `metrics` (the broker's registry).
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Stuck slots as the heartbeat reports them (see `Heartbeat::stuck`).
    pub fn stuck(&self) -> Vec<(String, u32, u32)> {
        lock(&self.stuck)
            .iter()
            .map(|(s, e)| {
                (
                    crate::cluster::assignment::COORDINATOR_KEY.to_owned(),
                    *s,
                    *e,
                )
            })
            .collect()
    }

    /// The slot of `group_id` if this broker coordinates it, else the
    /// error to answer.
    pub fn slot_for(&self, group_id: &str) -> Result<Arc<Slot>, i16> {
        match lock(&self.slots).get(&slot_of(group_id)) {
            Some(s) if !s.is_fenced() => Ok(s.clone()),
            _ => Err(code(ResponseError::NotCoordinator)),
        }
    }

    pub fn led(&self) -> Vec<Arc<Slot>> {
        lock(&self.slots).values().cloned().collect()
    }

    /// Takes over the slots the assignment gives this broker and lets go of
    /// the others (and of fenced ones). A failed takeover is retried at the
    /// next call.
    pub async fn sync(&self, a: &Assignment) {
        let mine: BTreeMap<u32, u32> = a
            .coordinators
            .iter()
            .filter(|(_, l)| l.leader == self.broker)
            .map(|(s, l)| (*s, l.leader_epoch))
            .collect();
        let held: Vec<Arc<Slot>> = self.led();
        for s in held {
            if mine.get(&s.slot) != Some(&s.epoch) || s.is_fenced() {
                lock(&self.slots).remove(&s.slot);
                tracing::info!(slot = s.slot, epoch = s.epoch, "no longer coordinating");
                // Waiting joins and syncs are answered by their senders
                // being dropped: the clients look for the new coordinator.
                // In a task of its own: a request may hold the slot's
                // groups while it waits on the volume, and the broker's
                // follow loop must not wait for it.
                tokio::spawn(async move {
                    s.groups.lock().await.clear();
                    s.txns.lock().await.clear();
                });
            }
        }
        lock(&self.stuck).retain(|(s, e)| mine.get(s) == Some(e));
        // All at once (16 slots at most): a slot's takeover reads every
        // group and transaction file of the slot.
        let todo = mine.into_iter().filter(|(slot, epoch)| {
            !lock(&self.slots).contains_key(slot) && !lock(&self.stuck).contains(&(*slot, *epoch))
        });
        join_all(todo.map(|(slot, epoch)| self.take_over(slot, epoch))).await;
    }

    async fn take_over(&self, slot: u32, epoch: u32) {
        let began = tokio::time::Instant::now();
        let taken = Slot::take_over(self.vfs.clone(), slot, epoch, &self.token).await;
        self.metrics
            .takeover("coordinator_slot", began.elapsed(), taken.is_ok());
        match taken {
            Ok(s) => {
                lock(&self.slots).insert(slot, Arc::new(s));
                // Prepared transactions it found are driven to their end.
                self.txn_decided.notify_one();
            }
            Err(e) => {
                tracing::warn!(slot, epoch, error = %e, "coordinator takeover failed; asking for a new epoch");
                lock(&self.stuck).insert((slot, epoch));
            }
        }
    }

    /// Drives session timeouts and rebalance deadlines until the process
    /// ends; spawned once per broker.
    pub(crate) async fn run_timers(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            for s in self.led() {
                s.tick(&self.config).await;
            }
        }
    }
}
