//! What the volume says about one partition, read as a new leader would
//! read it: the newest manifest, and whether every segment it names is on
//! the volume.
//!
//! A segment leaves the volume only after a manifest that no longer names
//! it is written, and only while its leader's epoch is still current
//! (docs/protocols.md's table: retention and DeleteRecords). So the newest
//! manifest never names a missing segment; if it does, the records it
//! promises are gone. And every leader epoch up to the newest manifest's
//! has a claim file: a takeover fences each epoch it skips before it reads
//! the previous manifest, so an old leader's fence check ("does the next
//! epoch exist?") is complete. The simulator's observer checks both
//! during runs.

use std::io;
use std::path::Path;

use vfs::Vfs;

use super::fence::epoch_path;
use super::manifest::{Manifest, SegmentState};

/// Epoch claims past the newest one listed that are also opened: a
/// directory listing may be stale.
const AHEAD: u32 = 3;

/// The newest manifest of the partition in `dir` and what it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionAudit {
    pub epoch: u32,
    pub log_start_offset: i64,
    /// Segment files (`.log`) the manifest names.
    pub segments: Vec<String>,
    /// Of those, the ones no fresh open finds.
    pub missing: Vec<String>,
    /// Each segment file with the bytes the manifest vouches for: a
    /// sealed segment to its end, the active one to its checkpoint. The
    /// manifest is written only after those bytes were made durable.
    pub vouched: Vec<(String, u64)>,
    manifest: Manifest,
}

impl PartitionAudit {
    /// The base offset of the segment file `name`, and whether compaction
    /// wrote it (its offsets have gaps), if the manifest names it.
    pub fn segment_of(&self, name: &str) -> Option<(i64, bool)> {
        self.manifest
            .segments
            .iter()
            .find(|s| s.file_name() == name)
            .map(|s| (s.base_offset, s.cleaned.is_some()))
    }

    /// The offsets an operator's `--truncate-damaged` gave up:
    /// `(segment file, from, to)`.
    pub fn given_up(&self) -> Vec<(String, i64, i64)> {
        self.manifest
            .segments
            .iter()
            .filter_map(|s| {
                let from = s.given_up_from?;
                let to = match s.state {
                    SegmentState::Sealed { next_offset, .. } => next_offset,
                    SegmentState::Active {
                        checkpoint_next_offset,
                        ..
                    } => checkpoint_next_offset,
                };
                Some((s.file_name(), from, to))
            })
            .collect()
    }

    /// Whether `other` read the same manifest (same epoch, same content).
    pub fn same_manifest(&self, other: &PartitionAudit) -> bool {
        self.manifest == other.manifest
    }
}

/// Audits the partition in `dir`; `None` if it has no manifest yet.
pub async fn audit_partition(vfs: &dyn Vfs, dir: &Path) -> io::Result<Option<PartitionAudit>> {
    let Some(manifest) = newest_manifest(vfs, dir).await? else {
        return Ok(None);
    };
    let segments: Vec<String> = manifest.segments.iter().map(|s| s.file_name()).collect();
    let mut missing = Vec::new();
    for name in &segments {
        if !vfs::exists_now(vfs, &dir.join(name)).await? {
            missing.push(name.clone());
        }
    }
    let vouched = manifest
        .segments
        .iter()
        .map(|s| {
            let len = match s.state {
                SegmentState::Sealed { end_position, .. } => end_position,
                SegmentState::Active {
                    checkpoint_position,
                    ..
                } => checkpoint_position,
            };
            (s.file_name(), len)
        })
        .collect();
    Ok(Some(PartitionAudit {
        epoch: manifest.epoch,
        log_start_offset: manifest.log_start_offset,
        segments,
        missing,
        vouched,
        manifest,
    }))
}

/// The epochs in `from..=to` that have no claim file, by fresh opens.
/// Claim files are never removed while the partition exists, so once the
/// newest manifest is of epoch `to`, every epoch up to `to` must have one:
/// a missing one is an epoch whose leader (a zombie of the epoch before,
/// or a late claimant) would pass its fence check.
pub async fn unclaimed_epochs(
    vfs: &dyn Vfs,
    dir: &Path,
    from: u32,
    to: u32,
) -> io::Result<Vec<u32>> {
    let mut missing = Vec::new();
    for epoch in from.max(1)..=to {
        if !vfs::exists_now(vfs, &epoch_path(dir, epoch)).await? {
            missing.push(epoch);
        }
    }
    Ok(missing)
}

/// The manifest a new leader would read now: the newest one at or below
/// the newest claimed epoch ([`newest_claimed_epoch`]).
async fn newest_manifest(vfs: &dyn Vfs, dir: &Path) -> io::Result<Option<Manifest>> {
    let newest = newest_claimed_epoch(vfs, dir, &[crate::layout::MANIFEST_PREFIX]).await?;
    // Claimed epochs whose takeover has not written a manifest (yet, or
    // ever) leave the previous manifest in force.
    for e in (0..=newest).rev() {
        if let Some(m) = Manifest::read(vfs, dir, e).await? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// The newest epoch claimed in `dir` (a partition, a coordinator slot).
/// Claims are dense (a taker-over fences every epoch below its own), so
/// from the newest epoch the listing shows (claims, and files named
/// `<prefix><epoch>`), each following epoch's claim is opened by path
/// until `AHEAD` in a row are missing; a stale listing only makes the
/// walk longer (a missing directory, one that lists nothing).
pub async fn newest_claimed_epoch(vfs: &dyn Vfs, dir: &Path, prefixes: &[&str]) -> io::Result<u32> {
    // A lookup cache may still say the directory is missing: the walk
    // below asks the server.
    let listing = match vfs.read_dir(dir).await {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let listed = listing
        .iter()
        .filter_map(|e| {
            let n = std::iter::once(crate::layout::EPOCH_PREFIX)
                .chain(prefixes.iter().copied())
                .find_map(|p| e.name.strip_prefix(p))?;
            n.parse::<u32>().ok()
        })
        .max()
        .unwrap_or(0);
    newest_claim_from(vfs, dir, listed).await
}

/// The newest epoch claimed in `dir` from `from` on: each following
/// epoch's claim opened by path until `AHEAD` in a row are missing. A
/// stray file far past the claims is never reached, which a broker
/// giving up an epoch relies on (the controller's next epoch goes past
/// what this finds).
pub async fn newest_claim_from(vfs: &dyn Vfs, dir: &Path, from: u32) -> io::Result<u32> {
    let mut newest = from;
    let mut misses = 0;
    let mut next = from.checked_add(1);
    while let Some(epoch) = next.filter(|_| misses < AHEAD) {
        if vfs::exists_now(vfs, &epoch_path(dir, epoch)).await? {
            newest = epoch;
            misses = 0;
        } else {
            misses += 1;
        }
        next = epoch.checked_add(1);
    }
    Ok(newest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::manifest::{SegmentMeta, SegmentState};
    use std::sync::Arc;
    use vfs::{MemVfs, OpenOptions};

    /// Claim files for `epochs` in `dir` (their content does not matter here).
    async fn claim_files(v: &dyn Vfs, dir: &Path, epochs: impl IntoIterator<Item = u32>) {
        for e in epochs {
            let f = v
                .open(&epoch_path(dir, e), OpenOptions::create_new())
                .await
                .unwrap();
            f.close().await.unwrap();
        }
    }

    fn segment(base: i64, epoch: u32) -> SegmentMeta {
        SegmentMeta {
            base_offset: base,
            epoch,
            state: SegmentState::Sealed {
                end_position: 10,
                next_offset: base + 5,
                max_timestamp: 0,
            },
            adopted_until: None,
            cleaned: None,
            given_up_from: None,
        }
    }

    #[tokio::test]
    async fn the_newest_claim_of_the_last_epoch_there_is_does_not_overflow() {
        let v: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let dir = Path::new("p");
        v.mkdir(dir).await.unwrap();
        claim_files(v.as_ref(), dir, [u32::MAX - 1, u32::MAX]).await;
        assert_eq!(
            newest_claimed_epoch(v.as_ref(), dir, &[crate::layout::MANIFEST_PREFIX])
                .await
                .unwrap(),
            u32::MAX
        );
        // From epoch 3 on, with 4 and 5 claimed, the walk stops at 5.
        claim_files(v.as_ref(), dir, [4, 5]).await;
        assert_eq!(newest_claim_from(v.as_ref(), dir, 3).await.unwrap(), 5);
    }

    #[tokio::test]
    async fn the_newest_manifest_decides_and_a_missing_segment_shows() {
        let v: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let dir = Path::new("p");
        v.mkdir(dir).await.unwrap();
        assert_eq!(audit_partition(v.as_ref(), dir).await.unwrap(), None);
        let mut m = Manifest::initial("t", 0);
        m.epoch = 2;
        m.segments = vec![segment(0, 2), segment(5, 2)];
        m.write(v.as_ref(), dir).await.unwrap();
        for s in &m.segments {
            let f = v
                .open(&dir.join(s.file_name()), OpenOptions::create_new())
                .await
                .unwrap();
            f.close().await.unwrap();
        }
        // An older epoch's manifest naming a segment that is gone does
        // not count: nobody reads it any more.
        let mut old = m.clone();
        old.epoch = 1;
        old.segments.insert(0, segment(-5, 1));
        old.write(v.as_ref(), dir).await.unwrap();
        let a = audit_partition(v.as_ref(), dir).await.unwrap().unwrap();
        assert_eq!(a.epoch, 2);
        assert!(a.missing.is_empty(), "{a:?}");
        v.unlink(&dir.join(m.segments[1].file_name()))
            .await
            .unwrap();
        let b = audit_partition(v.as_ref(), dir).await.unwrap().unwrap();
        assert_eq!(b.missing, vec![m.segments[1].file_name()]);
        // Sealed segments vouch for their whole length.
        assert_eq!(
            b.vouched,
            vec![
                (m.segments[0].file_name(), 10),
                (m.segments[1].file_name(), 10)
            ]
        );
        assert!(a.same_manifest(&b));
        // Epoch 4 with epoch 3 skipped is still found; its active segment
        // vouches for the bytes up to its checkpoint.
        m.epoch = 4;
        m.segments = vec![SegmentMeta {
            state: SegmentState::Active {
                checkpoint_position: 7,
                checkpoint_next_offset: 3,
                max_timestamp: -1,
            },
            ..segment(0, 2)
        }];
        m.write(v.as_ref(), dir).await.unwrap();
        let c = audit_partition(v.as_ref(), dir).await.unwrap().unwrap();
        assert_eq!((c.epoch, c.missing.len()), (4, 0));
        assert_eq!(c.vouched, vec![(m.segments[0].file_name(), 7)]);
        assert!(!b.same_manifest(&c));
    }

    #[tokio::test]
    async fn an_epoch_without_a_claim_below_the_newest_manifest_shows() {
        let v: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let dir = Path::new("p");
        v.mkdir(dir).await.unwrap();
        claim_files(v.as_ref(), dir, [1, 2, 4]).await;
        assert_eq!(
            unclaimed_epochs(v.as_ref(), dir, 0, 2).await.unwrap(),
            Vec::<u32>::new()
        );
        assert_eq!(
            unclaimed_epochs(v.as_ref(), dir, 1, 4).await.unwrap(),
            vec![3]
        );
        assert_eq!(
            unclaimed_epochs(v.as_ref(), dir, 4, 5).await.unwrap(),
            vec![5]
        );
    }
}
