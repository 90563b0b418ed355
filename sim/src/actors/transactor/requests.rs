//! The transactional requests a transactor sends, each recorded in the
//! history.

use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, EndTxnRequest,
    FindCoordinatorRequest, GroupId, OffsetFetchRequest, ProducerId, RequestKind, ResponseKind,
    TopicName, TransactionalId, TxnOffsetCommitRequest,
};

use crate::history::Outcome;
use crate::session::Session;

use super::*;

impl Session {
    /// The coordinator of transactional id `id` (FindCoordinator key type 1).
    pub(super) async fn txn_coordinator(&mut self, id: &str) -> Option<u32> {
        let req = FindCoordinatorRequest::default()
            .with_key(text(id))
            .with_key_type(1);
        let to = self.any_broker();
        match self
            .client
            .call(
                to,
                ApiKey::FindCoordinator,
                3,
                RequestKind::FindCoordinator(req),
            )
            .await
        {
            Ok(ResponseKind::FindCoordinator(r)) if r.error_code == 0 && r.node_id.0 >= 0 => {
                Some(r.node_id.0 as u32)
            }
            _ => None,
        }
    }

    /// Retries `call` at the transaction coordinator of `id` while the
    /// answer is coordinator trouble: the error code (`None` without one),
    /// and whether an earlier attempt may have been applied (it got no
    /// answer, or one that does not say it was not).
    pub(super) async fn at_txn_coordinator(
        &mut self,
        id: &str,
        api: ApiKey,
        version: i16,
        request: RequestKind,
        code: impl Fn(&ResponseKind) -> Option<i16>,
    ) -> (Option<i16>, bool) {
        let (mut last, mut ambiguous) = (None, false);
        for _ in 0..15 {
            let Some(to) = self.txn_coordinator(id).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            // Any earlier attempt was answered with trouble or not at all:
            // it may have been applied (a coordinator that wrote, then
            // found it was superseded, answers NOT_COORDINATOR).
            ambiguous |= last.is_some();
            last = match self.client.call(to, api, version, request.clone()).await {
                Ok(r) => Some(code(&r).unwrap_or(-1)),
                Err(_) => Some(-1),
            };
            match last {
                Some(c) if c >= 0 && !coordinator_trouble(c) => return (last, ambiguous),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        (last.filter(|c| *c >= 0), true)
    }

    pub(crate) async fn add_partitions(
        &mut self,
        txp: &Txp,
        topic: &str,
        partitions: &[i32],
    ) -> Option<i16> {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(txp.id)))
            .with_v3_and_below_producer_id(ProducerId(txp.pid))
            .with_v3_and_below_producer_epoch(txp.epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(text(topic)))
                    .with_partitions(partitions.to_vec()),
            ]);
        self.at_txn_coordinator(
            txp.id,
            ApiKey::AddPartitionsToTxn,
            3,
            RequestKind::AddPartitionsToTxn(req),
            |r| match r {
                ResponseKind::AddPartitionsToTxn(r) => Some(
                    r.results_by_topic_v3_and_below
                        .iter()
                        .flat_map(|t| &t.results_by_partition)
                        .map(|p| p.partition_error_code)
                        .find(|c| *c != 0)
                        .unwrap_or(0),
                ),
                _ => None,
            },
        )
        .await
        .0
    }

    /// AddOffsetsToTxn, then TxnOffsetCommit of `offset` for `partition`
    /// of [`TXN_GROUP`] at the group's coordinator.
    pub(super) async fn send_offsets(&mut self, txp: &Txp, partition: i32, offset: i64) -> bool {
        let req = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(text(txp.id)))
            .with_producer_id(ProducerId(txp.pid))
            .with_producer_epoch(txp.epoch)
            .with_group_id(GroupId(text(TXN_GROUP)));
        let added = self
            .at_txn_coordinator(
                txp.id,
                ApiKey::AddOffsetsToTxn,
                3,
                RequestKind::AddOffsetsToTxn(req),
                |r| match r {
                    ResponseKind::AddOffsetsToTxn(r) => Some(r.error_code),
                    _ => None,
                },
            )
            .await
            .0;
        if added != Some(0) {
            return false;
        }
        self.txn_offset_commit(txp, TXN_GROUP, partition, offset)
            .await
            == Some(0)
    }

    /// TxnOffsetCommit of `offset` for `partition` of `group` at the
    /// group's coordinator: the error code, `None` without an answer.
    pub(super) async fn txn_offset_commit(
        &mut self,
        txp: &Txp,
        group: &str,
        partition: i32,
        offset: i64,
    ) -> Option<i16> {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(text(txp.id)))
            .with_group_id(GroupId(text(group)))
            .with_producer_id(ProducerId(txp.pid))
            .with_producer_epoch(txp.epoch)
            .with_generation_id(-1)
            .with_topics(vec![
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(text(TXN_TOPIC)))
                    .with_partitions(vec![
                        TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(partition)
                            .with_committed_offset(offset),
                    ]),
            ]);
        self.group = group.to_owned();
        for _ in 0..15 {
            let Some(to) = self.coordinator().await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let code = match self
                .client
                .call(
                    to,
                    ApiKey::TxnOffsetCommit,
                    3,
                    RequestKind::TxnOffsetCommit(req.clone()),
                )
                .await
            {
                Ok(ResponseKind::TxnOffsetCommit(r)) => r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0),
                _ => -1,
            };
            match code {
                c if c == -1 || coordinator_trouble(c) => {
                    self.lost_coordinator();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                c => return Some(c),
            }
        }
        None
    }

    /// A transactional write, retried while the partition's leader is
    /// unknown or moving: acknowledged, refused, or unknown.
    pub(crate) async fn produce_in_txn(
        &mut self,
        txp: &Txp,
        topic: &str,
        partition: i32,
        batch: bytes::Bytes,
    ) -> Outcome {
        self.transactional_id = Some(txp.id.to_owned());
        let mut outcome = Outcome::Unknown;
        for _ in 0..20 {
            match self.produce(topic, partition, batch.clone()).await {
                Ok((0, at, broker)) => {
                    outcome = Outcome::Acked { offset: at, broker };
                    break;
                }
                Ok((6 | 5 | 3 | 7 | 56 | 19, _, _)) => {}
                Ok((c, _, _)) => {
                    outcome = Outcome::Refused(c);
                    break;
                }
                Err(()) => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        outcome
    }

    /// EndTxn: acknowledged, refused, or unknown.
    pub(crate) async fn end(&mut self, txp: &Txp, commit: bool) -> Outcome {
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(text(txp.id)))
            .with_producer_id(ProducerId(txp.pid))
            .with_producer_epoch(txp.epoch)
            .with_committed(commit);
        let answer = self
            .at_txn_coordinator(
                txp.id,
                ApiKey::EndTxn,
                3,
                RequestKind::EndTxn(req),
                |r| match r {
                    ResponseKind::EndTxn(r) => Some(r.error_code),
                    _ => None,
                },
            )
            .await;
        match answer {
            (Some(0), _) => Outcome::Acked {
                offset: 0,
                broker: 0,
            },
            // A refusal after an attempt that may have gone through says
            // nothing (a retried commit of a producer fenced meanwhile).
            (Some(c), false) if !coordinator_trouble(c) => Outcome::Refused(c),
            _ => Outcome::Unknown,
        }
    }

    /// A read_committed fetch from `from`: the committed records at or
    /// after it (aborted ones dropped as a Kafka consumer drops them), the
    /// offset to fetch next, the last stable offset and the high watermark.
    pub(super) async fn fetch_committed(
        &mut self,
        partition: i32,
        from: i64,
    ) -> Option<(Vec<(i64, String)>, i64, i64, i64)> {
        let p = self.fetch_partition(TXN_TOPIC, partition, from, 1).await?;
        let aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        let set = p.records.clone().unwrap_or_default();
        let (got, next) = committed_records(&set, from, &aborted);
        Some((got, next, p.last_stable_offset, p.high_watermark))
    }

    /// The group's committed offsets, asked with require_stable (a
    /// partition with offsets of an open transaction is not answered).
    pub(super) async fn txn_group_offsets(&mut self, group: &str) -> Option<Vec<(i32, i64)>> {
        self.group = group.to_owned();
        let to = self.coordinator().await?;
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_require_stable(true)
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(TXN_TOPIC)))
                    .with_partition_indexes((0..2).collect()),
            ]));
        match self
            .client
            .call(to, ApiKey::OffsetFetch, 7, RequestKind::OffsetFetch(req))
            .await
        {
            Ok(ResponseKind::OffsetFetch(r)) if r.error_code == 0 => {
                let parts: Vec<_> = r.topics.first()?.partitions.iter().collect();
                if parts.iter().any(|p| p.error_code != 0) {
                    return None;
                }
                Some(
                    parts
                        .iter()
                        .map(|p| (p.partition_index, p.committed_offset))
                        .collect(),
                )
            }
            _ => {
                self.lost_coordinator();
                None
            }
        }
    }
}
