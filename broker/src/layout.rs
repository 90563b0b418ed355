//! Where things live on the shared volume, and who writes each of them: the
//! one home of every top-level directory and path name. Modules build their
//! paths from these; CONTRIBUTING's table "Files on the volume and their
//! writers" says how each file changes.
//!
//! ```text
//! <volume>/
//!   brokers/<id>                        heartbeat; only broker <id> writes it
//!   brokers/<id>.claim-<k>              the k-th start of broker <id> (`cluster::id_claim`)
//!   cluster/controller-<e>              claim of controller epoch e (exclusive create)
//!   cluster/assignment-<e>              the assignment; only controller epoch e writes it
//!   cluster/identity/id                 the cluster id; the first proposal renamed into place wins
//!   cluster/.identity-<broker>-<hex>/   broker <broker>'s staged proposal
//!   topics/<id>/                        a topic; its creator renames it into place once
//!   topics/<id>/<p>/                    a partition: epoch claims, manifests, segments (`log`)
//!   topics/.staging-<id>@<b>.<inc>/     a topic being built by broker b's process inc
//!   topics/.tombstone-<id>/             a deleted topic; its deleter renamed it, a reaper removes it
//!   topics/names/<name>@<g>             generation g of the claim naming a topic id
//!   producers/block-<n>                 producer ids n*1000..; the broker that claims it
//!   groups/<slot>/                      consumer groups of coordinator slot <slot> (`groups`)
//!   groups/<slot>/txn-<hash>-<e>        a transactional id of that slot (`txn`)
//!   security/credentials-<n>            version n of the SCRAM credentials; its claimant
//!   security/acls-<n>                   version n of the ACLs; its claimant
//!   cluster/preferred-leaders-<n>       version n of the operator's preferred leaders; its claimant
//! ```
//! Inside a partition directory, the leader of each epoch writes its own
//! files (`log::fence::epoch_path`, `log::manifest::manifest_path`,
//! segments named `<base>-<epoch>.log`): see `crate::log`.

use std::path::{Path, PathBuf};

pub(crate) const BROKERS_DIR: &str = "brokers";
pub(crate) const CLUSTER_DIR: &str = "cluster";
pub(crate) const TOPICS_DIR: &str = "topics";
pub(crate) const NAMES_DIR: &str = "topics/names";
pub(crate) const PRODUCERS_DIR: &str = "producers";
pub(crate) const GROUPS_DIR: &str = "groups";
/// Made by the first change of credentials or ACLs, not at start-up.
pub(crate) const SECURITY_DIR: &str = "security";

/// A directory being built, renamed into place in one step when whole.
pub(crate) const STAGING_PREFIX: &str = ".staging-";
/// A directory renamed away to be removed (a deleted topic, a swept staging).
pub(crate) const TOMBSTONE_PREFIX: &str = ".tombstone-";

/// The top-level directories every broker expects. Creating them is safe to
/// race: `mkdir` is atomic and `AlreadyExists` is the same end state.
pub(crate) const TOP_LEVEL: &[&str] = &[
    BROKERS_DIR,
    CLUSTER_DIR,
    TOPICS_DIR,
    NAMES_DIR,
    PRODUCERS_DIR,
    GROUPS_DIR,
];

/// Broker `broker_id`'s heartbeat.
pub fn heartbeat(broker_id: u32) -> PathBuf {
    Path::new(BROKERS_DIR).join(broker_id.to_string())
}

/// The claim of controller epoch `epoch`.
pub(crate) fn controller_claim(epoch: u32) -> PathBuf {
    Path::new(CLUSTER_DIR).join(format!("controller-{epoch:010}"))
}

/// The assignment written by the controller of `controller_epoch`.
pub fn assignment(controller_epoch: u32) -> PathBuf {
    Path::new(CLUSTER_DIR).join(format!("assignment-{controller_epoch:010}"))
}

/// The directory holding the cluster id once it is decided.
pub(crate) fn identity_dir() -> PathBuf {
    Path::new(CLUSTER_DIR).join("identity")
}

/// Topic `id`'s directory.
pub fn topic_dir(id: &str) -> PathBuf {
    Path::new(TOPICS_DIR).join(id)
}

/// Partition `partition` of topic `id`.
pub fn partition_dir(id: &str, partition: u32) -> PathBuf {
    topic_dir(id).join(partition.to_string())
}

/// Deleted topic `id`, renamed away for the reaper.
pub fn tombstone(id: &str) -> PathBuf {
    Path::new(TOPICS_DIR).join(format!("{TOMBSTONE_PREFIX}{id}"))
}

/// Generation `generation` of the claim on topic name `name`.
pub(crate) fn name_claim(name: &str, generation: u32) -> PathBuf {
    Path::new(NAMES_DIR).join(format!("{name}@{generation}"))
}

/// Producer id block `n`.
pub(crate) fn producer_block(n: u64) -> PathBuf {
    Path::new(PRODUCERS_DIR).join(format!("block-{n:012}"))
}

/// Coordinator slot `slot`'s directory of groups.
pub(crate) fn group_slot(slot: u32) -> PathBuf {
    Path::new(GROUPS_DIR).join(format!("{slot:03}"))
}
