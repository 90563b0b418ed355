//! Cluster-wide documents changed by compare-and-swap, one file per version
//! (`<dir>/<name>-<n>`): the SCRAM credentials and the ACLs.
//!
//! Any broker may take a change (an admin client talks to whichever broker
//! it likes), so a change is a read, an edit and a write that must not lose
//! a concurrent change. Version `n + 1` is made by exclusive create
//! (`claim`): of two writers, exactly one gets it; the other re-reads and
//! edits the newer document. The version number is the fence: nobody ever
//! writes a version that exists, and readers never take an older version
//! than one they already applied.
//!
//! A version that exists but holds no complete claim (its writer is slow,
//! crashed, or lost its create's reply) cannot be read. A writer that finds
//! the newest version so waits [`UNDECIDED_WAIT`] from the moment it first
//! saw it, then writes the next version on top of the newest complete one.
//! This cannot drop an acknowledged change, because a writer acknowledges
//! only when its whole claim took less than [`WRITE_DEADLINE`] (well under
//! the wait) from before its create: by the time anyone gives up on a
//! version, a write that is going to be acknowledged has long completed.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, create_slot, fill_slot, make_durable, read_claim};

/// A writer acknowledges its change only if its claim completed within this.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(4);
/// How long a writer waits for an incomplete newest version to complete.
pub const UNDECIDED_WAIT: Duration = Duration::from_secs(12);

/// One versioned document on the volume.
#[derive(Clone, Debug)]
pub struct Versioned {
    dir: PathBuf,
    name: &'static str,
    family: Family,
}

/// Whose fault points a document's changes reach: each kind of document is
/// a protocol family of its own to the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The credentials and the ACLs (`security-change.*`).
    Security,
    /// The operator's preferred leaders (`preferred-change.*`).
    Preferred,
    /// The client quotas (`quota-change.*`).
    Quotas,
}

/// The step boundaries of a change.
#[derive(Clone, Copy)]
enum Step {
    /// The newest document read and about to be edited.
    Read,
    /// The next version's file created, not filled yet.
    SlotCreated,
    /// The next version claimed (or lost), not acknowledged yet.
    Claimed,
}

/// A version read: its number and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub number: u64,
    pub payload: Bytes,
}

/// Why a change was not made.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError<E> {
    /// The edit refused the change (the caller's own error).
    #[error("{0}")]
    Refused(E),
    /// The volume failed, or the change could not be confirmed in time: it
    /// may or may not take effect (like a Kafka request that timed out).
    #[error("{0}")]
    Volume(#[from] io::Error),
}

impl Versioned {
    pub fn new(dir: impl Into<PathBuf>, name: &'static str) -> Self {
        Self {
            dir: dir.into(),
            name,
            family: Family::Security,
        }
    }

    pub fn in_family(self, family: Family) -> Self {
        Self { family, ..self }
    }

    async fn reached(&self, vfs: &dyn Vfs, step: Step) {
        let _ = vfs;
        match (self.family, step) {
            (Family::Security, Step::Read) => vfs::fault_point!(vfs, "security-change.read"),
            (Family::Security, Step::SlotCreated) => {
                vfs::fault_point!(vfs, "security-change.slot-created")
            }
            (Family::Security, Step::Claimed) => {
                vfs::fault_point!(vfs, "security-change.claimed")
            }
            (Family::Preferred, Step::Read) => vfs::fault_point!(vfs, "preferred-change.read"),
            (Family::Preferred, Step::SlotCreated) => {
                vfs::fault_point!(vfs, "preferred-change.slot-created")
            }
            (Family::Preferred, Step::Claimed) => {
                vfs::fault_point!(vfs, "preferred-change.claimed")
            }
            (Family::Quotas, Step::Read) => vfs::fault_point!(vfs, "quota-change.read"),
            (Family::Quotas, Step::SlotCreated) => {
                vfs::fault_point!(vfs, "quota-change.slot-created")
            }
            (Family::Quotas, Step::Claimed) => vfs::fault_point!(vfs, "quota-change.claimed"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    fn path(&self, n: u64) -> PathBuf {
        crate::layout::versioned(&self.dir, self.name, n)
    }

    async fn exists(&self, vfs: &dyn Vfs, n: u64) -> io::Result<bool> {
        vfs::exists_now(vfs, &self.path(n)).await
    }

    /// The number of the newest version that exists (complete or not), found
    /// from `known` (a version known to exist, or 0) by galloping and
    /// bisection: versions are dense, since a writer only ever creates the
    /// one after the newest.
    pub async fn top(&self, vfs: &dyn Vfs, known: u64) -> io::Result<u64> {
        let (mut low, mut step) = (known, 1u64);
        let high = loop {
            let probe = low.saturating_add(step);
            if !self.exists(vfs, probe).await? {
                break probe;
            }
            low = probe;
            step = step.saturating_mul(2);
        };
        // low exists (or is `known`), high does not.
        let mut high = high;
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if self.exists(vfs, mid).await? {
                low = mid;
            } else {
                high = mid;
            }
        }
        Ok(low)
    }

    /// The newest complete version above `known`, if any: what a reader that
    /// applied `known` applies next (it never goes back). It is made
    /// durable first: its writer may have died between its write and its
    /// fsync, and a server restart would take back what readers applied.
    pub async fn newer_than(&self, vfs: &dyn Vfs, known: u64) -> io::Result<Option<Version>> {
        let top = self.top(vfs, known).await?;
        let newest = self.newest_complete(vfs, known, top).await?;
        if let Some(v) = &newest {
            make_durable(vfs, &self.path(v.number)).await?;
        }
        Ok(newest)
    }

    async fn newest_complete(
        &self,
        vfs: &dyn Vfs,
        above: u64,
        top: u64,
    ) -> io::Result<Option<Version>> {
        let reader = ClaimToken::fresh("versioned-reader");
        for n in (above + 1..=top).rev() {
            match read_claim(vfs, &self.path(n), &reader).await? {
                Claim::Lost { payload, .. } => {
                    return Ok(Some(Version { number: n, payload }));
                }
                // A missing version below the top was never there to read
                // (a volume damaged by hand): the older ones still count.
                Claim::Undecided(_) | Claim::Won => {}
            }
        }
        Ok(None)
    }

    /// Claims version `n` with `payload`: `vfs::durable::claim`, with a
    /// fault point of its own between the create and the fill, the window
    /// in which other writers find the version incomplete.
    async fn claim(
        &self,
        vfs: &dyn Vfs,
        n: u64,
        token: &ClaimToken,
        payload: &[u8],
    ) -> io::Result<Claim> {
        let slot = self.path(n);
        if let Some(file) = create_slot(vfs, &slot).await? {
            self.reached(vfs, Step::SlotCreated).await;
            fill_slot(file, token, payload).await?;
        }
        read_claim(vfs, &slot, token).await
    }

    /// Applies `edit` to the newest document (`T::default()` before the
    /// first version) and writes the result as the next version, retrying
    /// on a concurrent change. Returns the version written and the document.
    pub async fn change<T, E>(
        &self,
        vfs: &dyn Vfs,
        edit: impl Fn(&mut T) -> Result<(), E>,
    ) -> Result<(u64, T), ChangeError<E>>
    where
        T: Serialize + DeserializeOwned + Default,
    {
        let token = ClaimToken::fresh("versioned-writer");
        // The incomplete newest version seen, and since when.
        let mut undecided: Option<(u64, Instant)> = None;
        for _ in 0..64 {
            let top = self.top(vfs, 0).await?;
            let (base, mut doc) = match self.newest_complete(vfs, 0, top).await? {
                Some(v) => (v.number, decode::<T>(self.name, &v)?),
                None => (0, T::default()),
            };
            if base < top {
                let since = match undecided {
                    Some((n, since)) if n == top => since,
                    _ => Instant::now(),
                };
                undecided = Some((top, since));
                if since.elapsed() < UNDECIDED_WAIT {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                tracing::warn!(
                    document = self.name,
                    version = top,
                    "version still incomplete after {UNDECIDED_WAIT:?}: writing over it"
                );
            }
            self.reached(vfs, Step::Read).await;
            if let Err(refused) = edit(&mut doc) {
                // A refusal may mean "already so" (the caller answers
                // success): then the version that says so must be durable.
                // Its writer may have died between its write and its fsync,
                // and a server restart would take it back after this answer.
                if base > 0 {
                    make_durable(vfs, &self.path(base)).await?;
                }
                return Err(ChangeError::Refused(refused));
            }
            let json = serde_json::to_vec(&doc).map_err(io::Error::other)?;
            let started = Instant::now();
            let claimed = self.claim(vfs, top + 1, &token, &json).await?;
            self.reached(vfs, Step::Claimed).await;
            match claimed {
                Claim::Won if started.elapsed() < WRITE_DEADLINE => return Ok((top + 1, doc)),
                Claim::Won => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "{} version {}: the write took {:?}, longer than the {WRITE_DEADLINE:?} \
                             after which others may write over it; not confirmed",
                            self.name,
                            top + 1,
                            started.elapsed()
                        ),
                    )
                    .into());
                }
                Claim::Lost { .. } => continue,
                Claim::Undecided(e) => {
                    return Err(io::Error::other(format!(
                        "{} version {}: the claim cannot be confirmed ({e}); it may or may not \
                         take effect",
                        self.name,
                        top + 1
                    ))
                    .into());
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("{}: kept changing under this change", self.name),
        )
        .into())
    }
}

/// Decodes a version's JSON.
pub fn decode<T: DeserializeOwned>(name: &str, v: &Version) -> io::Result<T> {
    serde_json::from_slice(&v.payload).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name} version {}: {e}", v.number),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use super::*;

    /// A version whose writer crashed after writing it and before its
    /// fsync is seen by others (its pages reached the server) and taken
    /// back by a server restart. A change refused as "already so" on top
    /// of it is answered as a success: the version must outlive that.
    /// A model NFS where `["a"]` is version 1 of a document, written by a
    /// writer that crashed before its fsync: other hosts see it (its pages
    /// reached the server) and a server restart takes it back.
    async fn version_written_without_fsync() -> (vfs::model::ModelNfs, Versioned) {
        use vfs::OpenOptions;
        use vfs::model::{Faults, ModelNfs, NfsConfig};
        let config = NfsConfig {
            faults: Faults {
                crash_landed_probability: 1.0,
                ..Faults::default()
            },
            ..NfsConfig::default()
        };
        let nfs = ModelNfs::new(config, 1);
        let (writer, other) = (nfs.host(1), nfs.host(2));
        let doc = store(&other).await;
        // Version 1's bytes, made durably elsewhere, then written as
        // version 1 by the writer, which crashes before its fsync.
        let scratch = Path::new("security").join("scratch");
        vfs::durable::claim(&other, &scratch, &ClaimToken::fresh("w"), b"[\"a\"]")
            .await
            .unwrap();
        let bytes = vfs::read_file(&other, &scratch).await.unwrap();
        let file = writer
            .open(&doc.path(1), OpenOptions::create_new())
            .await
            .unwrap();
        file.write_at(0, Bytes::from(bytes)).await.unwrap();
        nfs.crash_host(1);
        (nfs, doc)
    }

    /// A reader applies only what outlives a server restart.
    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn a_version_read_to_be_applied_is_made_durable() {
        let (nfs, doc) = version_written_without_fsync().await;
        let reader = nfs.host(2);
        let applied = doc.newer_than(&reader, 0).await.unwrap().unwrap();
        assert_eq!(applied.number, 1);
        nfs.restart_server();
        let other = nfs.host(3);
        let after = doc.newer_than(&other, 0).await.unwrap();
        assert_eq!(
            after.map(|v| v.number),
            Some(1),
            "an applied version was taken back"
        );
    }

    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn a_change_already_made_confirms_the_version_that_made_it() {
        let (nfs, doc) = version_written_without_fsync().await;
        let changer = nfs.host(2);
        let refused = doc
            .change(&changer, |d: &mut BTreeSet<String>| {
                if d.contains("a") {
                    Err("already so")
                } else {
                    Ok(())
                }
            })
            .await;
        assert!(matches!(refused, Err(ChangeError::Refused("already so"))));
        nfs.restart_server();
        let after = doc.newer_than(&changer, 0).await.unwrap().unwrap();
        assert_eq!(after.number, 1);
        let kept: BTreeSet<String> = decode("doc", &after).unwrap();
        assert!(kept.contains("a"), "the change answered as made is gone");
    }

    async fn store(vfs: &dyn Vfs) -> Versioned {
        vfs.mkdir(Path::new("security")).await.unwrap();
        Versioned::new("security", "doc")
    }

    #[tokio::test]
    async fn versions_are_found_by_galloping_and_never_go_back() {
        let vfs = vfs::MemVfs::new();
        let doc = store(&vfs).await;
        assert_eq!(doc.newer_than(&vfs, 0).await.unwrap(), None);
        for i in 1..=37u32 {
            let (n, set) = doc
                .change::<BTreeSet<u32>, ()>(&vfs, |s| {
                    s.insert(i);
                    Ok(())
                })
                .await
                .unwrap();
            assert_eq!(n, u64::from(i));
            assert_eq!(set.len(), i as usize);
        }
        assert_eq!(doc.top(&vfs, 0).await.unwrap(), 37);
        assert_eq!(doc.top(&vfs, 20).await.unwrap(), 37);
        let v = doc.newer_than(&vfs, 30).await.unwrap().unwrap();
        assert_eq!(v.number, 37);
        assert_eq!(doc.newer_than(&vfs, 37).await.unwrap(), None);
    }

    #[tokio::test]
    async fn concurrent_changes_are_all_kept() {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        let doc = store(vfs.as_ref()).await;
        let mut tasks = Vec::new();
        for i in 0..8u32 {
            let (vfs, doc) = (vfs.clone(), doc.clone());
            tasks.push(tokio::spawn(async move {
                doc.change::<BTreeSet<u32>, ()>(vfs.as_ref(), |s| {
                    s.insert(i);
                    Ok(())
                })
                .await
                .unwrap()
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let v = doc.newer_than(vfs.as_ref(), 0).await.unwrap().unwrap();
        let set: BTreeSet<u32> = decode("doc", &v).unwrap();
        assert_eq!(set, (0..8).collect());
    }

    #[tokio::test(start_paused = true)]
    async fn an_incomplete_version_is_waited_for_then_written_over() {
        let vfs = vfs::MemVfs::new();
        let doc = store(&vfs).await;
        doc.change::<BTreeSet<u32>, ()>(&vfs, |s| {
            s.insert(1);
            Ok(())
        })
        .await
        .unwrap();
        // A writer that crashed after its create: version 2, empty.
        let f = vfs
            .open(&doc.path(2), vfs::OpenOptions::create_new())
            .await
            .unwrap();
        f.close().await.unwrap();
        let started = Instant::now();
        let (n, set) = doc
            .change::<BTreeSet<u32>, ()>(&vfs, |s| {
                s.insert(3);
                Ok(())
            })
            .await
            .unwrap();
        assert!(started.elapsed() >= UNDECIDED_WAIT);
        assert_eq!((n, set), (3, BTreeSet::from([1, 3])));
        let refused = doc.change::<BTreeSet<u32>, &str>(&vfs, |_| Err("no")).await;
        assert!(matches!(refused, Err(ChangeError::Refused("no"))));
    }
}
