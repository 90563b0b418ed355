//! Giving up damaged records, on an operator's word only (`kaas fsck
//! --repair --truncate-damaged`). It runs as a takeover in an epoch of its
//! own, so the leader it supersedes is fenced as by any takeover and the
//! next leader takes over from the manifest it writes:
//!
//! - a segment the manifest names that is not on the volume is replaced by
//!   an empty file of this epoch, all its offsets given up;
//! - a segment whose vouched bytes hold a damaged batch ends where the
//!   damage begins, its offsets from the first bad one given up.
//!
//! Both keep the segment's `next_offset`: what is given up is a gap that
//! reads step over, never offsets handed out again. The previous leader's
//! tail past its checkpoint is adopted as by any takeover.

use std::collections::BTreeSet;

use super::*;
use crate::log::manifest::Cleaning;
use crate::log::verify::first_damage;

/// One segment's offsets given up.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GivenUp {
    /// The segment file the manifest named.
    pub segment: String,
    /// Where its damage begins (0: the file is gone).
    pub position: u64,
    /// The offsets given up: `from` up to, not including, `to`.
    pub from: i64,
    pub to: i64,
    pub why: String,
}

/// Replaces each segment `manifest` names that is not on the volume (one
/// listing, then a fresh open of each name it lacks) by an empty one
/// written in `epoch`, sealed at 0 bytes with its offsets given up.
pub(super) async fn missing(
    v: &dyn Vfs,
    dir: &Path,
    manifest: &mut Manifest,
    epoch: u32,
) -> Result<Vec<GivenUp>, LogError> {
    let listed: BTreeSet<String> = v.read_dir(dir).await?.into_iter().map(|e| e.name).collect();
    let mut out = Vec::new();
    for seg in manifest.segments.iter_mut() {
        let name = seg.file_name();
        if listed.contains(&name) || vfs::exists_now(v, &dir.join(&name)).await? {
            continue;
        }
        let (next_offset, max_timestamp) = match seg.state {
            SegmentState::Sealed {
                next_offset,
                max_timestamp,
                ..
            } => (next_offset, max_timestamp),
            // Whatever its leader acknowledged past the checkpoint went
            // with the file: the volume no longer says how far that was.
            SegmentState::Active {
                checkpoint_next_offset,
                max_timestamp,
                ..
            } => (checkpoint_next_offset, max_timestamp),
        };
        // Named as pass 0 of this epoch: compaction passes count from 1,
        // so no pass of this epoch writes the same name.
        seg.cleaned = Some(Cleaning {
            by_epoch: epoch,
            pass: 0,
        });
        let file = v
            .open(&dir.join(seg.file_name()), OpenOptions::create_new())
            .await?;
        file.fsync().await?;
        file.close().await?;
        seg.state = SegmentState::Sealed {
            end_position: 0,
            next_offset,
            max_timestamp,
        };
        seg.given_up_from = Some(seg.base_offset);
        out.push(GivenUp {
            segment: name,
            position: 0,
            from: seg.base_offset,
            to: next_offset,
            why: "the file is not on the volume".into(),
        });
    }
    Ok(out)
}

/// Reads back every batch `manifest` vouches for (after the takeover
/// sealed the previous active segment at its checkpoint) and ends each
/// damaged segment at its first bad batch.
pub(super) async fn damaged(
    v: &dyn Vfs,
    dir: &Path,
    manifest: &mut Manifest,
) -> Result<Vec<GivenUp>, LogError> {
    let mut out = Vec::new();
    for seg in manifest.segments.iter_mut() {
        let SegmentState::Sealed {
            end_position,
            next_offset,
            max_timestamp,
        } = seg.state
        else {
            continue;
        };
        if end_position == 0 {
            continue;
        }
        let file = v
            .open(&dir.join(seg.file_name()), OpenOptions::read())
            .await?;
        let found = first_damage(
            file.as_ref(),
            (seg.base_offset, seg.cleaned.is_none()),
            end_position,
        )
        .await;
        let _ = file.close().await;
        let Some(d) = found? else {
            continue;
        };
        let from = d.first_bad_offset.min(next_offset);
        seg.state = SegmentState::Sealed {
            end_position: d.position,
            next_offset,
            max_timestamp,
        };
        seg.given_up_from = Some(seg.given_up_from.map_or(from, |g| g.min(from)));
        out.push(GivenUp {
            segment: seg.file_name(),
            position: d.position,
            from,
            to: next_offset,
            why: d.why,
        });
    }
    Ok(out)
}
