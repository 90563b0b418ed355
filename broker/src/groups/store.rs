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
    for e in (1..=epoch).rev() {
        let p = path(slot, group_id, e);
        if let Some(r) = read_at(vfs, &p).await? {
            if r.group_id != group_id {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} belongs to group {:?}, not {group_id:?}",
                        p.display(),
                        r.group_id
                    ),
                ));
            }
            return Ok(Some((r, e)));
        }
    }
    Ok(None)
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
