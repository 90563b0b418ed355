//! Produce: appends to the partitions this broker leads.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use std::sync::Arc;

use uuid::Uuid;

use crate::log::{LogError, PartitionLog, batch};

use super::{Api, code, name_of};

impl Api {
    pub(super) async fn produce(
        &self,
        req: ProduceRequest,
        version: i16,
    ) -> Option<ProduceResponse> {
        let mut responses = Vec::new();
        for t in req.topic_data {
            let name = name_of(&t.name).to_owned();
            let mut parts = Vec::new();
            for p in t.partition_data {
                let r = PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1);
                let records = p.records.unwrap_or_default();
                let led = if version >= 13 {
                    self.produce_log_by_id(t.topic_id, p.index).await
                } else {
                    self.produce_log(&name, p.index).await
                };
                let r = match led {
                    Err(c) => r.with_error_code(c),
                    Ok((id, _)) if records.len() > self.leaders.max_message_bytes(&id) => {
                        r.with_error_code(code(ResponseError::MessageTooLarge))
                    }
                    Ok((_, log)) => {
                        let txn = req.transactional_id.as_ref().map(|t| t.0.as_str());
                        match self
                            .transactional(txn, (&name, p.index), &records, &log)
                            .await
                        {
                            Err(c) => r.with_error_code(c),
                            Ok(()) => self.append(&log, records, r, version).await,
                        }
                    }
                };
                parts.push(r);
            }
            responses.push(
                TopicProduceResponse::default()
                    .with_name(t.name)
                    .with_topic_id(t.topic_id)
                    .with_partition_responses(parts),
            );
        }
        // acks=0: the client waits for nothing, so nothing is sent.
        (req.acks != 0).then(|| ProduceResponse::default().with_responses(responses))
    }

    /// [`Self::produce_log`] for a topic named by its id (v13+): the log
    /// this broker leads under that id, as long as it has not stopped (the
    /// same reasoning: the fence check before any acknowledgement fails once
    /// the topic is deleted), else the topic's meta read fresh.
    async fn produce_log_by_id(
        &self,
        id: Uuid,
        partition: i32,
    ) -> Result<(String, Arc<PartitionLog>), i16> {
        let key = id.hyphenated().to_string();
        if let Some(log) = self.running_log(&key, partition) {
            return Ok((key, log));
        }
        let (meta, log) = self.topic_log_by_id(id, partition).await?;
        Ok((meta.id, log))
    }

    /// What a batch of a transactional producer needs before it is
    /// appended: its transactional id, and (KIP-890) its coordinator's word
    /// that the partition joined the transaction. Control batches come
    /// from coordinators only (WriteTxnMarkers), never in a produce.
    async fn transactional(
        &self,
        txn: Option<&str>,
        partition: (&str, i32),
        records: &Bytes,
        log: &PartitionLog,
    ) -> Result<(), i16> {
        let Ok(first) = batch::parse(records) else {
            return Ok(()); // the append answers CORRUPT_MESSAGE
        };
        if first.control.is_some() || records.len() > first.size && has_control(records) {
            return Err(code(ResponseError::InvalidRecord));
        }
        if !first.is_transactional() {
            return Ok(());
        }
        let Some(id) = txn else {
            return Err(code(ResponseError::TransactionalIdNotFound));
        };
        self.verify_txn(
            id,
            (first.producer_id, first.producer_epoch),
            partition,
            log,
        )
        .await
    }

    async fn append(
        &self,
        log: &PartitionLog,
        records: Bytes,
        r: PartitionProduceResponse,
        version: i16,
    ) -> PartitionProduceResponse {
        match log.append(records).await {
            Ok(a) => {
                tracing::trace!(dir = %log.dir().display(), epoch = log.epoch(), base = a.base_offset, "acknowledged");
                self.leaders.appended.notify_waiters();
                let start = if version >= 5 {
                    log.log_start_offset()
                } else {
                    -1
                };
                r.with_base_offset(a.base_offset)
                    .with_log_start_offset(start)
            }
            Err(LogError::Corrupt(_)) => r.with_error_code(code(ResponseError::CorruptMessage)),
            Err(LogError::OutOfOrderSequence) => {
                r.with_error_code(code(ResponseError::OutOfOrderSequenceNumber))
            }
            Err(LogError::InvalidProducerEpoch) => {
                r.with_error_code(code(ResponseError::InvalidProducerEpoch))
            }
            Err(LogError::NotInTransaction) => {
                r.with_error_code(code(ResponseError::InvalidTxnState))
            }
            Err(LogError::ZombieCoordinator) => {
                r.with_error_code(code(ResponseError::TransactionCoordinatorFenced))
            }
            Err(LogError::Fenced(_)) => {
                let dir = log.dir().to_path_buf();
                tracing::info!(dir = %dir.display(), "fenced: stepping down");
                r.with_error_code(code(ResponseError::NotLeaderOrFollower))
            }
            Err(e) => {
                tracing::warn!(error = %e, "append failed");
                r.with_error_code(code(ResponseError::KafkaStorageError))
            }
        }
    }
}

/// Whether any batch of a record set is a control batch.
fn has_control(records: &[u8]) -> bool {
    batch::split(records).is_ok_and(|hs| hs.iter().any(|h| h.control.is_some()))
}
