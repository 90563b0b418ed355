//! The liveness phase's reader of the workload topic.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::session::Session;
use crate::workload::{PARTITIONS, TOPIC};

/// The liveness phase's reader: every partition fully read from its
/// current leader, and one more write acknowledged, before `deadline`.
/// Returns the final log of each partition that converged:
/// `(offset, value, leader epoch)`.
pub async fn converge(
    mut s: Session,
    deadline: Duration,
) -> BTreeMap<i32, Vec<(i64, String, i32)>> {
    let mut logs = BTreeMap::new();
    // The sentinels come from an idempotent producer, two batches per
    // partition: a broker whose sequence checks refuse a producer's second
    // batch takes no idempotent write at all, and that must show here
    // (refused writes are never acknowledged, so no other rule judges them).
    let producer = tokio::time::timeout(deadline.saturating_sub(s.now()), s.init_producer_id())
        .await
        .ok();
    for partition in 0..PARTITIONS {
        let mut acked = 0;
        let mut end = -1;
        while s.now() < deadline {
            if acked < 2 {
                let sentinel = format!("final-{partition}-{acked}");
                let (pid, epoch) = producer.unwrap_or((-1, -1));
                let seq = if producer.is_some() { acked } else { -1 };
                let batch = broker::log::batch::build(
                    (pid, epoch, seq),
                    broker::clock::now_ms(),
                    &[sentinel.as_bytes()],
                );
                match s.produce(TOPIC, partition, batch).await {
                    Ok((0, offset, _)) => {
                        acked += 1;
                        end = offset;
                    }
                    other => {
                        tracing::debug!(partition, ?other, "final write not acknowledged yet");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                continue;
            }
            let mut log = Vec::new();
            let mut next = 0;
            while next <= end && s.now() < deadline {
                match s.fetch(TOPIC, partition, next).await {
                    Some((got, _)) if !got.is_empty() => {
                        next = got.last().map_or(next, |r| r.0 + 1);
                        log.extend(got);
                    }
                    Some((_, hw)) => {
                        tracing::debug!(partition, next, end, hw, "final read got nothing");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
            if next > end {
                // Sentinels stay: they are ordinary writes of the log, and
                // the offsets of the final read must have no gaps.
                logs.insert(partition, log);
                break;
            }
        }
    }
    logs
}
