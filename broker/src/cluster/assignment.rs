//! The assignment: who leads each partition, written by the controller.
//!
//! One file per controller epoch, `cluster/assignment-<epoch>`, replaced
//! atomically by that epoch's controller only. Readers take the newest
//! controller epoch that wrote one and never go back to an older epoch or
//! version, so a deposed controller's late writes (to its own, older file)
//! change nothing.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use vfs::Vfs;

use super::election;
use super::placement::{Leadership, PartitionKey};

#[cfg(madsim)]
#[path = "../historical/torn_assignment.rs"]
mod torn_assignment;

const KIND: &str = "assignment";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub controller_epoch: u32,
    /// Grows with every rewrite within one controller epoch.
    pub version: u64,
    pub controller: u32,
    /// Live brokers: the address clients should use and the process
    /// (heartbeat incarnation) the assignment was made for.
    pub brokers: BTreeMap<u32, BrokerEntry>,
    /// `(topic id, partition, leadership)`, sorted.
    pub partitions: Vec<(String, u32, Leadership)>,
    /// The cluster's id (Kafka's cluster.id), fixed when the volume's first
    /// controller wrote `cluster/id`.
    #[serde(default)]
    pub cluster_id: String,
    /// Coordinator slots `(slot, leadership)`, sorted: the slot of a group
    /// or transactional id is a hash of it (see `groups::slot_of`), and the
    /// leader epoch of a slot is its coordinator epoch.
    #[serde(default)]
    pub coordinators: Vec<(u32, Leadership)>,
    /// `(topic id, partition)` of partitions whose leader holds them
    /// offline in their epoch (their files on the volume are damaged),
    /// sorted: Metadata names no leader for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline: Vec<(String, u32)>,
}

/// How many coordinator slots the cluster has. Fixed: a group's slot must
/// not change while it has state on the volume.
pub const COORDINATOR_SLOTS: u32 = 16;

/// The placement key of coordinator slot `slot`; not a topic id (those are
/// UUIDs), so it never collides with a partition.
pub(crate) const COORDINATOR_KEY: &str = "__coordinator";

/// The cluster id stored on the volume. Every broker settles it at
/// start-up (`identity::settle`), before its controller agent runs; this
/// settles it too for callers that skipped that (tests driving an agent
/// directly).
pub(crate) async fn ensure_cluster_id(vfs: &dyn Vfs, broker: u32) -> io::Result<String> {
    match super::identity::read(vfs).await? {
        Some(id) => Ok(id),
        None => super::identity::settle(vfs, broker, None).await,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEntry {
    pub advertised: String,
    pub incarnation: u64,
    /// Listener name -> advertised address, for brokers with several
    /// listeners; empty for one listener (then `advertised` serves all).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endpoints: BTreeMap<String, String>,
}

impl crate::log::staging::LiveBrokers for BTreeMap<u32, BrokerEntry> {
    fn incarnation(&self, broker: u32) -> Option<u64> {
        self.get(&broker).map(|e| e.incarnation)
    }
}

impl BrokerEntry {
    /// Where a client of `listener` reaches this broker: `None` if the
    /// broker has no such listener (Kafka leaves it out of Metadata).
    pub fn endpoint(&self, listener: &str) -> Option<&str> {
        if self.endpoints.is_empty() {
            Some(&self.advertised)
        } else {
            self.endpoints.get(listener).map(String::as_str)
        }
    }
}

impl Assignment {
    /// A binary search: Metadata asks this for every partition, and a scan
    /// made a full Metadata quadratic in the partition count.
    pub fn leadership(&self, topic_id: &str, partition: u32) -> Option<Leadership> {
        self.partitions
            .binary_search_by(|(t, p, _)| (t.as_str(), *p).cmp(&(topic_id, partition)))
            .ok()
            .map(|i| self.partitions[i].2)
    }

    /// Partitions and coordinator slots, keyed for placement.
    pub(crate) fn as_map(&self) -> BTreeMap<PartitionKey, Leadership> {
        self.partitions
            .iter()
            .map(|(t, p, l)| ((t.clone(), *p), *l))
            .chain(
                self.coordinators
                    .iter()
                    .map(|(s, l)| ((COORDINATOR_KEY.to_owned(), *s), *l)),
            )
            .collect()
    }

    /// Whether the leader of `(topic, partition)` holds it offline.
    pub fn is_offline(&self, topic_id: &str, partition: u32) -> bool {
        self.offline
            .binary_search_by(|(t, p)| (t.as_str(), *p).cmp(&(topic_id, partition)))
            .is_ok()
    }

    pub fn coordinator(&self, slot: u32) -> Option<Leadership> {
        self.coordinators
            .iter()
            .find(|(s, _)| *s == slot)
            .map(|(_, l)| *l)
    }

    /// How many partitions and coordinator slots `broker` leads.
    pub(crate) fn led_by(&self, broker: u32) -> usize {
        self.partitions
            .iter()
            .map(|(_, _, l)| l)
            .chain(self.coordinators.iter().map(|(_, l)| l))
            .filter(|l| l.leader == broker)
            .count()
    }

    /// Newer than `other` in (controller epoch, version) order.
    pub fn supersedes(&self, other: &Assignment) -> bool {
        (self.controller_epoch, self.version) > (other.controller_epoch, other.version)
    }
}

pub fn path(controller_epoch: u32) -> PathBuf {
    crate::layout::assignment(controller_epoch)
}

pub async fn write(vfs: &dyn Vfs, a: &Assignment) -> io::Result<()> {
    #[cfg(madsim)]
    if crate::historical::on("torn-assignment") {
        return torn_assignment::write(vfs, a).await;
    }
    crate::stored::write_json(vfs, &path(a.controller_epoch), KIND, a).await
}

/// The assignment of controller epoch `epoch`, if it wrote one (fresh read).
pub async fn read(vfs: &dyn Vfs, epoch: u32) -> io::Result<Option<Assignment>> {
    let p = path(epoch);
    let mut a: Option<Assignment> = crate::stored::read_json(vfs, &p, KIND).await?;
    if let Some(a) = &mut a {
        // Controllers write them sorted; lookups rely on it.
        if !a.partitions.is_sorted_by(|x, y| (&x.0, x.1) <= (&y.0, y.1)) {
            a.partitions.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
        }
        if a.controller_epoch != epoch {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} says controller epoch {}",
                    p.display(),
                    a.controller_epoch
                ),
            ));
        }
    }
    Ok(a)
}

/// Follows the assignment and never moves backwards.
#[derive(Default)]
pub struct AssignmentReader {
    latest: Option<Assignment>,
}

impl AssignmentReader {
    pub fn latest(&self) -> Option<&Assignment> {
        self.latest.as_ref()
    }

    /// Reads the newest assignment: finds the newest controller epoch, then
    /// walks down to the newest epoch that wrote an assignment. Keeps what
    /// it had unless that one is newer and, by a fresh look made after
    /// reading it, its controller epoch is still the newest claimed one: a
    /// deposed controller's write that lands after its successor claimed the
    /// next epoch is never followed. The successor reads its predecessor's
    /// assignment after its claim (`newest_written`), so its first
    /// assignment starts from every version a reader may have followed and
    /// no leader epoch a client was told goes back.
    pub async fn refresh(&mut self, vfs: &dyn Vfs) -> io::Result<Option<&Assignment>> {
        #[cfg(madsim)]
        if crate::historical::on("torn-assignment") {
            if let Some(a) = torn_assignment::read(vfs).await? {
                self.latest = Some(a);
            }
            return Ok(self.latest.as_ref());
        }
        let from = self.latest.as_ref().map_or(0, |a| a.controller_epoch);
        let newest = election::newest_epoch(vfs, from).await?;
        if let Some(a) = newest_written(vfs, from, newest).await? {
            if self.latest.as_ref().is_none_or(|cur| a.supersedes(cur))
                && election::newest_epoch(vfs, newest).await? == a.controller_epoch
            {
                self.latest = Some(a);
            }
        }
        Ok(self.latest.as_ref())
    }
}

/// The assignment of the newest controller epoch in `from..=upto` that
/// wrote one (fresh reads), whatever epochs were claimed since: what a new
/// controller of the epoch after `upto` starts from.
pub async fn newest_written(vfs: &dyn Vfs, from: u32, upto: u32) -> io::Result<Option<Assignment>> {
    for epoch in (from.max(1)..=upto).rev() {
        if let Some(a) = read(vfs, epoch).await? {
            return Ok(Some(a));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::election::{self, Holder};
    use vfs::durable::ClaimToken;

    fn leading(controller_epoch: u32, version: u64, leader: u32, epoch: u32) -> Assignment {
        Assignment {
            controller_epoch,
            version,
            controller: controller_epoch - 1,
            partitions: vec![(
                "t".to_owned(),
                0,
                Leadership {
                    leader,
                    leader_epoch: epoch,
                },
            )],
            ..Assignment::default()
        }
    }

    /// Seed 97 of the swarm: a controller held between its "still the
    /// newest?" check and its write moved a partition after its successor
    /// had claimed the next epoch and read the assignment; brokers followed
    /// the late version, then the successor's, and told clients an older
    /// leader epoch than before.
    #[tokio::test]
    async fn a_version_written_after_the_next_epoch_was_claimed_is_not_followed() {
        let v = vfs::MemVfs::new();
        crate::node::prepare_volume(&v).await.unwrap();
        let first = ClaimToken::fresh("broker-0");
        let second = ClaimToken::fresh("broker-1");
        assert_eq!(
            election::try_claim(&v, 1, 0, &first).await.unwrap(),
            Holder::Me
        );
        write(&v, &leading(1, 1, 0, 1)).await.unwrap();
        let mut reader = AssignmentReader::default();
        reader.refresh(&v).await.unwrap();
        assert_eq!(reader.latest(), Some(&leading(1, 1, 0, 1)));

        assert_eq!(
            election::try_claim(&v, 2, 1, &second).await.unwrap(),
            Holder::Me
        );
        // The deposed controller's late move, then its successor's view.
        write(&v, &leading(1, 2, 1, 2)).await.unwrap();
        reader.refresh(&v).await.unwrap();
        assert_eq!(reader.latest(), Some(&leading(1, 1, 0, 1)));
        let mut fresh = AssignmentReader::default();
        assert_eq!(fresh.refresh(&v).await.unwrap(), None);
        let start = newest_written(&v, 1, 2).await.unwrap();
        assert_eq!(start, Some(leading(1, 2, 1, 2)), "the successor sees it");

        // The successor's first assignment is followed by everyone.
        write(&v, &leading(2, 1, 1, 2)).await.unwrap();
        for r in [&mut reader, &mut fresh] {
            r.refresh(&v).await.unwrap();
            assert_eq!(r.latest(), Some(&leading(2, 1, 1, 2)));
        }
    }
}
