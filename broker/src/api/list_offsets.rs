//! ListOffsets: the offset of a timestamp, the earliest or the latest.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::log::{LogError, PartitionLog};

use super::{Api, code, leader_epoch, name_of};

/// ListOffsets' special timestamps.
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
/// v8+ (KIP-405): the start of the log kept locally. kaas keeps all of it
/// on the volume, so this is the log start.
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// v9+ (KIP-1005): the newest offset in remote storage, which kaas has
/// none of: offset -1, as Kafka answers for a topic without remote storage.
const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// One partition's ListOffsets answer from the log this broker leads.
async fn offset_at(
    log: &PartitionLog,
    (timestamp, committed): (i64, bool),
    version: i16,
    r: ListOffsetsPartitionResponse,
) -> ListOffsetsPartitionResponse {
    // The leader epoch field exists from v4; before, it stays unknown.
    let epoch = |e: i32| if version >= 4 { e } else { -1 };
    let current = epoch(log.epoch() as i32);
    let found = match timestamp {
        LATEST_TIERED_TIMESTAMP if version >= 9 => {
            return r.with_offset(-1).with_timestamp(-1).with_leader_epoch(-1);
        }
        EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
            return match log.confirmed_log_start_offset().await {
                Ok(start) => r.with_offset(start).with_leader_epoch(current),
                // Another broker leads now; the client asks it.
                Err(LogError::Fenced(_)) => {
                    r.with_error_code(code(ResponseError::NotLeaderOrFollower))
                }
                Err(e) => {
                    tracing::warn!(dir = %log.dir().display(), error = %e, "log start offset unconfirmed");
                    r.with_error_code(code(ResponseError::KafkaStorageError))
                }
            };
        }
        LATEST_TIMESTAMP => {
            // read_committed consumers start at the last stable offset.
            let latest = if committed {
                log.last_stable_offset()
            } else {
                log.high_watermark()
            };
            return r.with_offset(latest).with_leader_epoch(current);
        }
        MAX_TIMESTAMP => log.offset_of_max_timestamp().await,
        ts => log.offset_for_timestamp(ts).await,
    };
    match found {
        Ok(Some(f)) => r
            .with_offset(f.offset)
            .with_timestamp(f.timestamp)
            .with_leader_epoch(epoch(f.leader_epoch)),
        // No record at or after the timestamp (or, for MAX_TIMESTAMP, an
        // empty log): Kafka answers offset -1, timestamp -1, no error.
        Ok(None) => r.with_offset(-1).with_timestamp(-1),
        Err(e) => {
            tracing::warn!(dir = %log.dir().display(), error = %e, "offset lookup by time failed");
            r.with_error_code(code(ResponseError::KafkaStorageError))
        }
    }
}

impl Api {
    pub(super) async fn list_offsets(
        &self,
        req: ListOffsetsRequest,
        version: i16,
    ) -> ListOffsetsResponse {
        let mut topics = Vec::new();
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let mut parts = Vec::new();
            for p in t.partitions {
                let r = ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_timestamp(-1)
                    .with_offset(-1)
                    .with_leader_epoch(-1);
                let led = self
                    .log_for(&name, p.partition_index)
                    .await
                    .and_then(|log| {
                        leader_epoch::check_current(p.current_leader_epoch, &log).map(|()| log)
                    });
                let r = match led {
                    Err(c) => r.with_error_code(c),
                    Ok(log) => {
                        let committed = req.isolation_level == 1;
                        offset_at(&log, (p.timestamp, committed), version, r).await
                    }
                };
                parts.push(r);
            }
            topics.push(
                ListOffsetsTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(parts),
            );
        }
        ListOffsetsResponse::default().with_topics(topics)
    }
}
