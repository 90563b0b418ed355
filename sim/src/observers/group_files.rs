//! The observer's look at the committer's group (and the consumer-protocol
//! group's holders, and the transactors' transactional ids) on the volume,
//! as a new
//! coordinator would load it (`broker::groups::audit`), every [`EVERY`]
//! for the whole run; the checker holds each look against the commits
//! acknowledged before it began (commit-not-durable). A commit a deposed
//! coordinator acknowledged into its own old file, or a group file
//! removed before its successor was written, shows here at once, while an
//! OffsetFetch would notice only if the coordinator that remembers the
//! commit died before the file was repaired.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use vfs::Vfs;

use broker::groups::audit::SuccessorView;

use crate::actors::next_members::NEXT_GROUP;
use crate::actors::transactor::TXN_IDS;
use crate::history::{Event, History};
use crate::workload::{COMMITTER_GROUP, PARTITIONS, TOPIC};

const EVERY: Duration = Duration::from_millis(300);

pub(crate) async fn watch(vfs: Arc<dyn Vfs>, history: History, start: Instant) {
    look(vfs, history, start, COMMITTER_GROUP, |found, sent| {
        let offsets = (0..PARTITIONS)
            .map(|p| {
                let offset = found
                    .record
                    .as_ref()
                    .and_then(|(r, _)| {
                        r.offsets
                            .iter()
                            .find(|o| o.topic == TOPIC && o.partition == p)
                    })
                    .map_or(-1, |o| o.offset);
                (p, offset)
            })
            .collect();
        Event::GroupOnVolume {
            group: COMMITTER_GROUP.to_owned(),
            sent,
            offsets,
            file_epoch: found.record.as_ref().map(|(_, e)| *e),
            newest_epoch: found.newest_epoch,
        }
    })
    .await
}

/// The same look at the consumer-protocol group (`next_members`): who holds
/// which partition in the file (holding-not-durable).
pub(crate) async fn watch_holders(vfs: Arc<dyn Vfs>, history: History, start: Instant) {
    look(vfs, history, start, NEXT_GROUP, |found, sent| {
        let members = found
            .record
            .and_then(|(r, _)| r.consumer)
            .map(|c| c.members)
            .unwrap_or_default();
        let holders = members
            .into_iter()
            .map(|(id, m)| {
                let partitions = m
                    .assigned
                    .iter()
                    .chain(&m.revoking)
                    .filter(|(t, _)| t == TOPIC)
                    .map(|(_, p)| *p)
                    .collect();
                (id, partitions)
            })
            .collect();
        Event::HoldersOnVolume { sent, holders }
    })
    .await
}

/// The transactors' transactional ids as a new coordinator would load
/// them (txn-state-not-durable): the producer each file holds.
pub(crate) async fn watch_txns(vfs: Arc<dyn Vfs>, history: History, start: Instant) {
    let mut interval = tokio::time::interval(EVERY);
    loop {
        interval.tick().await;
        for id in TXN_IDS {
            let sent = start.elapsed();
            // EIO and friends: the volume said no this time.
            let Ok(found) = broker::groups::audit::txn_successor_view(vfs.as_ref(), id).await
            else {
                continue;
            };
            history.record(
                start.elapsed(),
                Event::TxnOnVolume {
                    transactional_id: (*id).to_owned(),
                    sent,
                    producer: found
                        .record
                        .as_ref()
                        .map(|(r, _)| (r.producer_id, r.producer_epoch)),
                    file_epoch: found.record.as_ref().map(|(_, e)| *e),
                    newest_epoch: found.newest_epoch,
                },
            );
        }
    }
}

/// Reads `group` as a successor would every [`EVERY`] and records what
/// `event` makes of each read that the volume answered.
async fn look(
    vfs: Arc<dyn Vfs>,
    history: History,
    start: Instant,
    group: &str,
    event: impl Fn(SuccessorView, Duration) -> Event,
) {
    let mut interval = tokio::time::interval(EVERY);
    loop {
        interval.tick().await;
        let sent = start.elapsed();
        // EIO and friends: the volume said no this time.
        let Ok(found) = broker::groups::audit::successor_view(vfs.as_ref(), group).await else {
            continue;
        };
        history.record(start.elapsed(), event(found, sent));
    }
}
