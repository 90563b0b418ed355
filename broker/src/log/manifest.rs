//! The partition manifest: which segments make up the log and where each
//! ends.
//!
//! One file per leader epoch, `manifest-<epoch>`, written only by that
//! epoch's leader and only by atomic replace. A zombie of an older epoch can
//! still rewrite its own manifest, but nobody reads it any more: a new leader
//! reads the newest manifest below its own epoch, and older epochs'
//! manifests are ignored by construction.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};
use vfs::Vfs;

use super::producers::ProducerState;

const KIND: &str = "partition-manifest";
/// A manifest naming compacted segments: a binary that does not know
/// them must refuse it, not take it for a log whose cleaned segments are
/// strays to remove.
const KIND_COMPACTED: &str = "partition-manifest-compacted";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub topic_id: String,
    pub partition: u32,
    /// The leader epoch that wrote this manifest (also in its file name).
    pub epoch: u32,
    pub log_start_offset: i64,
    /// In base-offset order; all sealed but possibly the last.
    pub segments: Vec<SegmentMeta>,
    /// Producer state as of the last segment's checkpoint.
    pub producers: ProducerState,
    /// Compaction has deduplicated the log below this offset (Kafka's
    /// cleaner checkpoint): what lies above is the dirty part.
    #[serde(default, skip_serializing_if = "is_zero_offset")]
    pub cleaned_until: i64,
    /// The earliest delete horizon of a tombstone below `cleaned_until`:
    /// a compaction pass is due then to remove it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_horizon: Option<i64>,
}

fn is_zero_offset(n: &i64) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentMeta {
    pub base_offset: i64,
    pub epoch: u32,
    pub state: SegmentState,
    /// Where this segment's own epoch starts: the batches before it are the
    /// previous leader's unsealed tail, copied here at takeover (see
    /// `PartitionLog::open_as_leader`). `None`: from `base_offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_until: Option<i64>,
    /// Set for a segment a compaction pass wrote: its records are still
    /// `epoch`'s (they keep their offsets and leader epoch), its file is
    /// the pass's. The segment keeps the base offset of the ones it
    /// replaced, so without this its name could be theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaned: Option<Cleaning>,
    /// Set by `kaas fsck --repair --truncate-damaged`: the segment's
    /// records from this offset to its end were damaged and an operator
    /// gave them up. The segment ends (`end_position`) where the damage
    /// began and keeps its `next_offset`, so the offsets given up are a
    /// gap that reads step over and that is never handed out again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_up_from: Option<i64>,
}

/// Which compaction pass wrote a segment: the leader epoch it ran in and
/// its number in that epoch (never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cleaning {
    pub by_epoch: u32,
    pub pass: u32,
}

/// What names a segment's files, and keys its handle and index in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId {
    pub base_offset: i64,
    pub epoch: u32,
    pub cleaned: Option<Cleaning>,
}

impl SegmentId {
    pub fn file(&self, ext: &str) -> String {
        match self.cleaned {
            None => segment_file(self.base_offset, self.epoch, ext),
            Some(c) => crate::layout::cleaned_segment_file(
                self.base_offset,
                self.epoch,
                c.by_epoch,
                c.pass,
                ext,
            ),
        }
    }

    /// The epoch whose leader created the file (and alone may remove it
    /// while that epoch leads).
    pub fn written_in(&self) -> u32 {
        self.cleaned.map_or(self.epoch, |c| c.by_epoch)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum SegmentState {
    /// Nothing past `end_position` belongs to the log, whatever the file holds.
    Sealed {
        end_position: u64,
        next_offset: i64,
        max_timestamp: i64,
    },
    /// Being appended to. Everything up to the checkpoint is durable and was
    /// acknowledged; a takeover scans only from there.
    Active {
        checkpoint_position: u64,
        checkpoint_next_offset: i64,
        max_timestamp: i64,
    },
}

impl SegmentMeta {
    pub fn id(&self) -> SegmentId {
        SegmentId {
            base_offset: self.base_offset,
            epoch: self.epoch,
            cleaned: self.cleaned,
        }
    }

    pub fn file_name(&self) -> String {
        self.id().file("log")
    }
}

pub use crate::layout::segment_file;

/// Parses `<base>-<epoch>.<ext>` and, for a cleaned segment,
/// `<base>-<epoch>-<pass's epoch>-<pass>.<ext>` back.
pub fn parse_segment_file(name: &str) -> Option<(SegmentId, &str)> {
    let (stem, ext) = name.split_once('.')?;
    let parts: Vec<&str> = stem.split('-').collect();
    let num = |i: usize| parts.get(i).and_then(|p| p.parse::<u32>().ok());
    let cleaned = match parts.len() {
        2 => None,
        4 => Some(Cleaning {
            by_epoch: num(2)?,
            pass: num(3)?,
        }),
        _ => return None,
    };
    Some((
        SegmentId {
            base_offset: parts[0].parse().ok()?,
            epoch: num(1)?,
            cleaned,
        },
        ext,
    ))
}

pub(crate) use crate::layout::manifest as manifest_path;

impl Manifest {
    /// The manifest a new partition starts with (epoch 0, no segments).
    pub(crate) fn initial(topic_id: &str, partition: u32) -> Self {
        Self {
            topic_id: topic_id.to_owned(),
            partition,
            epoch: 0,
            log_start_offset: 0,
            segments: Vec::new(),
            producers: ProducerState::default(),
            cleaned_until: 0,
            delete_horizon: None,
        }
    }

    pub fn next_offset(&self) -> i64 {
        match self.segments.last().map(|s| s.state) {
            Some(SegmentState::Sealed { next_offset, .. }) => next_offset,
            Some(SegmentState::Active {
                checkpoint_next_offset,
                ..
            }) => checkpoint_next_offset,
            None => self.log_start_offset,
        }
    }

    pub async fn write(&self, vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
        let compacted = self.cleaned_until > 0
            || self.delete_horizon.is_some()
            || self.segments.iter().any(|s| s.cleaned.is_some());
        let kind = if compacted { KIND_COMPACTED } else { KIND };
        crate::stored::write_json(vfs, &manifest_path(dir, self.epoch), kind, self).await
    }

    /// Reads `manifest-<epoch>` by a fresh open; `Ok(None)` if there is none.
    pub async fn read(vfs: &dyn Vfs, dir: &Path, epoch: u32) -> io::Result<Option<Self>> {
        let path = manifest_path(dir, epoch);
        let manifest: Option<Manifest> =
            crate::stored::read_json_of(vfs, &path, &[KIND, KIND_COMPACTED]).await?;
        if let Some(m) = &manifest {
            if m.epoch != epoch {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} claims epoch {} in its content", path.display(), m.epoch),
                ));
            }
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_sort_by_offset_and_parse_back() {
        let a = segment_file(99, 3, "log");
        let b = segment_file(100, 2, "log");
        assert!(a < b);
        assert_eq!(a, "00000000000000000099-0000000003.log");
        let id = |base_offset, epoch, cleaned| SegmentId {
            base_offset,
            epoch,
            cleaned,
        };
        assert_eq!(parse_segment_file(&a), Some((id(99, 3, None), "log")));
        assert_eq!(parse_segment_file("manifest-0000000001"), None);
        let pass = Some(Cleaning {
            by_epoch: 5,
            pass: 2,
        });
        let cleaned = id(99, 3, pass).file("index");
        assert_eq!(
            cleaned,
            "00000000000000000099-0000000003-0000000005-0000000002.index"
        );
        assert_eq!(
            parse_segment_file(&cleaned),
            Some((id(99, 3, pass), "index"))
        );
        assert_eq!(id(99, 3, pass).written_in(), 5);
        assert_eq!(id(99, 3, None).written_in(), 3);
        assert_eq!(id(99, 3, None).file("log"), a);
        assert_eq!(parse_segment_file("1-2-3.log"), None);
        assert_eq!(parse_segment_file("1-2-3-4-5.log"), None);
    }

    #[tokio::test]
    async fn round_trips_and_rejects_a_mislabelled_file() {
        let vfs = vfs::MemVfs::new();
        let dir = Path::new("");
        let mut m = Manifest::initial("t", 0);
        m.epoch = 4;
        m.write(&vfs, dir).await.unwrap();
        assert_eq!(Manifest::read(&vfs, dir, 4).await.unwrap(), Some(m.clone()));
        assert_eq!(Manifest::read(&vfs, dir, 5).await.unwrap(), None);
        vfs.rename(&manifest_path(dir, 4), &manifest_path(dir, 6))
            .await
            .unwrap();
        let err = Manifest::read(&vfs, dir, 6).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
