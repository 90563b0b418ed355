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
}

impl Assignment {
    pub fn leadership(&self, topic_id: &str, partition: u32) -> Option<Leadership> {
        self.partitions
            .iter()
            .find(|(t, p, _)| t == topic_id && *p == partition)
            .map(|(_, _, l)| *l)
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
        return crate::historical::torn_assignment::write(vfs, a).await;
    }
    crate::stored::write_json(vfs, &path(a.controller_epoch), KIND, a).await
}

/// The assignment of controller epoch `epoch`, if it wrote one (fresh read).
pub async fn read(vfs: &dyn Vfs, epoch: u32) -> io::Result<Option<Assignment>> {
    let p = path(epoch);
    let a: Option<Assignment> = crate::stored::read_json(vfs, &p, KIND).await?;
    if let Some(a) = &a {
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
    /// it had if that is not newer.
    pub async fn refresh(&mut self, vfs: &dyn Vfs) -> io::Result<Option<&Assignment>> {
        #[cfg(madsim)]
        if crate::historical::on("torn-assignment") {
            if let Some(a) = crate::historical::torn_assignment::read(vfs).await? {
                self.latest = Some(a);
            }
            return Ok(self.latest.as_ref());
        }
        let from = self.latest.as_ref().map_or(0, |a| a.controller_epoch);
        let newest = election::newest_epoch(vfs, from).await?;
        for epoch in (from.max(1)..=newest).rev() {
            if let Some(a) = read(vfs, epoch).await? {
                if self.latest.as_ref().is_none_or(|cur| a.supersedes(cur)) {
                    self.latest = Some(a);
                }
                break;
            }
        }
        Ok(self.latest.as_ref())
    }
}
