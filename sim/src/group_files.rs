//! The observer's look at the committer's group on the volume, as a new
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

use crate::workload::{COMMITTER_GROUP, Event, History, PARTITIONS, TOPIC};

const EVERY: Duration = Duration::from_millis(300);

pub(crate) async fn watch(vfs: Arc<dyn Vfs>, history: History, start: Instant) {
    let mut interval = tokio::time::interval(EVERY);
    loop {
        interval.tick().await;
        let sent = start.elapsed();
        // EIO and friends: the volume said no this time.
        let Ok(found) = broker::groups::audit::successor_view(vfs.as_ref(), COMMITTER_GROUP).await
        else {
            continue;
        };
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
        history.record(
            start.elapsed(),
            Event::GroupOnVolume {
                group: COMMITTER_GROUP.to_owned(),
                sent,
                offsets,
                file_epoch: found.record.as_ref().map(|(_, e)| *e),
                newest_epoch: found.newest_epoch,
            },
        );
    }
}
