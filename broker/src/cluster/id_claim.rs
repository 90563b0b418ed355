//! One process per broker id: each start of broker N claims the next slot
//! `brokers/N.claim-<k>` by exclusive create, the contract's primitive for
//! "exactly one racer wins". Two processes started together with one id
//! aim at the same slot; one creates it, the other is told it exists and
//! exits. A process that finds a newer decided slot than its own was
//! superseded (the newer process judged it dead: a stalled heartbeat) and
//! stops, so the newest claim is the one that runs, as with every epoch
//! on the volume.
//!
//! The newest slot is found by opening upward from the newest a listing
//! shows (opens by path are fresh, listings may be a minute old). Old slots
//! are removed, but only far enough behind the newest that a stale
//! listing still names one that exists; one that does not is a listing
//! older than the sweep, and the start retries.

use std::io;
use std::time::Duration;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, claim, read_claim};

use crate::cluster::heartbeat;
use crate::layout::BROKERS_DIR;

/// Slots kept behind the newest: a listing is at most a minute old, and a
/// start that finds a claim waits two heartbeat intervals first, so far
/// fewer starts than this fit in a listing's age.
const KEEP: u64 = 32;

/// How long a slot that exists but holds no complete claim is watched
/// before it counts as abandoned (a claimant that crashed after creating
/// it, or this process's own create whose reply was lost).
const UNDECIDED_WAIT: Duration = Duration::from_secs(1);
const UNDECIDED_LOOKS: u32 = 5;

use crate::layout::{id_claim as slot_path, id_claim_prefix as slot_prefix};

/// The slot number of a claim file of `broker`, from its name.
fn parse_slot(broker: u32, name: &str) -> Option<u64> {
    let digits = name.strip_prefix(&slot_prefix(broker))?;
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Whether a file name in `brokers/` is a broker id claim (for fsck).
pub(crate) fn is_claim_name(name: &str) -> bool {
    name.split_once('.')
        .and_then(|(id, _)| id.parse::<u32>().ok())
        .is_some_and(|id| parse_slot(id, name).is_some())
}

/// This process's claim of its broker id.
#[derive(Clone, Debug)]
pub struct IdClaim {
    pub broker_id: u32,
    pub slot: u64,
    token: ClaimToken,
}

/// The slots of `broker` a listing of `brokers/` shows, oldest first.
async fn listed_slots(vfs: &dyn Vfs, broker: u32) -> io::Result<Vec<u64>> {
    let mut slots: Vec<u64> = vfs
        .read_dir(std::path::Path::new(BROKERS_DIR))
        .await?
        .iter()
        .filter_map(|e| parse_slot(broker, &e.name))
        .collect();
    slots.sort_unstable();
    Ok(slots)
}

/// The newest slot of `broker` that exists now, if any.
async fn newest_slot(vfs: &dyn Vfs, broker: u32) -> io::Result<Option<u64>> {
    let Some(&listed) = listed_slots(vfs, broker).await?.last() else {
        // None listed: none may be newer than a minute; open from 0.
        return probe_up(vfs, broker, None).await;
    };
    if !vfs::exists_now(vfs, &slot_path(broker, listed)).await? {
        return Err(io::Error::other(format!(
            "{} is listed but gone: the listing is older than the sweep of old claims",
            slot_path(broker, listed).display()
        )));
    }
    probe_up(vfs, broker, Some(listed)).await
}

async fn probe_up(vfs: &dyn Vfs, broker: u32, from: Option<u64>) -> io::Result<Option<u64>> {
    let mut newest = from;
    loop {
        let next = newest.map_or(0, |n| n + 1);
        if !vfs::exists_now(vfs, &slot_path(broker, next)).await? {
            return Ok(newest);
        }
        newest = Some(next);
    }
}

fn refuse(broker: u32, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "broker id {broker} is already taken: {why}; stop the other process or give this \
             broker another --broker-id (KAAS_BROKER_ID)"
        ),
    )
}

fn holder_label(holder: &[u8]) -> String {
    String::from_utf8_lossy(holder).into_owned()
}

/// Claims broker id `broker` for this process, or fails with `AddrInUse`
/// if another process runs as it. `wait` must be longer than a heartbeat
/// interval: a process found by its claim or heartbeat is live if its
/// heartbeat moves, or a newer claim appears, within it. A crashed or
/// stopped predecessor (a restart) leaves both still, and the claim goes on.
///
/// Re-driven with the same `token` after an error, it finds its own
/// earlier win.
pub async fn claim_id(
    vfs: &dyn Vfs,
    broker: u32,
    wait: Duration,
    token: &ClaimToken,
) -> io::Result<IdClaim> {
    let newest = newest_slot(vfs, broker).await?;
    if let Some(slot) = newest
        && read_claim(vfs, &slot_path(broker, slot), token).await? == Claim::Won
    {
        return Ok(IdClaim {
            broker_id: broker,
            slot,
            token: token.clone(),
        });
    }
    let before = last_heartbeat(vfs, broker).await?;
    if newest.is_some() || before.is_some() {
        tracing::info!(
            broker_id = broker,
            wait_ms = wait.as_millis() as u64,
            "checking that no other process runs as this broker"
        );
        tokio::time::sleep(wait).await;
        let after = last_heartbeat(vfs, broker).await?;
        if let Some(hb) = after.as_ref().filter(|hb| {
            before
                .as_ref()
                .is_none_or(|b| (b.incarnation, b.sequence) != (hb.incarnation, hb.sequence))
        }) {
            return Err(refuse(
                broker,
                format!(
                    "another process (incarnation {:016x}, advertising {}) published a \
                     heartbeat within the last {} ms",
                    hb.incarnation,
                    hb.advertised,
                    wait.as_millis()
                ),
            ));
        }
    }
    let mut slot = newest.map_or(0, |n| n + 1);
    loop {
        let path = slot_path(broker, slot);
        let mut outcome = claim(vfs, &path, token, b"").await?;
        let mut looks = 0;
        while matches!(outcome, Claim::Undecided(_)) && looks < UNDECIDED_LOOKS {
            tokio::time::sleep(UNDECIDED_WAIT).await;
            outcome = read_claim(vfs, &path, token).await?;
            looks += 1;
        }
        match outcome {
            Claim::Won => {
                let won = IdClaim {
                    broker_id: broker,
                    slot,
                    token: token.clone(),
                };
                sweep_old(vfs, &won).await;
                return Ok(won);
            }
            Claim::Lost { holder, .. } => {
                return Err(refuse(
                    broker,
                    format!(
                        "another process ({}) claimed it while this one was starting",
                        holder_label(&holder)
                    ),
                ));
            }
            Claim::Undecided(why) => {
                tracing::warn!(
                    slot = %path.display(),
                    %why,
                    "broker id claim slot abandoned half-made; claiming the next"
                );
                slot += 1;
            }
        }
    }
}

/// A newer process's claim of this broker id, if one is decided: the
/// label of its holder. Slots above this one that hold no complete claim
/// (a claimant that crashed half-way) are looked past.
pub async fn superseded_by(vfs: &dyn Vfs, mine: &IdClaim) -> io::Result<Option<String>> {
    let mut slot = mine.slot + 1;
    loop {
        match read_claim(vfs, &slot_path(mine.broker_id, slot), &mine.token).await {
            Ok(Claim::Lost { holder, .. }) => return Ok(Some(holder_label(&holder))),
            Ok(Claim::Won | Claim::Undecided(_)) => slot += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Removes this broker id's claims more than `KEEP` behind `won`. Only
/// the winner of the newest slot sweeps; a leftover is harmless.
async fn sweep_old(vfs: &dyn Vfs, won: &IdClaim) {
    let Ok(slots) = listed_slots(vfs, won.broker_id).await else {
        return;
    };
    for old in slots.into_iter().filter(|s| s + KEEP < won.slot) {
        let path = slot_path(won.broker_id, old);
        if let Err(e) = vfs.unlink(&path).await
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!(slot = %path.display(), error = %e, "old broker id claim stays");
        }
    }
}

async fn last_heartbeat(vfs: &dyn Vfs, id: u32) -> io::Result<Option<heartbeat::Heartbeat>> {
    match heartbeat::read(vfs, id).await {
        Ok(hb) => Ok(Some(hb)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        // Not a heartbeat kaas wrote (an atomic replace is never torn):
        // nobody live is writing it; ours will replace it.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            tracing::warn!(error = %e, "ignoring an unreadable heartbeat of this broker id");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[path = "id_claim_tests.rs"]
mod tests;
