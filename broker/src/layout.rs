//! Where things live on the shared volume, and who writes each of them: the
//! one home of every top-level directory and path name. Modules build their
//! paths from these; the table "Files on the volume and their writers" in
//! docs/protocols.md says how each file changes.
//!
//! ```text
//! <volume>/
//!   brokers/<id>                        heartbeat; only broker <id> writes it
//!   brokers/<id>.claim-<k>              the k-th start of broker <id> (`cluster::id_claim`)
//!   brokers/.<id>.tmp-<hex>             broker <id>'s start-up write probe
//!   cluster/controller-<e>              claim of controller epoch e (exclusive create)
//!   cluster/assignment-<e>              the assignment; only controller epoch e writes it
//!   cluster/identity/id                 the cluster id; the first proposal renamed into place wins
//!   cluster/.identity-<broker>-<hex>/   broker <broker>'s staged proposal
//!   cluster/preferred-leaders-<n>       version n of the operator's preferred leaders; its claimant
//!   cluster/client-quotas-<n>           version n of the client quotas; its claimant
//!   topics/<id>/                        a topic; its creator renames it into place once
//!   topics/<id>/topic.meta              the topic's id, name and partition count; its creator
//!   topics/<id>/config-<n>              version n of the topic's config overrides; its claimant
//!   topics/<id>/<p>/                    a partition (`log`):
//!     epoch-<e>                           claim of leader epoch e (exclusive create)
//!     manifest-<e>                        the segments of leader epoch e; only that leader writes it
//!     <base>-<e>.<ext>                    a segment (log, index, timeindex) of leader epoch e
//!     <base>-<e>-<E>-<n>.<ext>            compaction pass n of leader epoch E over it
//!   topics/<id>/.staging-<p>-<hex>@<b>.<inc>/  partition p being added by broker b's process inc
//!   topics/.staging-<id>@<b>.<inc>/     a topic being built by broker b's process inc
//!   topics/.tombstone-<id>/             a deleted topic; its deleter renamed it, a reaper removes it
//!   topics/[<id>/].tombstone-staging-<rest>/  a swept staging, being removed
//!   topics/names/<name>@<g>             generation g of the claim naming a topic id
//!   producers/block-<n>                 producer ids n*1000..; the broker that claims it
//!   groups/<slot>/                      coordinator slot <slot> (`groups`, `txn`):
//!     epoch-<e>                           claim of coordinator epoch e
//!     <hash>-<e>                          a consumer group, written by coordinator epoch e
//!     txn-<hash>-<e>                      a transactional id, written by coordinator epoch e
//!   security/credentials-<n>            version n of the SCRAM credentials; its claimant
//!   security/acls-<n>                   version n of the ACLs; its claimant
//! ```
//! Beside any replaced file, `.<name>.tmp-<hex>` temps of its replace
//! (`vfs::durable`). docs/volume.md has the full table: writer, primitive, fence, readers and
//! removal of every file.

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
    Path::new(CLUSTER_DIR).join(format!("{CONTROLLER_PREFIX}{epoch:010}"))
}

/// The assignment written by the controller of `controller_epoch`.
pub fn assignment(controller_epoch: u32) -> PathBuf {
    Path::new(CLUSTER_DIR).join(format!("{ASSIGNMENT_PREFIX}{controller_epoch:010}"))
}

/// The directory holding the cluster id once it is decided.
pub(crate) fn identity_dir() -> PathBuf {
    Path::new(CLUSTER_DIR).join("identity")
}

/// The decided cluster id.
pub(crate) fn cluster_id() -> PathBuf {
    staged_cluster_id(&identity_dir())
}

/// The cluster id inside a staged proposal (`identity_staging`) or the
/// decided identity directory.
pub(crate) fn staged_cluster_id(dir: &Path) -> PathBuf {
    dir.join("id")
}

/// Where versions before the staged identity kept the cluster id.
pub(crate) fn legacy_cluster_id() -> PathBuf {
    Path::new(CLUSTER_DIR).join("id")
}

/// The start of broker `broker`'s staged identity proposals' names.
pub(crate) fn identity_staging_prefix(broker: u32) -> String {
    format!(".identity-{broker}-")
}

/// A staged identity proposal of broker `broker`, named by `nonce`.
pub(crate) fn identity_staging(broker: u32, nonce: u64) -> PathBuf {
    Path::new(CLUSTER_DIR).join(format!("{}{nonce:016x}", identity_staging_prefix(broker)))
}

/// The start of the names of broker `broker`'s id claims.
pub(crate) fn id_claim_prefix(broker: u32) -> String {
    format!("{broker}.claim-")
}

/// Slot `slot` of broker `broker`'s id claims (its `slot`-th start).
pub(crate) fn id_claim(broker: u32, slot: u64) -> PathBuf {
    Path::new(BROKERS_DIR).join(format!("{}{slot:010}", id_claim_prefix(broker)))
}

/// Broker `broker`'s start-up write probe, named as a temp of its
/// heartbeat so that the heartbeat's sweep removes one a crash left.
pub(crate) fn write_probe(broker: u32, nonce: u64) -> PathBuf {
    Path::new(BROKERS_DIR).join(vfs::durable::temp_name(&broker.to_string(), nonce))
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

/// `@<broker>.<incarnation hex>`: the end of every staging name, naming
/// the process that builds it.
pub(crate) fn staging_suffix(broker: u32, incarnation: u64) -> String {
    format!("@{broker}.{incarnation:016x}")
}

/// Topic `id` being built in `topics_dir` by the process `suffix` names.
pub(crate) fn topic_staging(topics_dir: &Path, id: &str, suffix: &str) -> PathBuf {
    topics_dir.join(format!("{STAGING_PREFIX}{id}{suffix}"))
}

/// Partition `p` being added to the topic in `topic_dir` by the process
/// `suffix` names; `nonce` tells its attempts apart.
pub(crate) fn partition_staging(topic_dir: &Path, p: u32, nonce: u64, suffix: &str) -> PathBuf {
    topic_dir.join(format!("{STAGING_PREFIX}{p}-{nonce:016x}{suffix}"))
}

/// Where a sweeper renames the staging `<STAGING_PREFIX><rest>` of `dir`
/// to remove it.
pub(crate) fn staging_tombstone(dir: &Path, rest: &str) -> PathBuf {
    dir.join(format!("{TOMBSTONE_PREFIX}staging-{rest}"))
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

/// The file of coordinator epoch `epoch` for the key hashed to `hash` in
/// slot `slot`: `prefix` is `""` for a group, `txn-` for a transactional id.
pub(crate) fn slot_file(slot: u32, prefix: &str, hash: &str, epoch: u32) -> PathBuf {
    slot_file_in(&group_slot(slot), prefix, hash, epoch)
}

/// [`slot_file`] in a slot directory given by path.
pub(crate) fn slot_file_in(dir: &Path, prefix: &str, hash: &str, epoch: u32) -> PathBuf {
    dir.join(format!("{prefix}{hash}-{epoch:010}"))
}

/// The versioned documents (`versioned`): SCRAM credentials and ACLs in
/// `security/`, preferred leaders and client quotas in `cluster/`.
pub(crate) const CREDENTIALS_DOC: &str = "credentials";
pub(crate) const ACLS_DOC: &str = "acls";
pub(crate) const PREFERRED_LEADERS_DOC: &str = "preferred-leaders";
pub(crate) const CLIENT_QUOTAS_DOC: &str = "client-quotas";

/// Version `n` of the versioned document `name` in `dir` (credentials,
/// ACLs, preferred leaders, client quotas).
pub(crate) fn versioned(dir: &Path, name: &str, n: u64) -> PathBuf {
    dir.join(format!("{name}-{n:012}"))
}

/// A claim of leader epoch `e` in a partition directory (or of coordinator
/// epoch `e` in a coordinator slot): `epoch-<e>`.
pub(crate) const EPOCH_PREFIX: &str = "epoch-";
/// The manifest leader epoch `e` writes in its partition: `manifest-<e>`.
pub(crate) const MANIFEST_PREFIX: &str = "manifest-";
/// A version of a topic's config overrides: `config-<n>`.
pub(crate) const CONFIG_PREFIX: &str = "config-";
/// A claim of a controller epoch in `cluster/`.
pub(crate) const CONTROLLER_PREFIX: &str = "controller-";
/// An assignment in `cluster/`.
pub(crate) const ASSIGNMENT_PREFIX: &str = "assignment-";
/// A topic's id, name and partition count, in its directory.
pub(crate) const TOPIC_META: &str = "topic.meta";

/// The claim of epoch `epoch` in `dir`: a partition's leader epoch or a
/// coordinator slot's epoch.
pub(crate) fn epoch_claim(dir: &Path, epoch: u32) -> PathBuf {
    dir.join(format!("{EPOCH_PREFIX}{epoch:010}"))
}

/// The epoch an [`epoch_claim`] file name claims; `None` for other names.
pub(crate) fn parse_epoch_claim(name: &str) -> Option<u32> {
    name.strip_prefix(EPOCH_PREFIX)?.parse().ok()
}

/// The manifest leader epoch `epoch` writes in partition directory `dir`
/// (epoch 0: the one its creator staged).
pub(crate) fn manifest(dir: &Path, epoch: u32) -> PathBuf {
    dir.join(format!("{MANIFEST_PREFIX}{epoch:010}"))
}

/// A segment file of leader epoch `epoch` starting at `base_offset`;
/// `ext` is `log`, `index` or `timeindex`.
pub fn segment_file(base_offset: i64, epoch: u32, ext: &str) -> String {
    format!("{base_offset:020}-{epoch:010}.{ext}")
}

/// The segment of [`segment_file`] rewritten by compaction pass `pass` of
/// leader epoch `by_epoch`.
pub(crate) fn cleaned_segment_file(
    base_offset: i64,
    epoch: u32,
    by_epoch: u32,
    pass: u32,
    ext: &str,
) -> String {
    format!("{base_offset:020}-{epoch:010}-{by_epoch:010}-{pass:010}.{ext}")
}

/// The topic meta in topic directory `dir` (placed or staged).
pub(crate) fn topic_meta_in(dir: &Path) -> PathBuf {
    dir.join(TOPIC_META)
}

/// Topic `id`'s meta.
pub fn topic_meta(id: &str) -> PathBuf {
    topic_meta_in(&topic_dir(id))
}

/// Version `n` of the config overrides in topic directory `dir` (placed or
/// staged).
pub(crate) fn topic_config_in(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("{CONFIG_PREFIX}{n:010}"))
}

/// Version `n` of topic `id`'s config overrides.
pub(crate) fn topic_config(id: &str, n: u32) -> PathBuf {
    topic_config_in(&topic_dir(id), n)
}
