//! Transaction markers, both ends.
//!
//! The coordinator's side: every prepared transaction of a slot this broker
//! coordinates gets its markers written, one WriteTxnMarkers request per
//! leader (the broker itself included, without the network), retried until
//! every partition answered, then it is completed (`crate::txn`).
//!
//! The leader's side: WriteTxnMarkers appends a control batch to each
//! partition it leads, through the same flush and fence check as a produce,
//! so a marker is acknowledged only once it is durable in this epoch's
//! segment; the markers of a group's offsets go to its coordinator. And
//! KIP-890's check before a transactional batch opens a transaction here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ProducerId, RequestKind, ResponseKind, TransactionalId,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::groups::{self, group::TxnMarker};
use crate::log::batch::{self, Marker};
use crate::log::{LogError, PartitionLog, topic};
use crate::txn::{Prepared, TxnState};

use super::txn::offsets_group;
use super::{Api, code, lock, name_of, topic_name};

/// How long one marker or verification request may take.
const PEER_TIMEOUT: Duration = Duration::from_secs(10);
/// How often prepared transactions are looked at again (a marker that
/// failed is retried then).
const RETRY_EVERY: Duration = Duration::from_millis(200);

impl Api {
    /// Writes the markers of prepared transactions and aborts timed-out
    /// ones, until the process ends; spawned once the broker serves.
    pub async fn drive_transactions(self: Arc<Self>) {
        loop {
            // Woken by a decision or a takeover; on a timer only while a
            // transaction is open or prepared here (a broker without any
            // sleeps, so it runs exactly as before transactions existed).
            let woken = self.coordinators.txn_decided.notified();
            if self.coordinators.txns_pending().await {
                let _ = tokio::time::timeout(RETRY_EVERY, woken).await;
            } else {
                woken.await;
            }
            let prepared = self.coordinators.txns_to_finish().await;
            if !prepared.is_empty() {
                // A pass held here while another pass completes what it
                // collected must not write those markers again.
                vfs::fault_point!(self.vfs, "txn-markers.collected");
            }
            for p in prepared {
                let id = p.record.transactional_id.clone();
                if !lock(&self.finishing).insert(id.clone()) {
                    continue;
                }
                let api = self.clone();
                tokio::spawn(async move {
                    // Checked only once this id is ours in `finishing`: a
                    // finisher that completed it has left by then.
                    if !api.coordinators.still_prepared(&p).await {
                        lock(&api.finishing).remove(&id);
                        return;
                    }
                    match api.finish(&p).await {
                        Ok(()) => {
                            if let Err(e) = api.coordinators.txn_completed(&p).await {
                                tracing::info!(transactional_id = %id, error = e, "transaction not completed; retrying");
                            }
                        }
                        Err(why) => {
                            tracing::info!(transactional_id = %id, %why, "transaction markers not all written; retrying")
                        }
                    }
                    lock(&api.finishing).remove(&id);
                });
            }
        }
    }

    /// Writes every marker of `p`. A partition of a deleted topic needs
    /// none.
    async fn finish(&self, p: &Prepared) -> Result<(), String> {
        let a = self.current().ok_or("no assignment yet")?;
        let mut by_broker: BTreeMap<u32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
        for (t, part) in &p.record.partitions {
            let leader = if offsets_group(t).is_some() {
                let slot = u32::try_from(*part).map_err(|_| format!("bad slot {part}"))?;
                a.coordinator(slot).map(|l| l.leader)
            } else {
                let meta = match topic::lookup(self.vfs.as_ref(), t).await {
                    Ok(Some(m)) => m,
                    Ok(None) => continue,
                    Err(e) => return Err(format!("looking up {t}: {e}")),
                };
                let Ok(index) = u32::try_from(*part) else {
                    continue;
                };
                if index >= meta.partitions {
                    continue;
                }
                a.leadership(&meta.id, index).map(|l| l.leader)
            };
            let leader = leader.ok_or_else(|| format!("{t}/{part} has no leader"))?;
            by_broker
                .entry(leader)
                .or_default()
                .entry(t.clone())
                .or_default()
                .push(*part);
        }
        for (broker, topics) in by_broker {
            let marker = WritableTxnMarker::default()
                .with_producer_id(ProducerId(p.record.producer_id))
                .with_producer_epoch(p.record.producer_epoch)
                .with_transaction_result(p.record.state == TxnState::PrepareCommit)
                .with_coordinator_epoch(p.coordinator_epoch as i32)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, parts)| {
                            WritableTxnMarkerTopic::default()
                                .with_name(topic_name(&t))
                                .with_partition_indexes(parts)
                        })
                        .collect(),
                );
            let req = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
            // A coordinator held here past its successor's takeover sends
            // markers of a transaction the successor completed long ago.
            vfs::fault_point!(self.vfs, "txn-markers.sending");
            let resp = if broker == self.config.broker_id {
                self.write_txn_markers(req).await
            } else {
                let addr = &a
                    .brokers
                    .get(&broker)
                    .ok_or_else(|| format!("broker {broker} is not in the assignment"))?
                    .advertised;
                match self
                    .peers
                    .call(
                        addr,
                        (ApiKey::WriteTxnMarkers, 1),
                        RequestKind::WriteTxnMarkers(req),
                        PEER_TIMEOUT,
                    )
                    .await?
                {
                    ResponseKind::WriteTxnMarkers(r) => r,
                    other => return Err(format!("unexpected answer {other:?}")),
                }
            };
            for m in &resp.markers {
                for t in &m.topics {
                    for part in &t.partitions {
                        if !marker_done(part.error_code) {
                            return Err(format!(
                                "{}/{}: error {} from broker {broker}",
                                name_of(&t.name),
                                part.partition_index,
                                part.error_code
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// WriteTxnMarkers, as a partition leader (and a group coordinator).
    pub(super) async fn write_txn_markers(
        &self,
        req: WriteTxnMarkersRequest,
    ) -> WriteTxnMarkersResponse {
        let now_ms = self.coordinators.config.clock.now_ms();
        let mut results = Vec::new();
        for m in req.markers {
            let marker = if m.transaction_result {
                Marker::Commit
            } else {
                Marker::Abort
            };
            let mut topics = Vec::new();
            for t in m.topics {
                let name = name_of(&t.name).to_owned();
                let mut partitions = Vec::new();
                for p in t.partition_indexes {
                    let e = match offsets_group(&name) {
                        Some(group) => self
                            .coordinators
                            .end_group_txn(
                                group,
                                TxnMarker {
                                    producer_id: m.producer_id.0,
                                    producer_epoch: m.producer_epoch,
                                    coordinator_epoch: m.coordinator_epoch,
                                    commit: m.transaction_result,
                                },
                            )
                            .await
                            .err()
                            .unwrap_or(0),
                        None => {
                            let control = batch::build_marker(
                                (m.producer_id.0, m.producer_epoch),
                                marker,
                                m.coordinator_epoch,
                                now_ms,
                            );
                            match self.log_for(&name, p).await {
                                Err(e) => e,
                                Ok(log) => append_marker(&log, control).await,
                            }
                        }
                    };
                    if e == 0 {
                        self.leaders.appended.notify_waiters();
                    }
                    partitions.push(
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(e),
                    );
                }
                topics.push(
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(partitions),
                );
            }
            results.push(
                WritableTxnMarkerResult::default()
                    .with_producer_id(m.producer_id)
                    .with_topics(topics),
            );
        }
        WriteTxnMarkersResponse::default().with_markers(results)
    }

    /// Before a transactional batch opens a transaction on `log`: the
    /// producer's coordinator must confirm that the partition joined its
    /// transaction (KIP-890). A coordinator that cannot answer now is
    /// NOT_ENOUGH_REPLICAS to the producer, which retries, as in Kafka.
    pub(super) async fn verify_txn(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
        (name, partition): (&str, i32),
        log: &PartitionLog,
    ) -> Result<(), i16> {
        if log.in_transaction(producer_id, epoch) {
            return Ok(());
        }
        self.verify_joined(id, (producer_id, epoch), (name, partition))
            .await?;
        log.verified(producer_id, epoch);
        Ok(())
    }

    /// Asks the coordinator of `id` whether `(name, partition)` joined the
    /// producer's open transaction (AddPartitionsToTxn v4 verify_only when
    /// another broker coordinates it). Coordinator trouble is the
    /// retriable NOT_ENOUGH_REPLICAS.
    pub(super) async fn verify_joined(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
        (name, partition): (&str, i32),
    ) -> Result<(), i16> {
        let retriable = code(ResponseError::NotEnoughReplicas);
        let a = self.current().ok_or(retriable)?;
        let coordinator = a.coordinator(groups::slot_of(id)).ok_or(retriable)?.leader;
        let key = (name.to_owned(), partition);
        let outcome = if coordinator == self.config.broker_id {
            self.coordinators
                .verify_in_txn(id, (producer_id, epoch), &key)
                .await
        } else {
            let addr = &a.brokers.get(&coordinator).ok_or(retriable)?.advertised;
            let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
                AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_owned())))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_verify_only(true)
                    .with_topics(vec![
                        AddPartitionsToTxnTopic::default()
                            .with_name(topic_name(name))
                            .with_partitions(vec![partition]),
                    ]),
            ]);
            match self
                .peers
                .call(
                    addr,
                    (ApiKey::AddPartitionsToTxn, 4),
                    RequestKind::AddPartitionsToTxn(req),
                    PEER_TIMEOUT,
                )
                .await
            {
                Ok(ResponseKind::AddPartitionsToTxn(r)) => {
                    let e = r
                        .results_by_transaction
                        .iter()
                        .flat_map(|t| &t.topic_results)
                        .flat_map(|t| &t.results_by_partition)
                        .map(|p| p.partition_error_code)
                        .find(|e| *e != 0)
                        .unwrap_or(r.error_code);
                    if e == 0 { Ok(()) } else { Err(e) }
                }
                Ok(_) | Err(_) => Err(retriable),
            }
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(e) if is_coordinator_trouble(e) => Err(retriable),
            Err(e) => Err(e),
        }
    }
}

fn is_coordinator_trouble(e: i16) -> bool {
    [
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|c| c.code() == e)
}

/// Whether a leader's answer to a marker means nothing more is to be
/// written there: written, or the partition is gone, or the producer
/// moved on to a newer epoch (whose own marker supersedes this one).
fn marker_done(e: i16) -> bool {
    e == 0
        || e == code(ResponseError::UnknownTopicOrPartition)
        || e == code(ResponseError::InvalidProducerEpoch)
}

/// Appends a control batch, acknowledged under the fencing rule of any
/// append; the error code for the coordinator.
async fn append_marker(log: &Arc<PartitionLog>, control: bytes::Bytes) -> i16 {
    let appended = match log.enqueue(control) {
        Ok(queued) => queued.await,
        Err(e) => Err(e),
    };
    match appended {
        Ok(_) => 0,
        Err(LogError::InvalidProducerEpoch) => code(ResponseError::InvalidProducerEpoch),
        Err(LogError::ZombieCoordinator) => code(ResponseError::TransactionCoordinatorFenced),
        Err(LogError::Fenced(_)) => code(ResponseError::NotLeaderOrFollower),
        Err(e) => {
            tracing::warn!(dir = %log.dir().display(), error = %e, "marker not written");
            code(ResponseError::KafkaStorageError)
        }
    }
}
