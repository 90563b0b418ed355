//! The observer's audit of partitions on the volume, as a new leader would
//! read them (`broker::log::audit`): the trimmed topic's and the main
//! topic's partitions, every [`EVERY`] for the whole run.
//!
//! - missing-segment: the newest manifest names only segments that are on
//!   the volume. Retention and DeleteRecords remove a segment only after a
//!   manifest that drops it, and only while their epoch still leads. A
//!   removal the manifest does not know about yet, or a zombie removing
//!   what its successor still serves, shows here before any client reads
//!   the hole (retention would soon hide it from the final read).
//! - undurable-manifest: every byte the newest manifest vouches for (a
//!   sealed segment to its end, the active one to its checkpoint) is
//!   committed at the NFS server (the model's god view: no host can tell),
//!   so a server restart or a crash of the writer's host keeps it. A flush
//!   that acknowledged without an fsync, or a takeover's copy of the tail
//!   named before it was synced, shows here whether or not a restart
//!   happens to fall in the window.
//! - epoch-gap: every leader epoch up to the newest manifest's has a claim
//!   file. A takeover fences each epoch it skips (a leader that was
//!   assigned but never claimed) before it reads the previous manifest;
//!   a gap lets a zombie of the epoch below pass its fence check ("no next
//!   epoch yet") and acknowledge writes its successor never sealed. A
//!   zombie or a late claimant may fill the gap seconds later, so it shows
//!   here before any client could notice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use broker::log::audit::{PartitionAudit, audit_partition, unclaimed_epochs};
use vfs::Vfs;
use vfs::model::ModelNfs;

use crate::actors::compactor::{COMPACT_PARTITIONS, COMPACT_TOPIC};
use crate::actors::trimmer::{TRIM_PARTITIONS, TRIM_TOPIC};
use crate::checker::Invariant;
use crate::checker::Violations;
use crate::workload::{PARTITIONS, TOPIC};

const EVERY: Duration = Duration::from_millis(900);

/// The topics audited and their partition counts (neither is deleted
/// during a run, so a topic id found once stays).
const AUDITED: &[(&str, i32)] = &[
    (TRIM_TOPIC, TRIM_PARTITIONS),
    (COMPACT_TOPIC, COMPACT_PARTITIONS),
    (TOPIC, PARTITIONS),
];

#[derive(Default)]
struct Partition {
    /// Every epoch up to this one has a claim (claims are never removed
    /// while the topic exists, so this is only checked once).
    claimed_through: u32,
    /// Epochs whose missing segments or gaps were reported (one each).
    reported: BTreeSet<(u32, Invariant)>,
}

/// Audits the topics of [`AUDITED`] every [`EVERY`], for the whole run.
pub(crate) async fn watch(
    vfs: Arc<dyn Vfs>,
    nfs: ModelNfs,
    violations: Violations,
    stamp: impl Fn() -> String,
) {
    let mut topic_ids: BTreeMap<&str, String> = BTreeMap::new();
    let mut partitions: BTreeMap<(&str, i32), Partition> = BTreeMap::new();
    let mut interval = tokio::time::interval(EVERY);
    loop {
        interval.tick().await;
        for (topic, count) in AUDITED {
            if !topic_ids.contains_key(topic) {
                if let Ok(Some(id)) = broker::log::names::holder(vfs.as_ref(), topic).await {
                    topic_ids.insert(topic, id);
                }
            }
            let Some(id) = topic_ids.get(topic) else {
                continue;
            };
            for partition in 0..*count {
                let dir = broker::layout::partition_dir(id, partition as u32);
                let seen = partitions.entry((topic, partition)).or_default();
                // EIO and friends: the volume said no this time.
                let Ok(Some(first)) = audit_partition(vfs.as_ref(), &dir).await else {
                    continue;
                };
                durable(
                    &nfs,
                    (topic, partition),
                    &dir,
                    &first,
                    seen,
                    &violations,
                    &stamp,
                );
                judge(
                    vfs.as_ref(),
                    (topic, partition),
                    &dir,
                    first,
                    seen,
                    &violations,
                    &stamp,
                )
                .await;
            }
        }
    }
}

/// undurable-manifest: what the server has committed of each segment the
/// manifest vouches for, looked at after the manifest was read (committed
/// bytes never become uncommitted; a segment removed since is skipped).
fn durable(
    nfs: &ModelNfs,
    (topic, partition): (&str, i32),
    dir: &Path,
    audit: &PartitionAudit,
    seen: &mut Partition,
    violations: &Violations,
    stamp: &impl Fn() -> String,
) {
    violations.checked(Invariant::UndurableManifest);
    for (name, vouched) in &audit.vouched {
        let path = dir.join(name);
        let Some(stable) = nfs.stable_len(&path.to_string_lossy()) else {
            continue;
        };
        if stable < *vouched
            && seen
                .reported
                .insert((audit.epoch, Invariant::UndurableManifest))
        {
            violations.push(Invariant::UndurableManifest.says(format!(
                "the newest manifest of {topic}/{partition} (epoch {}) vouches for {vouched} bytes of {name}, and the server has committed {stable} (at {})",
                audit.epoch,
                stamp().trim()
            )));
        }
    }
}

/// One partition's audit: epoch-gap, then missing-segment.
async fn judge(
    vfs: &dyn Vfs,
    (topic, partition): (&str, i32),
    dir: &Path,
    first: PartitionAudit,
    seen: &mut Partition,
    violations: &Violations,
    stamp: &impl Fn() -> String,
) {
    violations.checked(Invariant::MissingSegment);
    // The manifest was read first: every claim up to its epoch was made
    // before it was written.
    if first.epoch > seen.claimed_through {
        if let Ok(gaps) = unclaimed_epochs(vfs, dir, seen.claimed_through + 1, first.epoch).await {
            violations.checked(Invariant::EpochGap);
            match gaps.first() {
                None => seen.claimed_through = first.epoch,
                Some(gap) => {
                    if seen.reported.insert((first.epoch, Invariant::EpochGap)) {
                        let zombie = match gap - 1 {
                            0 => String::new(),
                            e => format!(", or a zombie of epoch {e},"),
                        };
                        violations.push(Invariant::EpochGap.says(format!(
                            "the newest manifest of {topic}/{partition} is of leader epoch {}, and epoch(s) {gaps:?} below it have no claim: a late claimant of epoch {gap}{zombie} would pass its fence check (at {})",
                            first.epoch,
                            stamp().trim()
                        )));
                    }
                }
            }
        }
    }
    if first.missing.is_empty() {
        return;
    }
    // The leader may have moved its log start and removed the segment
    // between the manifest read and the look: only a manifest that still
    // says the same afterwards counts.
    let Ok(Some(again)) = audit_partition(vfs, dir).await else {
        return;
    };
    if again.same_manifest(&first)
        && !again.missing.is_empty()
        && seen
            .reported
            .insert((again.epoch, Invariant::MissingSegment))
    {
        violations.push(Invariant::MissingSegment.says(format!(
            "the newest manifest of {topic}/{partition} (epoch {}, log start {}) names {} segment(s) the volume does not have: {} (at {})",
            again.epoch,
            again.log_start_offset,
            again.missing.len(),
            again.missing.join(", "),
            stamp().trim()
        )));
    }
}
