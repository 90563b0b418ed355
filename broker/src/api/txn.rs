//! The transaction APIs a producer and an operator send to the
//! transaction coordinator: InitProducerId with a transactional id,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
//! ListTransactions; TxnOffsetCommit to the group's coordinator;
//! DescribeProducers to a partition's leader. The state machine is
//! `crate::txn`; markers are `txn_markers`.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState as ActiveProducer, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState as DescribedTxn,
};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTxn;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::groups;
use crate::txn::{OFFSETS_TOPIC, TxnRecord, TxnState};

use super::{Api, code, name_of, topic_name};

/// How a group's offsets are a partition of a transaction: the group's
/// offsets partition (its coordinator slot), under a name that also says
/// which group, so the marker reaches exactly its pending offsets.
pub(super) fn offsets_partition(group_id: &str) -> (String, i32) {
    (
        format!("{OFFSETS_TOPIC}/{group_id}"),
        groups::slot_of(group_id) as i32,
    )
}

/// The group of an offsets partition name, if it is one.
pub(super) fn offsets_group(topic: &str) -> Option<&str> {
    topic.strip_prefix(OFFSETS_TOPIC)?.strip_prefix('/')
}

fn txn_id(id: &TransactionalId) -> &str {
    id.0.as_str()
}

impl Api {
    /// TxnOffsetCommit, once the transaction's coordinator confirmed that
    /// the group joined the open transaction (AddOffsetsToTxn): offsets for
    /// a group the transaction did not add are INVALID_TXN_STATE, as with
    /// KIP-890's verification in Kafka, and nothing is pending for them.
    pub(super) async fn txn_offset_commit(
        &self,
        req: TxnOffsetCommitRequest,
        unknown: BTreeSet<(String, i32)>,
    ) -> TxnOffsetCommitResponse {
        let (name, slot) = offsets_partition(req.group_id.as_str());
        let producer = (req.producer_id.0, req.producer_epoch);
        match self
            .verify_joined(txn_id(&req.transactional_id), producer, (&name, slot))
            .await
        {
            Ok(()) => self.coordinators.txn_offset_commit(req, &unknown).await,
            Err(e) => groups::txn_offsets::refused(&req, e),
        }
    }

    /// InitProducerId for a transactional producer (the coordinator of its
    /// id answers).
    pub(super) async fn init_txn_producer_id(
        &self,
        req: &InitProducerIdRequest,
        id: &str,
    ) -> InitProducerIdResponse {
        let resp = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let expected = (req.producer_id.0 >= 0 && req.producer_epoch >= 0)
            .then_some((req.producer_id.0, req.producer_epoch));
        let allocate = async || match self.producer_ids.allocate().await {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!(error = %e, "no producer id");
                None
            }
        };
        match self
            .coordinators
            .init_txn_producer(id, req.transaction_timeout_ms, expected, allocate)
            .await
        {
            Ok((pid, epoch)) => resp
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch),
            Err(e) => resp.with_error_code(e),
        }
    }

    pub(super) async fn add_partitions_to_txn(
        &self,
        req: AddPartitionsToTxnRequest,
        version: i16,
    ) -> AddPartitionsToTxnResponse {
        if version <= 3 {
            let topics = self
                .add_partitions(
                    txn_id(&req.v3_and_below_transactional_id),
                    (
                        req.v3_and_below_producer_id.0,
                        req.v3_and_below_producer_epoch,
                    ),
                    &req.v3_and_below_topics,
                    false,
                )
                .await;
            return AddPartitionsToTxnResponse::default()
                .with_results_by_topic_v3_and_below(topics);
        }
        // v4+: batched, from brokers; `verify_only` is KIP-890's check.
        let mut results = Vec::new();
        for t in &req.transactions {
            let topics = self
                .add_partitions(
                    txn_id(&t.transactional_id),
                    (t.producer_id.0, t.producer_epoch),
                    &t.topics,
                    t.verify_only,
                )
                .await;
            results.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(t.transactional_id.clone())
                    .with_topic_results(topics),
            );
        }
        AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
    }

    async fn add_partitions(
        &self,
        id: &str,
        producer: (i64, i16),
        topics: &[kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic],
        verify_only: bool,
    ) -> Vec<AddPartitionsToTxnTopicResult> {
        let unknown = self
            .unknown_partitions(
                topics
                    .iter()
                    .map(|t| (&t.name, t.partitions.iter().copied())),
            )
            .await;
        let asked: Vec<(String, i32)> = topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (name_of(&t.name).to_owned(), *p))
            })
            .collect();
        let errors: BTreeMap<(String, i32), i16> = if verify_only {
            let mut errors = BTreeMap::new();
            for p in &asked {
                let e = self.coordinators.verify_in_txn(id, producer, p).await;
                errors.insert(p.clone(), e.err().unwrap_or(0));
            }
            errors
        } else if !unknown.is_empty() {
            // Kafka adds none when any is unknown: the others are answered
            // OPERATION_NOT_ATTEMPTED.
            asked
                .iter()
                .map(|p| {
                    let e = if unknown.contains(p) {
                        code(ResponseError::UnknownTopicOrPartition)
                    } else {
                        code(ResponseError::OperationNotAttempted)
                    };
                    (p.clone(), e)
                })
                .collect()
        } else {
            let e = self
                .coordinators
                .add_to_txn(id, producer, asked.clone())
                .await
                .err()
                .unwrap_or(0);
            asked.iter().map(|p| (p.clone(), e)).collect()
        };
        topics
            .iter()
            .map(|t| {
                let results = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let e = errors
                            .get(&(name_of(&t.name).to_owned(), *p))
                            .copied()
                            .unwrap_or(0);
                        AddPartitionsToTxnPartitionResult::default()
                            .with_partition_index(*p)
                            .with_partition_error_code(e)
                    })
                    .collect();
                AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(results)
            })
            .collect()
    }

    pub(super) async fn add_offsets_to_txn(
        &self,
        req: AddOffsetsToTxnRequest,
    ) -> AddOffsetsToTxnResponse {
        let partition = offsets_partition(req.group_id.as_str());
        let e = self
            .coordinators
            .add_to_txn(
                txn_id(&req.transactional_id),
                (req.producer_id.0, req.producer_epoch),
                vec![partition],
            )
            .await
            .err()
            .unwrap_or(0);
        AddOffsetsToTxnResponse::default().with_error_code(e)
    }

    pub(super) async fn end_txn(&self, req: EndTxnRequest) -> EndTxnResponse {
        let e = self
            .coordinators
            .end_txn(
                txn_id(&req.transactional_id),
                (req.producer_id.0, req.producer_epoch),
                req.committed,
            )
            .await
            .err()
            .unwrap_or(0);
        EndTxnResponse::default()
            .with_error_code(e)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    }

    pub(super) async fn describe_transactions(
        &self,
        req: DescribeTransactionsRequest,
    ) -> DescribeTransactionsResponse {
        let mut states = Vec::new();
        for id in req.transactional_ids {
            let d = DescribedTxn::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            states.push(match self.coordinators.describe_txn(txn_id(&id)).await {
                Ok(r) => described(d, &r),
                Err(e) => d.with_error_code(e),
            });
        }
        DescribeTransactionsResponse::default().with_transaction_states(states)
    }

    pub(super) async fn list_transactions(
        &self,
        req: ListTransactionsRequest,
    ) -> ListTransactionsResponse {
        let mut unknown_states = Vec::new();
        let mut states = Vec::new();
        for s in &req.state_filters {
            match TxnState::from_name(s.as_str()) {
                Some(st) => states.push(st),
                None => unknown_states.push(s.clone()),
            }
        }
        let pattern = match req
            .transactional_id_pattern
            .as_ref()
            .map(|p| regex::Regex::new(p.as_str()))
        {
            Some(Ok(re)) => Some(re),
            Some(Err(_)) => {
                return ListTransactionsResponse::default()
                    .with_error_code(code(ResponseError::InvalidRegularExpression));
            }
            None => None,
        };
        let now_ms = self.coordinators.config.clock.now_ms();
        let listed = self
            .coordinators
            .list_txns()
            .await
            .into_iter()
            .filter(|r| states.is_empty() || states.contains(&r.state))
            .filter(|r| {
                req.producer_id_filters.is_empty()
                    || req.producer_id_filters.contains(&ProducerId(r.producer_id))
            })
            // v1 (KIP-994): transactions running at least this long.
            .filter(|r| {
                req.duration_filter < 0
                    || (r.started_ms >= 0 && now_ms - r.started_ms >= req.duration_filter)
            })
            .filter(|r| {
                pattern
                    .as_ref()
                    .is_none_or(|re| re.is_match(&r.transactional_id))
            })
            .map(|r| {
                ListedTxn::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(
                        r.transactional_id.clone(),
                    )))
                    .with_producer_id(ProducerId(r.producer_id))
                    .with_transaction_state(StrBytes::from_static_str(r.state.name()))
            })
            .collect();
        ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown_states)
            .with_transaction_states(listed)
    }

    /// DescribeProducers: the producers a partition this broker leads has
    /// seen, with their open transactions.
    pub(super) async fn describe_producers(
        &self,
        req: DescribeProducersRequest,
    ) -> DescribeProducersResponse {
        let mut topics = Vec::new();
        for t in req.topics {
            let mut partitions = Vec::new();
            for p in t.partition_indexes {
                let r = PartitionResponse::default().with_partition_index(p);
                partitions.push(match self.log_for(name_of(&t.name), p).await {
                    Err(e) => r.with_error_code(e),
                    Ok(log) => {
                        let state = log.producers().await;
                        let active = state
                            .producers
                            .iter()
                            .map(|(pid, e)| {
                                ActiveProducer::default()
                                    .with_producer_id(ProducerId(*pid))
                                    .with_producer_epoch(i32::from(e.epoch))
                                    .with_last_sequence(e.recent.last().map_or(-1, |b| b.1))
                                    .with_last_timestamp(-1)
                                    .with_coordinator_epoch(e.coordinator_epoch)
                                    .with_current_txn_start_offset(e.ongoing.unwrap_or(-1))
                            })
                            .collect();
                        r.with_active_producers(active)
                    }
                });
            }
            topics.push(
                TopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        DescribeProducersResponse::default().with_topics(topics)
    }
}

/// A transaction as DescribeTransactions shows it: a group's offsets as
/// its `__consumer_offsets` partition, as in Kafka.
fn described(d: DescribedTxn, r: &TxnRecord) -> DescribedTxn {
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (t, p) in &r.partitions {
        let topic = if offsets_group(t).is_some() {
            OFFSETS_TOPIC
        } else {
            t
        };
        let parts = by_topic.entry(topic.to_owned()).or_default();
        if !parts.contains(p) {
            parts.push(*p);
        }
    }
    d.with_transaction_state(StrBytes::from_static_str(r.state.name()))
        .with_transaction_timeout_ms(r.timeout_ms)
        .with_transaction_start_time_ms(r.started_ms)
        .with_producer_id(ProducerId(r.producer_id))
        .with_producer_epoch(r.producer_epoch)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, partitions)| {
                    TopicData::default()
                        .with_topic(topic_name(&t))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
