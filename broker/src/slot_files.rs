//! Per-key files of a coordinator slot, one per coordinator epoch:
//! `groups/<slot>/<prefix><hash>-<epoch>`. Consumer groups (no prefix) and
//! transactional ids (`txn-`) are both kept this way.
//!
//! A key's file is replaced atomically (temp, fsync, rename) by the
//! coordinator of that slot's epoch only. The epoch in the name is what
//! makes a deposed coordinator harmless: its late replace lands in its own,
//! older file, and readers take the newest epoch. A new coordinator claims
//! its epoch before it reads anything, and a coordinator acknowledges a
//! write only after a fresh check that no newer epoch was claimed, so every
//! acknowledged write is in a file the successor reads.

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use vfs::Vfs;
use vfs::durable::{Removal, converge_remove};

/// A record kept as a slot file.
pub(crate) trait SlotRecord: Serialize + DeserializeOwned {
    /// The envelope kind of its files.
    const KIND: &'static str;
    /// What its file names start with.
    const PREFIX: &'static str;
    /// The key it is filed under (a group id, a transactional id).
    fn key(&self) -> &str;
}

pub(crate) fn slot_dir(slot: u32) -> PathBuf {
    crate::layout::group_slot(slot)
}

/// File names carry a hash of the key: ids are arbitrary strings up to the
/// length of a file name and beyond.
pub(crate) fn hash(key: &str) -> String {
    let h = blake3::hash(key.as_bytes());
    h.to_hex()[..32].to_owned()
}

pub(crate) fn path<T: SlotRecord>(slot: u32, key: &str, epoch: u32) -> PathBuf {
    crate::layout::slot_file(slot, T::PREFIX, &hash(key), epoch)
}

/// `(hash, epoch)` of a file name of `T`; `None` for anything else.
pub(crate) fn parse_name<T: SlotRecord>(name: &str) -> Option<(&str, u32)> {
    let (hash, epoch) = name.strip_prefix(T::PREFIX)?.split_once('-')?;
    if hash.len() != 32 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((hash, epoch.parse().ok()?))
}

/// The file of `T` named by `(hash, epoch)` as [`parse_name`] read them.
pub(crate) fn path_of_hash<T: SlotRecord>(slot: u32, hash: &str, epoch: u32) -> PathBuf {
    crate::layout::slot_file(slot, T::PREFIX, hash, epoch)
}

/// Reads a file by its exact name (a fresh open).
pub(crate) async fn read_at<T: SlotRecord>(vfs: &dyn Vfs, path: &Path) -> io::Result<Option<T>> {
    crate::stored::read_json(vfs, path, T::KIND).await
}

/// The newest record of `key` at or below `epoch` (the reader's own), found
/// by opening each older epoch's name from the top: opens are fresh,
/// listings may be stale. `(record, epoch it came from)`.
pub(crate) async fn load<T: SlotRecord>(
    vfs: &dyn Vfs,
    slot: u32,
    key: &str,
    epoch: u32,
) -> io::Result<Option<(T, u32)>> {
    let mut found = None;
    for e in (1..=epoch).rev() {
        if let Some(r) = read_epoch::<T>(vfs, slot, key, e).await? {
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
        if let Some(r) = read_epoch::<T>(vfs, slot, key, e).await? {
            found = Some((r, e));
        }
    }
    Ok(found)
}

async fn read_epoch<T: SlotRecord>(
    vfs: &dyn Vfs,
    slot: u32,
    key: &str,
    epoch: u32,
) -> io::Result<Option<T>> {
    let p = path::<T>(slot, key, epoch);
    match read_at::<T>(vfs, &p).await? {
        Some(r) if r.key() != key => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} belongs to {:?}, not {key:?}", p.display(), r.key()),
        )),
        r => Ok(r),
    }
}

/// Writes this epoch's file of the record's key.
pub(crate) async fn write<T: SlotRecord>(
    vfs: &dyn Vfs,
    slot: u32,
    epoch: u32,
    record: &T,
) -> io::Result<()> {
    crate::stored::write_json(vfs, &path::<T>(slot, record.key(), epoch), T::KIND, record).await
}

/// Removes the older epoch's file a write superseded. Best effort: a
/// leftover is older and never read while the newer one exists.
pub(crate) async fn remove_superseded<T: SlotRecord>(
    vfs: &dyn Vfs,
    slot: u32,
    key: &str,
    (old, epoch): (u32, u32),
) {
    if old >= epoch {
        return;
    }
    match converge_remove(vfs, &path::<T>(slot, key, old)).await {
        Ok(Removal::Gone) => {}
        Ok(Removal::Pending(why)) => tracing::debug!(key, ?why, "superseded file stays for now"),
        Err(e) => tracing::debug!(key, error = %e, "superseded file stays"),
    }
}
