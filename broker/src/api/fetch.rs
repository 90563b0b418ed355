//! Fetch: reads from the partitions this broker leads, waiting for data up
//! to the request's wait.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};

use crate::log::LogError;

use super::{Api, code, leader_epoch, name_of};

impl Api {
    pub(super) async fn fetch(&self, req: FetchRequest, version: i16) -> FetchResponse {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
        loop {
            // Registered before reading, so an append in between is not
            // missed: a `Notified` counts only from `enable` (or its first
            // poll), not from its creation.
            let appended = self.leaders.appended.notified();
            tokio::pin!(appended);
            appended.as_mut().enable();
            let (response, bytes, per_topic) = self.fetch_once(&req, version).await;
            let enough = bytes >= req.min_bytes.max(0) as usize;
            // As in Kafka, an error answers at once: waiting cannot fix a
            // fenced epoch or a partition led elsewhere.
            let failed = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code != 0);
            if enough || failed || tokio::time::Instant::now() >= deadline {
                for (topic, n) in per_topic.iter().filter(|(_, n)| *n > 0) {
                    self.metrics.bytes_out(topic, *n);
                }
                return response;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let _ = tokio::time::timeout(left, appended).await;
        }
    }

    /// One pass over the partitions: the response, its record bytes, and
    /// those bytes per topic name.
    async fn fetch_once(
        &self,
        req: &FetchRequest,
        version: i16,
    ) -> (FetchResponse, usize, Vec<(String, usize)>) {
        let start_of = |s: i64| if version >= 5 { s } else { -1 };
        let mut budget = if req.max_bytes > 0 {
            req.max_bytes as usize
        } else {
            usize::MAX
        };
        let mut total = 0;
        let mut topics = Vec::new();
        let mut per_topic = Vec::new();
        for t in &req.topics {
            // v13+ names topics by id only (KIP-516).
            let by_id = version >= 13;
            let mut name = name_of(&t.topic).to_owned();
            let mut topic_bytes = 0;
            let mut parts = Vec::new();
            for p in &t.partitions {
                let d = PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
                    .with_preferred_read_replica(BrokerId(-1));
                let log = if by_id {
                    self.topic_log_by_id(t.topic_id, p.partition)
                        .await
                        .map(|(meta, log)| {
                            name = meta.name;
                            log
                        })
                } else {
                    self.log_for(&name, p.partition).await
                };
                let led = log.and_then(|log| {
                    leader_epoch::check_current(p.current_leader_epoch, &log).map(|()| log)
                });
                let d = match led {
                    Err(c) => d.with_error_code(c),
                    Ok(log) => {
                        let max = (p.partition_max_bytes.max(0) as usize).min(budget);
                        // isolation_level 1: read_committed.
                        let read = if req.isolation_level == 1 {
                            log.read_committed(p.fetch_offset, max.max(1)).await
                        } else {
                            log.read(p.fetch_offset, max.max(1)).await
                        };
                        match read {
                            Ok(r) => {
                                let n = r.records.len();
                                budget = budget.saturating_sub(n);
                                total += n;
                                topic_bytes += n;
                                let aborted = r
                                    .aborted
                                    .iter()
                                    .map(|a| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(a.producer_id))
                                            .with_first_offset(a.first_offset)
                                    })
                                    .collect();
                                d.with_high_watermark(r.high_watermark)
                                    .with_last_stable_offset(r.last_stable_offset)
                                    .with_log_start_offset(start_of(r.log_start_offset))
                                    .with_aborted_transactions(Some(aborted))
                                    .with_records(Some(r.records))
                            }
                            Err(LogError::OutOfRange { start, end, .. }) => d
                                .with_error_code(code(ResponseError::OffsetOutOfRange))
                                .with_high_watermark(end)
                                .with_log_start_offset(start_of(start)),
                            // Superseded (a repair took the partition over):
                            // the client asks Metadata for the next leader.
                            Err(LogError::Fenced(_)) => {
                                d.with_error_code(code(ResponseError::NotLeaderOrFollower))
                            }
                            Err(e @ LogError::Damaged { .. }) => {
                                self.metrics.damaged_read();
                                tracing::error!(topic = %name, partition = p.partition, offset = p.fetch_offset, error = %e,
                                    "a stored batch is damaged: answering CORRUPT_MESSAGE (kaas fsck reports the partition's first bad offset)");
                                d.with_error_code(code(ResponseError::CorruptMessage))
                            }
                            Err(e) => {
                                tracing::warn!(dir = %log.dir().display(), offset = p.fetch_offset, error = %e, "read failed");
                                d.with_error_code(code(ResponseError::KafkaStorageError))
                            }
                        }
                    }
                };
                parts.push(d);
            }
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(parts),
            );
            per_topic.push((name, topic_bytes));
        }
        (
            FetchResponse::default().with_responses(topics),
            total,
            per_topic,
        )
    }
}
