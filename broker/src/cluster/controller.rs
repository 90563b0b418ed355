//! The controller loop every broker runs: follow the controller, take over
//! when it is gone, and, as controller, keep the assignment current.
//!
//! Safety comes from the volume: one claim per controller epoch, and readers
//! that only accept the newest epoch's assignment. Clocks only decide when
//! to act: a broker counts another as dead when its heartbeat has not
//! changed for `session_timeout` of *this* broker's clock.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use vfs::Vfs;
use vfs::durable::ClaimToken;

use super::assignment::{self, Assignment, AssignmentReader, BrokerEntry};
use super::election::{self, Holder};
use super::placement::{self, Leadership, PartitionKey};
use super::preferred::PreferredReader;
use crate::cluster::heartbeat;
use crate::layout::BROKERS_DIR;
use crate::log::{names, topic};

/// What this broker is after a tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Controller { epoch: u32 },
    Follower { epoch: u32, controller: Option<u32> },
}

struct Seen {
    incarnation: u64,
    sequence: u64,
    advertised: String,
    endpoints: BTreeMap<String, String>,
    leaving: bool,
    stuck: Vec<(String, u32, u32)>,
    /// The newest epochs claimed past stuck partitions' own.
    claimed_past: Vec<(String, u32, u32)>,
    /// Partitions it holds offline in their epoch (damaged files).
    offline: Vec<(String, u32, u32)>,
    /// Topics it created that the assignment may not name yet.
    created: Vec<String>,
    changed: Instant,
}

pub struct ControllerAgent {
    vfs: Arc<dyn Vfs>,
    broker: u32,
    token: ClaimToken,
    session_timeout: Duration,
    seen: BTreeMap<u32, Seen>,
    known_epoch: u32,
    /// When this broker first saw the newest epoch without a live holder.
    orphaned_since: Option<(u32, Instant)>,
    reader: AssignmentReader,
    leaving: bool,
    /// Every partition, as last listed, and when: the controller lists the
    /// topics at most once per [`LIST_TOPICS_EVERY`], not at every tick.
    partitions: Option<(Instant, BTreeSet<PartitionKey>)>,
    /// Topics the last listing found without partitions to place (a name
    /// not confirmed, a meta gone): looked at again at the next listing,
    /// not at every tick.
    passed_over: BTreeSet<String>,
    /// The operator's preferred leaders, as last read, and when: read as
    /// often as the topics are listed.
    preferred: PreferredReader,
    preferred_read: Option<Instant>,
}

/// How stale the controller's list of topics may get: a new topic gets its
/// leaders, a deleted one loses them, within this (plus a tick).
const LIST_TOPICS_EVERY: Duration = Duration::from_secs(1);

impl ControllerAgent {
    pub fn new(vfs: Arc<dyn Vfs>, broker: u32, session_timeout: Duration) -> Self {
        Self {
            vfs,
            broker,
            token: ClaimToken::fresh(&format!("broker-{broker}")),
            session_timeout,
            seen: BTreeMap::new(),
            known_epoch: 0,
            orphaned_since: None,
            reader: AssignmentReader::default(),
            leaving: false,
            partitions: None,
            passed_over: BTreeSet::new(),
            preferred: super::preferred::reader(),
            preferred_read: None,
        }
    }

    /// The newest assignment this broker has read (never older than before).
    pub fn assignment(&self) -> Option<&Assignment> {
        self.reader.latest()
    }

    /// The next tick, as controller, lists the topics and reads the
    /// preferred leaders afresh: this broker just created topics or moved
    /// partitions.
    pub fn relist_topics(&mut self) {
        self.partitions = None;
        self.preferred_read = None;
    }

    pub async fn tick(&mut self) -> io::Result<Role> {
        let now = Instant::now();
        self.observe_heartbeats(now).await?;
        let v = self.vfs.clone();
        let epoch = election::newest_epoch(v.as_ref(), self.known_epoch).await?;
        self.known_epoch = epoch;
        let holder = match epoch {
            0 => None,
            e => Some(election::holder(v.as_ref(), e, &self.token).await?),
        };
        let role = match holder {
            Some(Holder::Me) => {
                self.orphaned_since = None;
                self.act_as_controller(epoch, now).await?
            }
            // This broker's own previous process: that controller is gone.
            Some(Holder::Broker(b)) if b == self.broker => {
                self.orphaned_since = None;
                self.take_over(epoch, now).await?
            }
            Some(Holder::Broker(b)) if self.is_live(b, now) => {
                self.orphaned_since = None;
                Role::Follower {
                    epoch,
                    controller: Some(b),
                }
            }
            Some(Holder::Broker(b)) => {
                let silent_since = self.seen.get(&b).map(|s| s.changed);
                self.maybe_take_over(epoch, now, silent_since).await?
            }
            _ => self.maybe_take_over(epoch, now, None).await?,
        };
        self.reader.refresh(v.as_ref()).await?;
        Ok(role)
    }

    /// The newest epoch has no live controller: once it has been silent for
    /// a session timeout of this broker's clock, claim the next epoch. The
    /// silence of a holder whose heartbeat this broker watched counts from
    /// its last change (it is not live, so that was a session timeout ago:
    /// no second wait); an epoch without a known holder (undecided, or a
    /// holder never seen) is waited for from the moment it was found so.
    async fn maybe_take_over(
        &mut self,
        epoch: u32,
        now: Instant,
        silent_since: Option<Instant>,
    ) -> io::Result<Role> {
        let since = match self.orphaned_since {
            Some((e, t)) if e == epoch => t,
            _ => {
                let t = silent_since.unwrap_or(now);
                self.orphaned_since = Some((epoch, t));
                t
            }
        };
        // A brand-new cluster (no epoch yet) has nobody to wait for, and a
        // controller that announced its shutdown is not waited for either.
        let holder_left = match epoch {
            0 => true,
            e => matches!(
                election::holder(self.vfs.as_ref(), e, &self.token).await?,
                Holder::Broker(b) if self.is_leaving(b)
            ),
        };
        if self.leaving || (!holder_left && now.duration_since(since) < self.session_timeout) {
            return Ok(Role::Follower {
                epoch,
                controller: None,
            });
        }
        self.take_over(epoch, now).await
    }

    /// Claims the epoch after `epoch`.
    async fn take_over(&mut self, epoch: u32, now: Instant) -> io::Result<Role> {
        let next = epoch + 1;
        let v = self.vfs.clone();
        // Between finding the newest epoch and claiming the next one, a
        // rival may claim it first: the claim, not this choice, decides.
        vfs::fault_point!(v, "election.next-chosen");
        match election::try_claim(v.as_ref(), next, self.broker, &self.token).await? {
            Holder::Me => {
                tracing::info!(broker = self.broker, epoch = next, "became controller");
                self.known_epoch = next;
                self.orphaned_since = None;
                self.act_as_controller(next, now).await
            }
            Holder::Broker(b) => {
                self.known_epoch = next;
                Ok(Role::Follower {
                    epoch: next,
                    controller: Some(b),
                })
            }
            Holder::Undecided => {
                self.known_epoch = next;
                self.orphaned_since = Some((next, now));
                Ok(Role::Follower {
                    epoch: next,
                    controller: None,
                })
            }
        }
    }

    async fn act_as_controller(&mut self, epoch: u32, now: Instant) -> io::Result<Role> {
        let v = self.vfs.clone();
        // Until this epoch wrote its own, start from the newest assignment
        // on the volume, read now (after this epoch's claim), even a version
        // readers no longer follow: one a reader followed is never newer.
        let previous = match self.reader.refresh(v.as_ref()).await?.cloned() {
            Some(p) if p.controller_epoch == epoch => Some(p),
            followed => {
                let from = followed.as_ref().map_or(0, |a| a.controller_epoch);
                match assignment::newest_written(v.as_ref(), from, epoch).await? {
                    Some(a) if followed.as_ref().is_none_or(|f| a.supersedes(f)) => Some(a),
                    _ => followed,
                }
            }
        };
        let live = self.live_brokers(now);
        if live.is_empty() {
            // Nobody to lead anything (this controller is leaving, alone):
            // the last assignment, naming the processes that held the
            // partitions, stays as it is for whoever starts next.
            return Ok(Role::Controller { epoch });
        }
        let partitions = self.known_partitions(now, previous.as_ref()).await?;
        if self
            .preferred_read
            .is_none_or(|at| now.duration_since(at) >= LIST_TOPICS_EVERY)
        {
            match self.preferred.refresh(v.as_ref()).await {
                Ok(_) => self.preferred_read = Some(now),
                Err(e) => {
                    tracing::warn!(error = %e, "preferred leaders unreadable; keeping the ones read before")
                }
            }
        }
        let brokers = self.entries(&live);
        let placed = self.place(previous.as_ref(), &live, &brokers, &partitions);
        let cluster_id = match previous.as_ref().map(|p| p.cluster_id.clone()) {
            Some(id) if !id.is_empty() => id,
            _ => assignment::ensure_cluster_id(v.as_ref(), self.broker).await?,
        };
        let offline = self.offline(&live, &placed);
        let unchanged = previous.as_ref().is_some_and(|p| {
            p.controller_epoch == epoch
                && p.as_map() == placed
                && p.brokers == brokers
                && p.offline == offline
        });
        if unchanged {
            return Ok(Role::Controller { epoch });
        }
        // Still the newest controller? A newer one makes this write moot
        // (readers ignore older epochs), so skip it.
        if election::newest_epoch(v.as_ref(), epoch).await? != epoch {
            return Ok(Role::Follower {
                epoch,
                controller: None,
            });
        }
        vfs::fault_point!(v, "assignment.still-newest");
        let version = match &previous {
            Some(p) if p.controller_epoch == epoch => p.version + 1,
            _ => 1,
        };
        let (slots, topics): (Vec<_>, Vec<_>) = placed
            .into_iter()
            .partition(|((t, _), _)| t == assignment::COORDINATOR_KEY);
        let next = Assignment {
            controller_epoch: epoch,
            version,
            controller: self.broker,
            brokers,
            partitions: topics.into_iter().map(|((t, p), l)| (t, p, l)).collect(),
            cluster_id,
            coordinators: slots.into_iter().map(|((_, s), l)| (s, l)).collect(),
            offline,
        };
        assignment::write(v.as_ref(), &next).await?;
        if version == 1 {
            // How long a new controller took to its first assignment: part
            // of every failover of a controller's host.
            tracing::info!(
                epoch,
                millis = now.elapsed().as_millis() as u64,
                partitions = next.partitions.len(),
                "first assignment of this controller epoch written"
            );
        }
        Ok(Role::Controller { epoch })
    }

    /// Partitions a live broker reports holding offline in the epoch it
    /// still leads them in, sorted.
    fn offline(
        &self,
        live: &BTreeSet<u32>,
        placed: &BTreeMap<PartitionKey, Leadership>,
    ) -> Vec<(String, u32)> {
        let mut offline: Vec<(String, u32)> = live
            .iter()
            .filter_map(|b| self.seen.get(b).map(|s| (b, s)))
            .flat_map(|(b, s)| {
                s.offline.iter().filter(move |(t, p, e)| {
                    placed
                        .get(&(t.clone(), *p))
                        .is_some_and(|l| l.leader == *b && l.leader_epoch == *e)
                })
            })
            .map(|(t, p, _)| (t.clone(), *p))
            .collect();
        offline.sort();
        offline.dedup();
        offline
    }

    /// The brokers to place leaders on: every live one, this one unless it
    /// is leaving.
    fn live_brokers(&self, now: Instant) -> BTreeSet<u32> {
        self.seen
            .keys()
            .copied()
            .filter(|&b| {
                if b == self.broker {
                    !self.leaving
                } else {
                    self.is_live(b, now)
                }
            })
            .collect()
    }

    /// Every topic partition on the volume, listed at most every
    /// `LIST_TOPICS_EVERY`, and at once when a topic appears that the last
    /// listing lacks: in the directory, or announced by the broker that
    /// created it (whose listing this broker's NFS client may not show for
    /// a minute). A topic whose meta is unreadable now keeps the partitions
    /// the last listing or the last assignment had for it.
    async fn known_partitions(
        &mut self,
        now: Instant,
        previous: Option<&Assignment>,
    ) -> io::Result<BTreeSet<PartitionKey>> {
        let announced = self.announced_topics();
        if let Some((at, p)) = &self.partitions {
            let fresh = now.duration_since(*at) < LIST_TOPICS_EVERY;
            let unknown = |id: &String| !self.passed_over.contains(id) && !has_topic(p, id);
            if fresh && !announced.iter().any(unknown) && !self.new_topic_dirs(p).await? {
                return Ok(p.clone());
            }
        }
        let mut before: BTreeSet<PartitionKey> = self
            .partitions
            .as_ref()
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        if let Some(a) = previous {
            before.extend(a.partitions.iter().map(|(t, p, _)| (t.clone(), *p)));
        }
        let (p, passed_over) = list_partitions(self.vfs.as_ref(), &before, &announced).await?;
        self.partitions = Some((now, p.clone()));
        self.passed_over = passed_over;
        Ok(p)
    }

    /// The topics live brokers announce as created by them.
    fn announced_topics(&self) -> BTreeSet<String> {
        self.seen
            .values()
            .filter(|s| !s.leaving)
            .flat_map(|s| s.created.iter())
            // A hint from a file: only plain names are looked up.
            .filter(|id| is_topic_dir(id) && !id.contains('/'))
            .cloned()
            .collect()
    }

    /// Whether the topics directory holds a topic that `listed` lacks and
    /// the last listing did not pass over: one read of the directory per
    /// tick, so that a topic this broker's client sees appear gets its
    /// leaders within a tick, not a whole listing later.
    async fn new_topic_dirs(&self, listed: &BTreeSet<PartitionKey>) -> io::Result<bool> {
        let listing = match self.vfs.read_dir(Path::new(topic::TOPICS_DIR)).await {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        // One set for the whole listing: this runs at every tick.
        let ids: BTreeSet<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
        Ok(listing.iter().any(|e| {
            is_topic_dir(&e.name)
                && !self.passed_over.contains(&e.name)
                && !ids.contains(e.name.as_str())
        }))
    }

    /// The assignment's broker table: where clients reach each live broker
    /// and which process (incarnation) it is.
    fn entries(&self, live: &BTreeSet<u32>) -> BTreeMap<u32, BrokerEntry> {
        live.iter()
            .filter_map(|b| {
                self.seen.get(b).map(|s| {
                    let entry = BrokerEntry {
                        advertised: s.advertised.clone(),
                        incarnation: s.incarnation,
                        endpoints: s.endpoints.clone(),
                    };
                    (*b, entry)
                })
            })
            .collect()
    }

    /// Leaders for every partition and coordinator slot, spread evenly each
    /// on their own; a restarted broker's leaderships get new epochs, and a
    /// leader that reports it can never hold its epoch gets the next.
    fn place(
        &self,
        previous: Option<&Assignment>,
        live: &BTreeSet<u32>,
        brokers: &BTreeMap<u32, BrokerEntry>,
        partitions: &BTreeSet<PartitionKey>,
    ) -> BTreeMap<PartitionKey, Leadership> {
        let slots: BTreeSet<PartitionKey> = (0..assignment::COORDINATOR_SLOTS)
            .map(|s| (assignment::COORDINATOR_KEY.to_owned(), s))
            .collect();
        let prev_map = previous.map(Assignment::as_map).unwrap_or_default();
        let restarted: BTreeSet<u32> = previous
            .iter()
            .flat_map(|p| p.brokers.iter())
            .filter(|(b, e)| {
                brokers
                    .get(b)
                    .is_some_and(|now| now.incarnation != e.incarnation)
            })
            .map(|(b, _)| *b)
            .collect();
        let preferred = self.preferred.get().1.as_map();
        let mut placed =
            placement::place_preferring(&prev_map, live, &restarted, partitions, &preferred);
        let none = BTreeMap::new();
        placed.extend(placement::place_preferring(
            &prev_map, live, &restarted, &slots, &none,
        ));
        for b in live {
            let Some(seen) = self.seen.get(b) else {
                continue;
            };
            for (key, index, epoch) in &seen.stuck {
                if let Some(l) = placed.get_mut(&(key.clone(), *index)) {
                    if l.leader == *b && l.leader_epoch == *epoch {
                        let past = seen
                            .claimed_past
                            .iter()
                            .filter(|(k, i, _)| k == key && i == index)
                            .map(|(_, _, newest)| *newest)
                            .max()
                            .unwrap_or(0);
                        l.leader_epoch = l.leader_epoch.max(past).saturating_add(1);
                    }
                }
            }
        }
        placed
    }

    async fn observe_heartbeats(&mut self, now: Instant) -> io::Result<()> {
        let v = self.vfs.clone();
        let listing = match v.read_dir(Path::new(BROKERS_DIR)).await {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in listing {
            let Ok(id) = entry.name.parse::<u32>() else {
                continue;
            };
            let Ok(hb) = heartbeat::read(v.as_ref(), id).await else {
                continue; // torn, in flight or gone: judged by what was seen before
            };
            let changed = match self.seen.get(&id) {
                Some(s) if s.incarnation == hb.incarnation && s.sequence == hb.sequence => {
                    s.changed
                }
                _ => now,
            };
            self.seen.insert(
                id,
                Seen {
                    incarnation: hb.incarnation,
                    sequence: hb.sequence,
                    advertised: hb.advertised,
                    endpoints: hb.endpoints,
                    leaving: hb.leaving,
                    stuck: hb.stuck,
                    claimed_past: hb.claimed_past,
                    offline: hb.offline,
                    created: hb.created,
                    changed,
                },
            );
        }
        Ok(())
    }

    fn is_live(&self, broker: u32, now: Instant) -> bool {
        self.seen
            .get(&broker)
            .is_some_and(|s| !s.leaving && now.duration_since(s.changed) < self.session_timeout)
    }

    fn is_leaving(&self, broker: u32) -> bool {
        self.seen.get(&broker).is_some_and(|s| s.leaving)
    }

    /// Controlled shutdown: from now on this broker counts itself gone, so
    /// as controller it moves its own partitions away.
    pub fn leave(&mut self) {
        self.leaving = true;
    }
}

fn is_topic_dir(name: &str) -> bool {
    !name.starts_with('.') && name != "names"
}

fn has_topic(listed: &BTreeSet<PartitionKey>, id: &str) -> bool {
    listed
        .range((id.to_owned(), 0)..)
        .next()
        .is_some_and(|(t, _)| t == id)
}

/// Every partition of every topic in the listing of `topics/`, in
/// `announced` or in `before`, and the topics passed over: named nowhere
/// yet, or gone meanwhile. The listing may lag by a minute on NFS, both
/// ways: a topic another broker created may be missing from it, and a
/// deleted one still in it. So each topic's meta is read by path (a fresh
/// open): a known or announced topic is placed even while the listing lacks
/// it (else it would lose its leaders at every listing until the cache
/// expires), and a deleted one is dropped.
/// A topic whose meta cannot be read now (EIO, a torn or foreign file)
/// keeps the partitions `before` knew of it: one unreadable topic must not
/// stop the controller, which would then move no partition of any topic.
async fn list_partitions(
    vfs: &dyn Vfs,
    before: &BTreeSet<PartitionKey>,
    announced: &BTreeSet<String>,
) -> io::Result<(BTreeSet<PartitionKey>, BTreeSet<String>)> {
    let mut out = BTreeSet::new();
    let mut passed_over = BTreeSet::new();
    let listing = match vfs.read_dir(Path::new(topic::TOPICS_DIR)).await {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((out, passed_over)),
        Err(e) => return Err(e),
    };
    let known: BTreeSet<&str> = before.iter().map(|(id, _)| id.as_str()).collect();
    let mut holders = names::Holders::default();
    let mut ids: BTreeSet<&str> = listing
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| is_topic_dir(n))
        .collect();
    ids.extend(announced.iter().map(String::as_str));
    ids.extend(known.iter().copied());
    for id in ids {
        match topic::read_meta(vfs, id).await {
            // A new topic gets leaders only once its name is durably its own:
            // until then (not claimed yet, lost the name, or the claim not
            // confirmable now) it is left for a later listing.
            Ok(meta) if !known.contains(meta.id.as_str()) => {
                match names::confirm(vfs, &meta.name, &meta.id, &mut holders).await {
                    Ok(true) => out.extend((0..meta.partitions).map(|p| (meta.id.clone(), p))),
                    Ok(false) => {
                        passed_over.insert(id.to_owned());
                        tracing::debug!(topic_id = %meta.id, name = %meta.name, "topic not named (yet); no leaders for it")
                    }
                    Err(e) => {
                        passed_over.insert(id.to_owned());
                        tracing::warn!(topic_id = %meta.id, error = %e, "topic name not confirmed; no leaders for it yet")
                    }
                }
            }
            Ok(meta) => out.extend((0..meta.partitions).map(|p| (meta.id.clone(), p))),
            // Deleted meanwhile, or an announced id never made after all.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                passed_over.insert(id.to_owned());
            }
            Err(e) => {
                tracing::warn!(topic_id = %id, error = %e, "topic meta unreadable; its partitions stay as they were");
                out.extend(before.iter().filter(|(t, _)| t == id).cloned());
            }
        }
    }
    Ok((out, passed_over))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use vfs::OpenOptions;

    #[tokio::test]
    async fn a_new_topic_gets_partitions_only_once_its_name_is_its_own() {
        let v = vfs::MemVfs::new();
        v.mkdir(Path::new(topic::TOPICS_DIR)).await.unwrap();
        v.mkdir(Path::new(crate::layout::NAMES_DIR)).await.unwrap();
        let named = topic::create_topic(&v, "named", 2).await.unwrap();
        let unnamed = topic::create_topic(&v, "unnamed", 1).await.unwrap();
        // Its name released: a topic directory no name leads to.
        assert!(names::release(&v, "unnamed", &unnamed.id).await.unwrap());
        let (listed, passed_over) = list_partitions(&v, &BTreeSet::new(), &BTreeSet::new())
            .await
            .unwrap();
        assert_eq!(passed_over, [unnamed.id.clone()].into());
        let want: BTreeSet<PartitionKey> = (0..2).map(|p| (named.id.clone(), p)).collect();
        assert_eq!(listed, want);
        // A topic an earlier listing knew keeps its partitions.
        let before: BTreeSet<PartitionKey> = [(unnamed.id.clone(), 0)].into();
        let (listed, _) = list_partitions(&v, &before, &BTreeSet::new())
            .await
            .unwrap();
        assert!(listed.contains(&(unnamed.id.clone(), 0)));
    }

    #[tokio::test]
    async fn an_unreadable_topic_meta_keeps_its_partitions_and_spares_the_others() {
        let v = vfs::MemVfs::new();
        v.mkdir(Path::new(topic::TOPICS_DIR)).await.unwrap();
        v.mkdir(Path::new(crate::layout::NAMES_DIR)).await.unwrap();
        let good = topic::create_topic(&v, "good", 2).await.unwrap();
        let torn = topic::create_topic(&v, "torn", 3).await.unwrap();
        let before: BTreeSet<PartitionKey> = (0..3).map(|p| (torn.id.clone(), p)).collect();
        let meta = crate::layout::topic_meta(&torn.id);
        let f = v.open(&meta, OpenOptions::write()).await.unwrap();
        f.write_at(0, Bytes::from_static(b"\0\0\0garbage"))
            .await
            .unwrap();
        f.close().await.unwrap();
        let (listed, _) = list_partitions(&v, &before, &BTreeSet::new())
            .await
            .unwrap();
        let want: BTreeSet<PartitionKey> = (0..2)
            .map(|p| (good.id.clone(), p))
            .chain(before.iter().cloned())
            .collect();
        assert_eq!(listed, want);
    }

    /// The controller's NFS client answers its listing of `topics/` from
    /// its cache while the directory's attributes are fresh (30-60 s): a
    /// topic another broker created is found through its announced id.
    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn an_announced_topic_is_placed_before_the_listing_shows_it() {
        use vfs::model::{ModelNfs, NfsConfig};
        let nfs = ModelNfs::new(NfsConfig::default(), 1);
        let (creator, controller) = (nfs.host(1), nfs.host(2));
        creator.mkdir(Path::new(topic::TOPICS_DIR)).await.unwrap();
        creator
            .mkdir(Path::new(crate::layout::NAMES_DIR))
            .await
            .unwrap();
        let old = topic::create_topic(&creator, "old", 1).await.unwrap();
        let (none, nothing) = (BTreeSet::new(), BTreeSet::new());
        let (before, _) = list_partitions(&controller, &none, &nothing).await.unwrap();
        assert!(has_topic(&before, &old.id));
        let new = topic::create_topic(&creator, "new", 2).await.unwrap();
        let (listed, _) = list_partitions(&controller, &before, &nothing)
            .await
            .unwrap();
        assert!(
            !has_topic(&listed, &new.id),
            "the cached listing lacks the new topic: the case announcements are for"
        );
        let announced = [new.id.clone(), "never-made".to_owned()].into();
        let (listed, passed_over) = list_partitions(&controller, &before, &announced)
            .await
            .unwrap();
        let want: BTreeSet<PartitionKey> = [
            (old.id.clone(), 0),
            (new.id.clone(), 0),
            (new.id.clone(), 1),
        ]
        .into();
        assert_eq!(listed, want);
        assert_eq!(passed_over, ["never-made".to_owned()].into());
        // Once placed it is known: it keeps its partitions while the
        // cached listing still lacks it and nobody announces it any more.
        let (relisted, _) = list_partitions(&controller, &listed, &nothing)
            .await
            .unwrap();
        assert_eq!(relisted, want);
        // A deleted topic is dropped though the cached listing has it.
        topic::delete_topic(&creator, &old).await.unwrap();
        let (after, passed_over) = list_partitions(&controller, &relisted, &nothing)
            .await
            .unwrap();
        assert!(!has_topic(&after, &old.id) && has_topic(&after, &new.id));
        assert!(passed_over.contains(&old.id));
    }

    #[tokio::test]
    async fn a_listing_walks_a_shared_names_generations_once() {
        let mem: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        mem.mkdir(Path::new(topic::TOPICS_DIR)).await.unwrap();
        mem.mkdir(Path::new(crate::layout::NAMES_DIR))
            .await
            .unwrap();
        // Six topics that once held "events" and let it go, then thirty
        // generations that creators began and never filled.
        for _ in 0..6 {
            let t = topic::create_topic(mem.as_ref(), "events", 1)
                .await
                .unwrap();
            assert!(names::release(mem.as_ref(), "events", &t.id).await.unwrap());
        }
        let first_empty = 13;
        for g in first_empty..first_empty + 30 {
            let slot = crate::layout::name_claim("events", g);
            let file = vfs::durable::create_slot(mem.as_ref(), &slot)
                .await
                .unwrap();
            file.unwrap().close().await.unwrap();
        }
        let counting = vfs::testkit::Counting::new(mem);
        let (listed, passed_over) = list_partitions(&counting, &BTreeSet::new(), &BTreeSet::new())
            .await
            .unwrap();
        assert!(listed.is_empty());
        assert_eq!(passed_over.len(), 6);
        // One walk down the thirty empty generations, not one per topic.
        let opens = counting.counts.get(&counting.counts.opens);
        assert!(opens < 80, "{opens} opens for six topics of one name");
    }
}
