//! Leader epochs on the wire (KIP-320): the check of the epoch a client
//! believes current, and OffsetForLeaderEpoch.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{Api, code, name_of};
use crate::log::PartitionLog;

/// The epoch a client sends when it has none to compare.
const NO_EPOCH: i32 = -1;

/// Checks the leader epoch a Fetch, ListOffsets or OffsetForLeaderEpoch
/// names as current against the epoch this broker leads `log` in. An older
/// one means the client missed a leader change and must refresh its
/// metadata (FENCED_LEADER_EPOCH); a newer one means this broker has not
/// taken over in that epoch yet and the client should retry
/// (UNKNOWN_LEADER_EPOCH).
pub(super) fn check_current(current: i32, log: &PartitionLog) -> Result<(), i16> {
    if current == NO_EPOCH {
        return Ok(());
    }
    let ours = i64::from(log.epoch());
    match i64::from(current).cmp(&ours) {
        std::cmp::Ordering::Less => Err(code(ResponseError::FencedLeaderEpoch)),
        std::cmp::Ordering::Greater => Err(code(ResponseError::UnknownLeaderEpoch)),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

impl Api {
    /// For each partition: the end offset of the requested leader epoch and
    /// the largest epoch at or below it that wrote records, which a
    /// consumer compares with its position to detect a truncated log.
    pub(super) async fn offset_for_leader_epoch(
        &self,
        req: OffsetForLeaderEpochRequest,
    ) -> OffsetForLeaderEpochResponse {
        let mut topics = Vec::new();
        for t in req.topics {
            let name = name_of(&t.topic).to_owned();
            let mut partitions = Vec::new();
            for p in t.partitions {
                let r = EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1);
                let outcome = match self.log_for(&name, p.partition).await {
                    Ok(log) => check_current(p.current_leader_epoch, &log)
                        .map(|()| log.epoch_end_offset(p.leader_epoch)),
                    Err(c) => Err(c),
                };
                partitions.push(match outcome {
                    Ok((epoch, end)) => r.with_leader_epoch(epoch).with_end_offset(end),
                    Err(c) => r.with_error_code(c),
                });
            }
            topics.push(
                OffsetForLeaderTopicResult::default()
                    .with_topic(t.topic)
                    .with_partitions(partitions),
            );
        }
        OffsetForLeaderEpochResponse::default().with_topics(topics)
    }
}
