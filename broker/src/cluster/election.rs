//! Controller election: exclusive-create claims of consecutive epochs.
//!
//! `cluster/controller-<epoch>` is claimed (vfs::durable::claim) by the
//! broker that becomes controller for that epoch; the claim names its broker
//! id. Every claimant asks for the epoch after the newest it can find, so
//! claims are consecutive and the newest one is found by opening upward
//! until a name is missing (opens by path are fresh; listings are not).

use std::io;
use std::path::PathBuf;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, create_slot, fill_slot, read_claim};

pub(crate) fn claim_path(epoch: u32) -> PathBuf {
    crate::layout::controller_claim(epoch)
}

/// The newest claimed controller epoch at or above `from` (0: none yet).
pub(crate) async fn newest_epoch(vfs: &dyn Vfs, from: u32) -> io::Result<u32> {
    let mut epoch = from;
    while vfs::exists_now(vfs, &claim_path(epoch + 1)).await? {
        epoch += 1;
    }
    Ok(epoch)
}

/// Who holds controller epoch `epoch`, from `me`'s point of view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    Me,
    Broker(u32),
    /// Claimed but not (yet) readable: nobody may act as its controller.
    Undecided,
}

pub async fn holder(vfs: &dyn Vfs, epoch: u32, me: &ClaimToken) -> io::Result<Holder> {
    Ok(match read_claim(vfs, &claim_path(epoch), me).await? {
        Claim::Won => Holder::Me,
        Claim::Lost { payload, .. } => Holder::Broker(parse_broker(&payload)?),
        Claim::Undecided(_) => Holder::Undecided,
    })
}

/// Tries to become controller of `epoch`: `vfs::durable::claim`'s steps,
/// with fault points of the election's own between them (the generic
/// claim's points are reached by every leader-epoch and coordinator claim
/// too, so a world aiming at elections would rarely hold a controller
/// claimant there). A claimant held after its create leaves the epoch
/// undecided for a rival that chose the same epoch.
pub(crate) async fn try_claim(
    vfs: &dyn Vfs,
    epoch: u32,
    broker: u32,
    me: &ClaimToken,
) -> io::Result<Holder> {
    let slot = claim_path(epoch);
    if let Some(file) = create_slot(vfs, &slot).await? {
        vfs::fault_point!(vfs, "election.slot-created");
        fill_slot(file, me, broker.to_string().as_bytes()).await?;
        vfs::fault_point!(vfs, "election.slot-filled");
    }
    Ok(match read_claim(vfs, &slot, me).await? {
        Claim::Won => Holder::Me,
        Claim::Lost { payload, .. } => Holder::Broker(parse_broker(&payload)?),
        Claim::Undecided(_) => Holder::Undecided,
    })
}

fn parse_broker(payload: &[u8]) -> io::Result<u32> {
    std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "controller claim names no broker id",
            )
        })
}
