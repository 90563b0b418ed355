//! The observer's check that the trimmed topic's newest manifests name
//! only segments that are on the volume (`broker::log::audit`).
//!
//! Retention and DeleteRecords remove a segment only after a manifest that
//! drops it, and only while their epoch still leads. A removal the manifest
//! does not know about yet, or a zombie removing what its successor still
//! serves, shows here before any client reads the hole (retention would
//! soon hide it from the final read).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use broker::log::audit::audit_partition;
use vfs::Vfs;

use crate::checker::Invariant;
use crate::harness::Violations;
use crate::trimmer::{TRIM_PARTITIONS, TRIM_TOPIC};

const EVERY: Duration = Duration::from_millis(900);

/// Audits the trimmed topic's partitions every [`EVERY`], for the whole run.
pub(crate) async fn watch(vfs: Arc<dyn Vfs>, violations: Violations, stamp: impl Fn() -> String) {
    let mut topic_id = None;
    let mut reported = BTreeSet::new();
    let mut interval = tokio::time::interval(EVERY);
    loop {
        interval.tick().await;
        if topic_id.is_none() {
            topic_id = broker::log::names::holder(vfs.as_ref(), TRIM_TOPIC)
                .await
                .ok()
                .flatten();
        }
        let Some(id) = &topic_id else { continue };
        for partition in 0..TRIM_PARTITIONS as u32 {
            let dir = broker::layout::partition_dir(id, partition);
            // EIO and friends: the volume said no this time.
            let Ok(Some(first)) = audit_partition(vfs.as_ref(), &dir).await else {
                continue;
            };
            violations.checked(Invariant::MissingSegment);
            if first.missing.is_empty() {
                continue;
            }
            // The leader may have moved its log start and removed the
            // segment between the manifest read and the look: only a
            // manifest that still says the same afterwards counts.
            let Ok(Some(again)) = audit_partition(vfs.as_ref(), &dir).await else {
                continue;
            };
            if again.same_manifest(&first)
                && !again.missing.is_empty()
                && reported.insert((partition, again.epoch))
            {
                violations.push(Invariant::MissingSegment.says(format!(
                    "the newest manifest of {TRIM_TOPIC}/{partition} (epoch {}, log start {}) names {} segment(s) the volume does not have: {} (at {})",
                    again.epoch,
                    again.log_start_offset,
                    again.missing.len(),
                    again.missing.join(", "),
                    stamp().trim()
                )));
            }
        }
    }
}
