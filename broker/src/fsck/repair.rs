//! `kaas fsck --repair`: the fixes that are safe while the cluster runs.
//!
//! Each is one atomic primitive (an unlink) or the cluster's own re-driven
//! removal, and none touches a file a leader may still use:
//!
//! - deleted topics' tombstones are removed with the controller's own
//!   idempotent sweep (`topic::reap_tombstones`), which the controller may
//!   run at the same time: a file one of them removed first is simply gone
//!   for the other;
//! - a segment (and its indexes) that the newest manifest does not name
//!   and whose epoch is older than that manifest's is removed. No future
//!   manifest can name it (a new leader builds its manifest from the newest
//!   one, and within an epoch the older segments only ever leave it), and
//!   the only writer that may still hold it is a leader of a superseded
//!   epoch, whose appends can never be acknowledged: its fence check fails.
//!   Segments of the newest epoch or newer are left alone, as their leader
//!   may be rolling or taking over right now.
//!
//! Not repaired, because only their owner can tell whether they are still
//! in use: temps of an atomic replace, staging directories, `.nfs` files,
//! group and transaction files of superseded coordinator epochs.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use serde::Serialize;
use vfs::Vfs;

use crate::layout::{self, STAGING_PREFIX, TOMBSTONE_PREFIX};
use crate::log::audit::audit_partition;
use crate::log::manifest::parse_segment_file;
use crate::log::topic;

/// The files a segment may have.
const SEGMENT_EXTS: &[&str] = &["log", "index", "timeindex"];

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Action {
    /// Volume-relative path.
    pub path: String,
    pub what: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Repairs {
    /// What was removed.
    pub done: Vec<Action>,
    /// What should have been removed and could not be yet (run again).
    pub pending: Vec<Action>,
}

impl Repairs {
    fn note(&mut self, done: io::Result<()>, path: &Path, what: &str) {
        let action = |what: String| Action {
            path: path.display().to_string(),
            what,
        };
        match done {
            Ok(()) => self.done.push(action(what.to_owned())),
            // Someone (a controller, a retention pass) removed it first.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => self.pending.push(action(format!("{what}: {e}"))),
        }
    }

    pub fn human(&self) -> String {
        let mut out = String::new();
        for a in &self.done {
            out.push_str(&format!("repaired {}: {}\n", a.path, a.what));
        }
        for a in &self.pending {
            out.push_str(&format!("NOT repaired {}: {}\n", a.path, a.what));
        }
        out
    }
}

/// Performs the safe repairs. An `Err` is a volume whose topics cannot be
/// listed at all.
pub async fn repair(vfs: &dyn Vfs) -> io::Result<Repairs> {
    let mut repairs = Repairs::default();
    let topics_dir = Path::new(layout::TOPICS_DIR);
    let entries = match vfs.read_dir(topics_dir).await {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(repairs),
        Err(e) => return Err(e),
    };
    let tombstones: BTreeSet<String> = entries
        .iter()
        .filter(|e| e.name.starts_with(TOMBSTONE_PREFIX))
        .map(|e| e.name.clone())
        .collect();
    if !tombstones.is_empty() {
        let left: BTreeSet<String> = topic::reap_tombstones(vfs).await?.into_iter().collect();
        for name in &tombstones {
            let path = topics_dir.join(name);
            let done = if left.contains(name) {
                Err(io::Error::other(
                    "files still open somewhere (.nfs) or the volume refused; the controller \
                     retries",
                ))
            } else {
                Ok(())
            };
            repairs.note(done, &path, "deleted topic's files removed");
        }
    }
    for e in entries {
        if e.name.starts_with(STAGING_PREFIX)
            || e.name.starts_with(TOMBSTONE_PREFIX)
            || e.name.starts_with('.')
            || topics_dir.join(&e.name) == Path::new(layout::NAMES_DIR)
        {
            continue;
        }
        // A topic without a readable meta is reported by the check; its
        // partitions are not guessed at.
        let Ok(meta) = topic::read_meta(vfs, &e.name).await else {
            continue;
        };
        for p in 0..meta.partitions {
            orphans(vfs, &layout::partition_dir(&meta.id, p), &mut repairs).await;
        }
    }
    Ok(repairs)
}

/// Removes the segments of superseded epochs that the newest manifest of
/// the partition in `dir` does not name.
async fn orphans(vfs: &dyn Vfs, dir: &Path, repairs: &mut Repairs) {
    let Ok(Some(audit)) = audit_partition(vfs, dir).await else {
        return;
    };
    let named: BTreeSet<(i64, u32)> = audit
        .segments
        .iter()
        .filter_map(|s| parse_segment_file(s).map(|(base, epoch, _)| (base, epoch)))
        .collect();
    let Ok(listing) = vfs.read_dir(dir).await else {
        return;
    };
    for e in listing {
        let Some((base, epoch, ext)) = parse_segment_file(&e.name) else {
            continue;
        };
        if !SEGMENT_EXTS.contains(&ext) || epoch >= audit.epoch || named.contains(&(base, epoch)) {
            continue;
        }
        let path = dir.join(&e.name);
        let what = format!(
            "segment file of epoch {epoch} that the newest manifest (epoch {}) does not name",
            audit.epoch
        );
        repairs.note(vfs.unlink(&path).await, &path, &what);
    }
}
