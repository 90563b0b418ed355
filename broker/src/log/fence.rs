//! Leader epochs of a partition and the check that fences old leaders.
//!
//! Each leader epoch `e` of a partition is claimed by an exclusive create of
//! `epoch-<e>` in the partition directory (`vfs::durable::claim`): exactly one
//! broker leads an epoch, and the claim is what makes a takeover visible. A
//! leader of epoch `e` is fenced as soon as `epoch-<e+1>` exists; a new leader
//! makes sure every epoch between the last active one and its own has a
//! claim file, so that check is complete. A deleted topic fences its
//! leaders too: its directory is renamed to a tombstone, so the leader's own
//! claim is no longer found at its path.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, claim, claim_noting_creation};

pub(crate) use crate::layout::epoch_claim as epoch_path;

/// Answers "am I still the leader of this epoch?" by a fresh read of the
/// volume. The cluster layer will answer from its assignment; the partition
/// log only needs this interface.
#[async_trait]
pub trait LeadershipFence: Send + Sync {
    async fn still_leader(&self, epoch: u32) -> io::Result<bool>;
}

/// The partition's own epoch claims: a leader of `e` is current while no
/// `epoch-<e+1>` exists, checked by opening it by path (close-to-open, never
/// a cached lookup).
pub struct EpochClaims {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
}

impl EpochClaims {
    pub fn new(vfs: Arc<dyn Vfs>, dir: PathBuf) -> Self {
        Self { vfs, dir }
    }
}

#[async_trait]
impl LeadershipFence for EpochClaims {
    /// Current while this epoch's own claim is still where it was (the
    /// topic was not deleted: deletion renames the topic directory away)
    /// and no newer epoch was claimed. Both are opens by path.
    async fn still_leader(&self, epoch: u32) -> io::Result<bool> {
        let own = vfs::exists_now(self.vfs.as_ref(), &epoch_path(&self.dir, epoch)).await?;
        Ok(own && !vfs::exists_now(self.vfs.as_ref(), &epoch_path(&self.dir, epoch + 1)).await?)
    }
}

/// Claims epoch `epoch` for `token`: [`Claimed::Now`] if this call made
/// the claim, [`Claimed::Before`] if `token` had made it already (this
/// process led, or began to lead, the epoch before); an error says who
/// holds it otherwise.
pub(crate) async fn claim_epoch(
    vfs: &dyn Vfs,
    dir: &Path,
    epoch: u32,
    token: &ClaimToken,
) -> io::Result<Claimed> {
    let (outcome, created) =
        claim_noting_creation(vfs, &epoch_path(dir, epoch), token, b"leader").await?;
    match outcome {
        Claim::Won => Ok(if created {
            Claimed::Now
        } else {
            Claimed::Before
        }),
        Claim::Lost { holder, .. } => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "leader epoch {epoch} of {} is already claimed by {}",
                dir.display(),
                String::from_utf8_lossy(&holder)
            ),
        )),
        Claim::Undecided(why) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "leader epoch {epoch} of {} is undecided ({why}); use a newer epoch",
                dir.display()
            ),
        )),
    }
}

/// Whose call made an epoch claim that `token` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claimed {
    Now,
    Before,
}

/// Makes sure epoch `epoch` has a claim file, so its leader (if it ever
/// shows up, or is a zombie of `epoch - 1`) is fenced. Any outcome is fine:
/// the file exists afterwards.
pub(crate) async fn fence_epoch(
    vfs: &dyn Vfs,
    dir: &Path,
    epoch: u32,
    by: &ClaimToken,
) -> io::Result<()> {
    claim(vfs, &epoch_path(dir, epoch), by, b"fenced")
        .await
        .map(|_| ())
}
