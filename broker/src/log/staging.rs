//! Staging directories and who may remove them.
//!
//! A topic is built under `topics/.staging-<id>@<broker>.<incarnation>`
//! and an added partition under `topics/<id>/.staging-<p>-<hex>@<broker>.<incarnation>`,
//! then renamed into place in one step. The suffix names the creator: the
//! broker and the heartbeat incarnation of the process building it.
//!
//! The rule (docs/protocols.md, "Who may remove a staging directory"): a
//! staging directory is taken for abandoned only when its creator can no
//! longer finish it, which the sweeper judges from the controller's
//! assignment (the live brokers and their incarnations): a creator that is
//! not live there, seen so for at least a grace period (one session
//! timeout, so a broker that started serving before the controller
//! registered it is not mistaken for a dead one). Even then the sweeper
//! does not remove files in place: it renames the staging directory to a
//! tombstone first. The creator's own rename into place and the sweeper's
//! rename to a tombstone have the same source, so exactly one of them
//! happens (rule 1): either the topic lands whole, or the creator finds its
//! staging gone and starts over with a fresh one. A creator that was only
//! paused therefore loses at most a retry, never files of a topic it is
//! about to name.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;
use vfs::Vfs;
use vfs::durable::converge_remove;

#[cfg(madsim)]
#[path = "../historical/staging_sweep.rs"]
mod staging_sweep;

pub(crate) use crate::layout::{STAGING_PREFIX, TOMBSTONE_PREFIX};

/// Which processes the controller's assignment lists as live, by broker id
/// and heartbeat incarnation: all the log needs of the cluster's view (the
/// cluster implements it for its assignment's brokers).
pub trait LiveBrokers: Sync {
    /// The incarnation of `broker` the assignment lists, if it lists it.
    fn incarnation(&self, broker: u32) -> Option<u64>;
}

impl LiveBrokers for BTreeMap<u32, u64> {
    fn incarnation(&self, broker: u32) -> Option<u64> {
        self.get(&broker).copied()
    }
}

/// The process building a staging directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creator {
    pub broker: u32,
    pub incarnation: u64,
}

impl Creator {
    /// `@<broker>.<incarnation hex>`, the suffix of every staging name.
    pub fn suffix(&self) -> String {
        crate::layout::staging_suffix(self.broker, self.incarnation)
    }

    /// Whether the assignment's live brokers include this very process.
    pub(crate) fn is_live(&self, live: &dyn LiveBrokers) -> bool {
        live.incarnation(self.broker) == Some(self.incarnation)
    }
}

/// The creator named by a staging entry; `None` for a name without one
/// (written by a kaas from before the rule) or not a staging name at all.
pub(crate) fn creator_of(entry: &str) -> Option<Creator> {
    let rest = entry.strip_prefix(STAGING_PREFIX)?;
    let (_, who) = rest.rsplit_once('@')?;
    let (broker, incarnation) = who.split_once('.')?;
    Some(Creator {
        broker: broker.parse().ok()?,
        incarnation: u64::from_str_radix(incarnation, 16).ok()?,
    })
}

/// The staging path of topic `id` built by `creator`.
pub(crate) fn topic_staging(topics_dir: &Path, id: &str, creator: &Creator) -> PathBuf {
    crate::layout::topic_staging(topics_dir, id, &creator.suffix())
}

/// The staging path of partition `p` of the topic in `topic_dir`.
pub(crate) fn partition_staging(topic_dir: &Path, p: u32, creator: &Creator) -> PathBuf {
    crate::layout::partition_staging(
        topic_dir,
        p,
        madsim::rand::random::<u64>(),
        &creator.suffix(),
    )
}

/// Whether the staging entry `name` may be swept now: its creator is not
/// live in the assignment and has not been for `seen_for >= grace`.
pub fn abandoned(name: &str, live: &dyn LiveBrokers, seen_for: Duration, grace: Duration) -> bool {
    let live_creator = creator_of(name).is_some_and(|c| c.is_live(live));
    !live_creator && seen_for >= grace
}

/// What one sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Staging directories turned into tombstones this time.
    pub taken: Vec<String>,
    /// Staging directories kept: a live creator, or not yet past the grace.
    pub kept: usize,
}

/// The controller's sweep of `topics/.staging-*`. It remembers when it
/// first saw each staging directory (its own clock, only for *when*), so a
/// new controller starts the grace over.
#[derive(Debug)]
pub struct StagingSweep {
    grace: Duration,
    seen: BTreeMap<String, Instant>,
}

impl StagingSweep {
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            seen: BTreeMap::new(),
        }
    }

    /// Takes every abandoned staging directory of `dir` (renamed to a
    /// tombstone, which [`super::topic::reap_tombstones`] removes).
    pub async fn run(
        &mut self,
        vfs: &dyn Vfs,
        dir: &Path,
        live: &dyn LiveBrokers,
    ) -> io::Result<Swept> {
        #[cfg(madsim)]
        if crate::historical::on("staging-sweep") {
            return staging_sweep::remove_every_staging_in_place(vfs, dir).await;
        }
        let now = Instant::now();
        let mut listed = BTreeSet::new();
        let mut swept = Swept::default();
        for entry in vfs.read_dir(dir).await? {
            if !entry.name.starts_with(STAGING_PREFIX) {
                continue;
            }
            let first = *self.seen.entry(entry.name.clone()).or_insert(now);
            listed.insert(entry.name.clone());
            if !abandoned(&entry.name, live, now.duration_since(first), self.grace) {
                swept.kept += 1;
                continue;
            }
            match take(vfs, dir, &entry.name).await {
                Ok(()) => swept.taken.push(entry.name),
                Err(e) => {
                    tracing::debug!(entry = %entry.name, error = %e, "sweeping a staging directory; retrying next tick")
                }
            }
        }
        // Forget what the listing no longer shows (placed, or swept).
        self.seen.retain(|name, _| listed.contains(name));
        Ok(swept)
    }
}

/// Renames the staging entry `name` of `dir` to a tombstone and removes
/// what it can of it now; the rest is re-driven by the tombstone reaper.
/// `NotFound` is no error: the creator placed it first, or an earlier
/// rename of ours happened and lost its reply.
pub async fn take(vfs: &dyn Vfs, dir: &Path, name: &str) -> io::Result<()> {
    let Some(rest) = name.strip_prefix(STAGING_PREFIX) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is not a staging directory"),
        ));
    };
    let tombstone = crate::layout::staging_tombstone(dir, rest);
    match vfs.rename(&dir.join(name), &tombstone).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    tracing::info!(staging = %dir.join(name).display(), "swept a staging directory whose creator is gone");
    if let Err(e) = converge_remove(vfs, &tombstone).await {
        tracing::debug!(tombstone = %tombstone.display(), error = %e, "left for the reaper");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(entries: &[(u32, u64)]) -> BTreeMap<u32, u64> {
        entries.iter().copied().collect()
    }

    #[test]
    fn a_staging_name_names_its_creator() {
        let c = Creator {
            broker: 7,
            incarnation: 0xabc,
        };
        let path = topic_staging(Path::new("topics"), "1234-ab", &c);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert_eq!(name, ".staging-1234-ab@7.0000000000000abc");
        assert_eq!(creator_of(name), Some(c));
        assert_eq!(creator_of(".staging-1234-ab"), None, "older names");
        assert_eq!(creator_of(".staging-x@7.zz"), None);
        assert_eq!(creator_of(".tombstone-x@7.1"), None);
    }

    #[test]
    fn a_live_creator_is_never_swept_however_old() {
        let name = ".staging-t@1.00000000000000aa";
        let hour = Duration::from_secs(3600);
        assert!(!abandoned(
            name,
            &live(&[(1, 0xaa)]),
            hour,
            Duration::from_secs(10)
        ));
    }

    #[test]
    fn a_gone_creator_is_swept_after_the_grace() {
        let name = ".staging-t@1.00000000000000aa";
        let grace = Duration::from_secs(10);
        // Restarted (another incarnation), dead (not listed), or from before
        // the rule (no creator): after the grace, and not before.
        for l in [live(&[(1, 0xbb)]), live(&[(2, 0xaa)])] {
            assert!(!abandoned(name, &l, Duration::from_secs(9), grace));
            assert!(abandoned(name, &l, grace, grace));
        }
        assert!(abandoned(".staging-t", &live(&[(1, 0xaa)]), grace, grace));
        assert!(!abandoned(".staging-t", &live(&[]), Duration::ZERO, grace));
    }
}
