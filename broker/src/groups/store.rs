//! Consumer groups on the volume: one file per group and coordinator epoch,
//! `groups/<slot>/<hash>-<epoch>`, holding a group's completed generation
//! and its committed offsets (how these files change and why a deposed
//! coordinator is harmless: `crate::slot_files`).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vfs::Vfs;

use crate::slot_files::{self, SlotRecord};

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
    /// Offsets committed inside open transactions (TxnOffsetCommit): they
    /// take effect with the transaction's commit marker, and are dropped
    /// by its abort marker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_txn: Vec<PendingTxnOffsets>,
    /// Per producer id, the newest transaction coordinator epoch whose
    /// marker reached the group: an older coordinator's marker is refused,
    /// as a partition's producer state refuses it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marker_epochs: Vec<(i64, i32)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTxnOffsets {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub offsets: Vec<OffsetRecord>,
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

impl SlotRecord for GroupRecord {
    const KIND: &'static str = KIND;
    const PREFIX: &'static str = "";
    fn key(&self) -> &str {
        &self.group_id
    }
}

pub(crate) fn slot_dir(slot: u32) -> PathBuf {
    slot_files::slot_dir(slot)
}

pub fn path(slot: u32, group_id: &str, epoch: u32) -> PathBuf {
    slot_files::path::<GroupRecord>(slot, group_id, epoch)
}

/// The group file named by `(hash, epoch)` as [`parse_name`] read them.
pub(crate) fn path_of_hash(slot: u32, hash: &str, epoch: u32) -> PathBuf {
    slot_files::path_of_hash::<GroupRecord>(slot, hash, epoch)
}

/// `(hash, epoch)` of a group file name; `None` for anything else.
pub(crate) fn parse_name(name: &str) -> Option<(&str, u32)> {
    slot_files::parse_name::<GroupRecord>(name)
}

/// Reads a file by its exact name (a fresh open).
pub async fn read_at(vfs: &dyn Vfs, path: &Path) -> io::Result<Option<GroupRecord>> {
    slot_files::read_at(vfs, path).await
}

/// The newest record of a group at or below `epoch` (see
/// `slot_files::load`).
pub async fn load(
    vfs: &dyn Vfs,
    slot: u32,
    group_id: &str,
    epoch: u32,
) -> io::Result<Option<(GroupRecord, u32)>> {
    slot_files::load(vfs, slot, group_id, epoch).await
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
    slot_files::write(vfs, slot, epoch, record).await?;
    vfs::fault_point!(vfs, "group-save.written");
    if let Some(old) = superseded.filter(|e| *e < epoch) {
        // Both generations are on the volume until the removal is done:
        // a loader must pick the newer one.
        vfs::fault_point!(vfs, "group-save.superseding");
        slot_files::remove_superseded::<GroupRecord>(vfs, slot, &record.group_id, (old, epoch))
            .await;
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
