//! `kaas fsck --repair`: the fixes that are safe while the cluster runs.
//!
//! Each is one atomic primitive (an unlink) or the cluster's own re-driven
//! removal, and none touches a file a leader may still use:
//!
//! - deleted topics' tombstones are removed with the controller's own
//!   idempotent sweep (`topic::reap_tombstones`), which the controller may
//!   run at the same time: a file one of them removed first is simply gone
//!   for the other.
//!
//! Segments that no manifest names are reported by the check but not
//! removed: proving on a live cluster that no takeover in progress will
//! name one takes more than the manifests on the volume show (simulator
//! seeds 124 and 275, with repairs run back to back: a repair removed a
//! segment of an older epoch that the newest leader then named), so they
//! stay until the partition's next leader removes them: a takeover removes
//! the segments of older epochs that its own manifest does not name.
//!
//! Not repaired, because only their owner can tell whether they are still
//! in use: segments no manifest names, temps of an atomic replace, staging
//! directories, `.nfs` files, group and transaction files of superseded
//! coordinator epochs.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use serde::Serialize;
use vfs::Vfs;

use crate::layout::{self, TOMBSTONE_PREFIX};
use crate::log::topic;

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
    /// What `--truncate-damaged` gave up, partition by partition.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub truncated: Vec<super::Truncation>,
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

    /// Notes a `--truncate-damaged` of `spec`.
    pub fn note_truncation(&mut self, spec: &str, done: io::Result<super::Truncation>) {
        match done {
            Ok(t) => self.truncated.push(t),
            Err(e) => self.pending.push(Action {
                path: spec.to_owned(),
                what: format!("damage not given up: {e}"),
            }),
        }
    }

    pub fn human(&self) -> String {
        let mut out = String::new();
        for t in &self.truncated {
            out.push_str(&t.human());
        }
        for a in &self.done {
            out.push_str(&format!("repaired {}: {}\n", a.path, a.what));
        }
        for a in &self.pending {
            out.push_str(&format!("NOT repaired {}: {}\n", a.path, a.what));
        }
        if out.is_empty() {
            out.push_str(
                "repaired nothing: no deleted topic's files were left to remove (what else \
                 the report below names is left to its owner)\n",
            );
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
    Ok(repairs)
}
