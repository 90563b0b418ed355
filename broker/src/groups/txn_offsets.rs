//! Offsets committed inside a transaction (TxnOffsetCommit): kept in the
//! group's file as pending, under the producer id, until the transaction's
//! marker reaches the group's coordinator; a commit marker makes them the
//! group's committed offsets, an abort marker drops them.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::Coordinators;
use super::group::{MarkerRefused, TxnMarker};
use super::store::OffsetRecord;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Kafka's offset.metadata.max.bytes.
const MAX_METADATA_BYTES: usize = 4096;

impl Coordinators {
    /// TxnOffsetCommit: the offsets become pending in the group's file,
    /// on the volume before the answer. `unknown`: partitions that do not
    /// exist (UNKNOWN_TOPIC_OR_PARTITION, not committed).
    pub async fn txn_offset_commit(
        &self,
        req: TxnOffsetCommitRequest,
        unknown: &BTreeSet<(String, i32)>,
    ) -> TxnOffsetCommitResponse {
        let outcome = self.pend_offsets(&req, unknown).await;
        answer(&req, outcome, unknown)
    }

    async fn pend_offsets(
        &self,
        req: &TxnOffsetCommitRequest,
        unknown: &BTreeSet<(String, i32)>,
    ) -> Result<(), i16> {
        let group_id = req.group_id.as_str();
        let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
        let slot = self.slot_for(group_id)?;
        let mut groups = slot.groups.lock().await;
        let Some(entry) = slot.entry(&mut groups, group_id, true).await? else {
            return Err(code(ResponseError::CoordinatorNotAvailable));
        };
        // v3+ (KIP-447): a consumer group member commits in its generation.
        if req.generation_id >= 0 {
            entry.group.check_commit(
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|i| i.as_str()),
                req.generation_id,
                8,
            )?;
        }
        let mut pending = entry
            .group
            .pending_txn
            .get(&pid)
            .cloned()
            .unwrap_or_default();
        if epoch < pending.0 {
            return Err(code(ResponseError::ProducerFenced));
        }
        if epoch > pending.0 {
            pending = (epoch, Default::default());
        }
        let now_ms = self.config.clock.now_ms();
        for t in &req.topics {
            for p in &t.partitions {
                let key = (t.name.as_str().to_owned(), p.partition_index);
                if unknown.contains(&key) || too_long(&p.committed_metadata) {
                    continue;
                }
                pending.1.insert(
                    key.clone(),
                    OffsetRecord {
                        topic: key.0,
                        partition: key.1,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                        commit_ms: now_ms,
                    },
                );
            }
        }
        let previous = entry.group.pending_txn.insert(pid, pending);
        let record = entry.group.record();
        if let Err(e) = slot.persist(entry, &record).await {
            match previous {
                Some(p) => entry.group.pending_txn.insert(pid, p),
                None => entry.group.pending_txn.remove(&pid),
            };
            return Err(e);
        }
        Ok(())
    }

    /// A transaction's marker for `group_id`: its pending offsets take
    /// effect (commit) or are dropped (abort), on the volume before the
    /// answer. Without any, answered only once this coordinator confirmed
    /// it still coordinates: a deposed one's memory may lack them.
    pub async fn end_group_txn(&self, group_id: &str, marker: TxnMarker) -> Result<(), i16> {
        let slot = self.slot_for(group_id)?;
        let mut groups = slot.groups.lock().await;
        let Some(entry) = slot.entry(&mut groups, group_id, false).await? else {
            return slot.confirm().await;
        };
        let before = entry.group.txn_snapshot();
        match entry.group.end_txn(marker) {
            Ok(true) => {}
            Ok(false) => return slot.confirm().await,
            Err(MarkerRefused::ZombieCoordinator) => {
                return Err(code(ResponseError::TransactionCoordinatorFenced));
            }
            Err(MarkerRefused::StaleEpoch) => {
                return Err(code(ResponseError::InvalidProducerEpoch));
            }
        }
        vfs::fault_point!(slot.vfs, "txn-offsets.marker-applied");
        let record = entry.group.record();
        if let Err(e) = slot.persist(entry, &record).await {
            entry.group.restore_txn(before);
            return Err(e);
        }
        Ok(())
    }
}

/// Every partition of `req` answered `error`, nothing pending.
pub fn refused(req: &TxnOffsetCommitRequest, error: i16) -> TxnOffsetCommitResponse {
    answer(req, Err(error), &BTreeSet::new())
}

fn answer(
    req: &TxnOffsetCommitRequest,
    outcome: Result<(), i16>,
    unknown: &BTreeSet<(String, i32)>,
) -> TxnOffsetCommitResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let key = (t.name.as_str().to_owned(), p.partition_index);
                    let error = match &outcome {
                        Err(e) => *e,
                        Ok(()) if unknown.contains(&key) => {
                            code(ResponseError::UnknownTopicOrPartition)
                        }
                        Ok(()) if too_long(&p.committed_metadata) => {
                            code(ResponseError::OffsetMetadataTooLarge)
                        }
                        Ok(()) => 0,
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

fn too_long(metadata: &Option<kafka_protocol::protocol::StrBytes>) -> bool {
    metadata
        .as_ref()
        .is_some_and(|m| m.len() > MAX_METADATA_BYTES)
}
