//! `kaas fsck --repair --truncate-damaged TOPIC-PARTITION`: gives up the
//! damaged records of one partition, which kaas never does by itself.
//!
//! The repair is a takeover (`PartitionLog::give_up_damaged`) in an epoch
//! past every one claimed, under a token of its own: the partition's
//! leader is fenced as by any takeover (its next write, or its next read
//! of the damage, finds the newer epoch and it asks the controller for a
//! new one), and the next leader takes over from the manifest the repair
//! wrote. Each damaged segment ends where its damage begins and keeps its
//! offsets, so the offsets given up are never handed out again; a segment
//! that is gone is replaced by an empty one. A crash at any step leaves
//! either the old manifest in force (run the repair again) or the new one.

use std::io;
use std::sync::Arc;

use serde::Serialize;
use vfs::Vfs;
use vfs::durable::ClaimToken;

use crate::layout;
use crate::log::audit::newest_claimed_epoch;
use crate::log::fence::EpochClaims;
use crate::log::partition::{GivenUp, LogConfig, LogError, PartitionLog};
use crate::log::topic;

/// Claims lost to a leader that took the same new epoch first.
const ATTEMPTS: u32 = 5;

/// What one `--truncate-damaged` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Truncation {
    pub topic: String,
    pub partition: u32,
    /// The epoch the repair took the partition over in.
    pub epoch: u32,
    pub given_up: Vec<GivenUp>,
}

impl Truncation {
    pub fn human(&self) -> String {
        let tp = format!("{}-{}", self.topic, self.partition);
        if self.given_up.is_empty() {
            return format!(
                "truncated nothing in {tp}: no damage below what its manifest vouches for \
                 (taken over in epoch {} and handed back to the cluster)\n",
                self.epoch
            );
        }
        let mut out = String::new();
        for g in &self.given_up {
            out.push_str(&format!(
                "GAVE UP offsets {}..{} of {tp} ({} offsets; segment {}, damaged at position \
                 {}: {}); taken over in epoch {}, the partition's next leader serves the rest, \
                 and those offsets are never handed out again\n",
                g.from,
                g.to,
                g.to - g.from,
                g.segment,
                g.position,
                g.why,
                self.epoch
            ));
        }
        out
    }
}

/// `orders-0` as `("orders", 0)`: Kafka's own `TOPIC-PARTITION` spelling
/// (topic names may hold dashes; the partition is after the last).
pub fn parse_partition(spec: &str) -> Result<(&str, u32), String> {
    let (t, p) = spec
        .rsplit_once('-')
        .ok_or_else(|| format!("{spec:?}: expected TOPIC-PARTITION, as in orders-0"))?;
    let p = p
        .parse::<u32>()
        .map_err(|_| format!("{spec:?}: expected TOPIC-PARTITION, as in orders-0"))?;
    if t.is_empty() {
        return Err(format!("{spec:?}: no topic name"));
    }
    Ok((t, p))
}

/// Gives up the damage of partition `spec` (`TOPIC-PARTITION`, the topic
/// by name or id).
pub async fn truncate_damaged(vfs: Arc<dyn Vfs>, spec: &str) -> io::Result<Truncation> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let (name, partition) = parse_partition(spec).map_err(invalid)?;
    let meta = match topic::lookup(vfs.as_ref(), name).await {
        Ok(Some(m)) => m,
        _ => topic::read_meta(vfs.as_ref(), name)
            .await
            .map_err(|_| invalid(format!("{spec}: no topic named {name:?}")))?,
    };
    if partition >= meta.partitions {
        return Err(invalid(format!(
            "{spec}: topic {} has {} partitions",
            meta.name, meta.partitions
        )));
    }
    let dir = layout::partition_dir(&meta.id, partition);
    let token = ClaimToken::fresh("fsck-truncate-damaged");
    let mut epoch =
        newest_claimed_epoch(vfs.as_ref(), &dir, &[crate::layout::MANIFEST_PREFIX]).await? + 1;
    for _ in 0..ATTEMPTS {
        let fence = Arc::new(EpochClaims::new(vfs.clone(), dir.clone()));
        match PartitionLog::give_up_damaged(
            vfs.clone(),
            dir.clone(),
            (&meta.id, partition),
            epoch,
            &token,
            fence,
            LogConfig::default(),
        )
        .await
        {
            Ok((log, given_up)) => {
                log.close().await?;
                return Ok(Truncation {
                    topic: meta.name,
                    partition,
                    epoch,
                    given_up,
                });
            }
            // A leader took this epoch first (or its claim is undecided):
            // the next one is past it.
            Err(LogError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::AlreadyExists | io::ErrorKind::WouldBlock
                ) =>
            {
                epoch += 1;
            }
            Err(e) => return Err(io::Error::other(format!("{spec}: {e}"))),
        }
    }
    Err(io::Error::other(format!(
        "{spec}: every epoch up to {epoch} was taken by a leader first; run the repair again"
    )))
}
