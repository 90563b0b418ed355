//! Consumer groups on the volume: one file per group and coordinator epoch.
//!
//! `groups/<slot>/<hash>-<epoch>` holds a group's completed generation and
//! its committed offsets, replaced atomically (temp, fsync, rename) by the
//! coordinator of that slot's epoch only. The epoch in the name is what
//! makes a deposed coordinator harmless: its late replace lands in its own,
//! older file, and readers take the newest epoch. A new coordinator claims
//! its epoch before it reads anything, and a coordinator acknowledges a
//! write only after a fresh check that no newer epoch was claimed, so every
//! acknowledged write is in a file the successor reads.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vfs::Vfs;
use vfs::durable::{Removal, converge_remove};

const KIND: &str = "group";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    pub group_id: String,
    /// DeleteGroups leaves this tombstone, so older epochs' files of the
    /// group can never bring it back.
    pub deleted: bool,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberRecord>,
    pub offsets: Vec<OffsetRecord>,
    /// A group of the consumer protocol (KIP-848): its epochs, target and
    /// members. Files written before it existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<super::consumer::ConsumerRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocols: Vec<(String, Vec<u8>)>,
    pub assignment: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

pub(crate) fn slot_dir(slot: u32) -> PathBuf {
    crate::layout::group_slot(slot)
}

/// File names carry a hash of the group id: ids are arbitrary strings up
/// to the length of a file name and beyond.
fn key(group_id: &str) -> String {
    let h = blake3::hash(group_id.as_bytes());
    h.to_hex()[..32].to_owned()
}

pub fn path(slot: u32, group_id: &str, epoch: u32) -> PathBuf {
    slot_dir(slot).join(format!("{}-{epoch:010}", key(group_id)))
}

/// `(hash, epoch)` of a group file name; `None` for anything else.
pub(crate) fn parse_name(name: &str) -> Option<(&str, u32)> {
    let (hash, epoch) = name.split_once('-')?;
    if hash.len() != 32 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((hash, epoch.parse().ok()?))
}

/// Reads a file by its exact name (a fresh open).
pub async fn read_at(vfs: &dyn Vfs, path: &Path) -> io::Result<Option<GroupRecord>> {
    crate::stored::read_json(vfs, path, KIND).await
}

/// The newest record of a group below `epoch` (the reader's own), found by
/// opening each older epoch's name from the top: opens are fresh, listings
/// may be stale. `(record, epoch it came from)`.
pub async fn load(
    vfs: &dyn Vfs,
    slot: u32,
    group_id: &str,
    epoch: u32,
) -> io::Result<Option<(GroupRecord, u32)>> {
    let mut found = None;
    for e in (1..=epoch).rev() {
        if let Some(r) = read_epoch(vfs, slot, group_id, e).await? {
            found = Some((r, e));
            break;
        }
    }
    // A coordinator of an older epoch that has not learnt yet that it was
    // superseded can write its file and remove the one it supersedes while
    // the walk above goes down past both: it then finds an older file, or
    // none, although a newer one exists. A file is removed only once a
    // newer one is written, so a walk back up that keeps the last file it
    // finds ends at the newest.
    let floor = found.as_ref().map_or(0, |(_, e)| *e);
    for e in floor + 1..=epoch {
        if let Some(r) = read_epoch(vfs, slot, group_id, e).await? {
            found = Some((r, e));
        }
    }
    Ok(found)
}

async fn read_epoch(
    vfs: &dyn Vfs,
    slot: u32,
    group_id: &str,
    epoch: u32,
) -> io::Result<Option<GroupRecord>> {
    let p = path(slot, group_id, epoch);
    match read_at(vfs, &p).await? {
        Some(r) if r.group_id != group_id => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} belongs to group {:?}, not {group_id:?}",
                p.display(),
                r.group_id
            ),
        )),
        r => Ok(r),
    }
}

/// Writes this epoch's file of the group, then removes the file it
/// superseded (an older epoch's). The removal is best effort: a leftover is
/// older and never read while this one exists.
pub(crate) async fn save(
    vfs: &dyn Vfs,
    slot: u32,
    epoch: u32,
    record: &GroupRecord,
    superseded: Option<u32>,
) -> io::Result<()> {
    crate::stored::write_json(vfs, &path(slot, &record.group_id, epoch), KIND, record).await?;
    vfs::fault_point!(vfs, "group-save.written");
    if let Some(old) = superseded.filter(|e| *e < epoch) {
        // Both generations are on the volume until the removal is done:
        // a loader must pick the newer one.
        vfs::fault_point!(vfs, "group-save.superseding");
        match converge_remove(vfs, &path(slot, &record.group_id, old)).await {
            Ok(Removal::Gone) => {}
            Ok(Removal::Pending(why)) => {
                tracing::debug!(group = %record.group_id, ?why, "old group file stays for now")
            }
            Err(e) => tracing::debug!(group = %record.group_id, error = %e, "old group file stays"),
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Arc;
    use vfs::MemVfs;

    /// Group `g` with one committed offset of `t`/0, for tests.
    pub(crate) fn record(offset: i64) -> GroupRecord {
        GroupRecord {
            group_id: "g".into(),
            offsets: vec![OffsetRecord {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
                commit_ms: 0,
            }],
            ..GroupRecord::default()
        }
    }

    #[tokio::test]
    async fn a_load_racing_a_superseded_coordinators_save_finds_the_newer_file() {
        let inner: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let slot = 7;
        inner.mkdir(Path::new("groups")).await.unwrap();
        inner.mkdir(&slot_dir(slot)).await.unwrap();
        save(inner.as_ref(), slot, 1, &record(5), None)
            .await
            .unwrap();
        // A superseded coordinator's save (epoch 2's file written, epoch
        // 1's removed) runs just before the first open of epoch 1's file.
        let racing = vfs::testkit::BeforeOpen::new(
            inner.clone(),
            path(slot, "g", 1),
            move |v: Arc<dyn Vfs>| async move { save(v.as_ref(), slot, 2, &record(9), Some(1)).await },
        );
        // The walk down finds no file of epochs 3 and 2, then epoch 1's is
        // removed just before it is opened: the group must not load empty.
        let loaded = load(&racing, slot, "g", 3).await.unwrap();
        assert_eq!(loaded, Some((record(9), 2)));
    }
}
