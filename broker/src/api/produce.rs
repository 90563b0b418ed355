//! Produce: appends to the partitions this broker leads.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::future::join_all;

use uuid::Uuid;

use crate::log::{LogError, PartitionLog, batch};
use crate::produce_order::ProduceOrder;

use super::{Api, code, name_of};

/// A partition's answer being worked out.
type PartitionAnswer = Pin<Box<dyn Future<Output = PartitionProduceResponse> + Send>>;

impl Api {
    /// A produce in two steps. This one resolves, checks and queues each
    /// partition's records in its log, in request order; the future it
    /// returns waits for all their flush cycles at once (the cycles of
    /// different partitions run concurrently) and gives the response,
    /// `None` for acks=0.
    pub(super) async fn produce(
        &self,
        order: &mut ProduceOrder,
        req: ProduceRequest,
        version: i16,
    ) -> impl Future<Output = Option<ProduceResponse>> + Send + 'static {
        let mut topics = Vec::new();
        let mut answers: Vec<PartitionAnswer> = Vec::new();
        for t in req.topic_data {
            let name = name_of(&t.name).to_owned();
            topics.push((t.name, t.topic_id, t.partition_data.len()));
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
                let topic = OrderKey {
                    name: &name,
                    id: t.topic_id,
                    version,
                    partition: p.index,
                };
                let led = in_order(order, topic, &records, led).await;
                let r = match led {
                    Err(c) => Err(r.with_error_code(c)),
                    Ok((id, _)) if records.len() > self.leaders.max_message_bytes(&id) => {
                        Err(r.with_error_code(code(ResponseError::MessageTooLarge)))
                    }
                    // Kafka's "Compacted topic cannot accept message without
                    // key": compaction would drop it.
                    Ok((_, log))
                        if log.compacts() && crate::log::records::has_keyless(&records) =>
                    {
                        Err(r
                            .with_error_code(code(ResponseError::InvalidRecord))
                            .with_error_message(Some(
                                kafka_protocol::protocol::StrBytes::from_static_str(
                                    "Compacted topic cannot accept message without key",
                                ),
                            )))
                    }
                    Ok((_, log)) => {
                        let txn = req.transactional_id.as_ref().map(|t| t.0.as_str());
                        match self
                            .transactional(txn, (&name, p.index), &records, &log)
                            .await
                        {
                            Err(c) => Err(r.with_error_code(c)),
                            Ok(()) => Ok(self.append(log, &name, records, r, version)),
                        }
                    }
                };
                answers.push(r.unwrap_or_else(|r| Box::pin(std::future::ready(r))));
            }
        }
        let acks = req.acks;
        async move {
            let mut parts = join_all(answers).await.into_iter();
            let responses = topics
                .into_iter()
                .map(|(name, id, n)| {
                    TopicProduceResponse::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_partition_responses(parts.by_ref().take(n).collect())
                })
                .collect();
            // acks=0: the client waits for nothing, so nothing is sent.
            (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
        }
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

    /// Queues `records` in `log`; the future answers once they are durable
    /// (or refused).
    fn append(
        &self,
        log: Arc<PartitionLog>,
        topic: &str,
        records: Bytes,
        r: PartitionProduceResponse,
        version: i16,
    ) -> PartitionAnswer {
        let len = records.len();
        let queued = match log.enqueue(records) {
            Ok(queued) => queued,
            Err(e) => return Box::pin(std::future::ready(refused(&log, r, e))),
        };
        let leaders = self.leaders.clone();
        let (metrics, topic) = (self.metrics.clone(), topic.to_owned());
        Box::pin(async move {
            match queued.await {
                Ok(a) => {
                    metrics.bytes_in(&topic, len);
                    tracing::trace!(dir = %log.dir().display(), epoch = log.epoch(), base = a.base_offset, "acknowledged");
                    leaders.appended.notify_waiters();
                    let start = if version >= 5 {
                        log.log_start_offset()
                    } else {
                        -1
                    };
                    r.with_base_offset(a.base_offset)
                        .with_log_start_offset(start)
                }
                Err(e) => {
                    if matches!(e, LogError::Fenced(_)) {
                        metrics.fenced("Produce");
                    }
                    refused(&log, r, e)
                }
            }
        })
    }
}

/// The answer to records `log` did not take.
fn refused(
    log: &PartitionLog,
    r: PartitionProduceResponse,
    e: LogError,
) -> PartitionProduceResponse {
    match e {
        LogError::Corrupt(_) => r.with_error_code(code(ResponseError::CorruptMessage)),
        LogError::OutOfOrderSequence => {
            r.with_error_code(code(ResponseError::OutOfOrderSequenceNumber))
        }
        LogError::InvalidProducerEpoch => {
            r.with_error_code(code(ResponseError::InvalidProducerEpoch))
        }
        LogError::NotInTransaction => r.with_error_code(code(ResponseError::InvalidTxnState)),
        LogError::ZombieCoordinator => {
            r.with_error_code(code(ResponseError::TransactionCoordinatorFenced))
        }
        // The cycle's bytes may be in the file, and the successor keeps
        // every whole batch it finds there: so an idempotent retry with
        // the same sequence is answered by the successor as a duplicate.
        // Kafka answers an acks=all produce still pending when its leader
        // loses the partition the same way (Partition's
        // checkEnoughReplicasReachOffset), though a follower may hold the
        // records; a client that re-sends them under a new producer epoch
        // writes them twice on either broker (see ci/realnfs/workloads.py).
        LogError::Fenced(_) => {
            tracing::info!(dir = %log.dir().display(), "fenced: stepping down");
            r.with_error_code(code(ResponseError::NotLeaderOrFollower))
        }
        // Logged once per partition by the log; each request is told.
        LogError::VolumeFull(_) => r
            .with_error_code(code(ResponseError::KafkaStorageError))
            .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                "the shared volume is full: nothing was written; retry once space is freed",
            ))),
        e => {
            tracing::warn!(error = %e, "append failed");
            r.with_error_code(code(ResponseError::KafkaStorageError))
        }
    }
}

/// Whether any batch of a record set is a control batch.
fn has_control(records: &[u8]) -> bool {
    batch::split(records).is_ok_and(|hs| hs.iter().any(|h| h.control.is_some()))
}

/// A partition as a connection's refusals know it: by the topic's name,
/// or by its id for requests that name topics by id (v13+).
struct OrderKey<'a> {
    name: &'a str,
    id: Uuid,
    version: i16,
    partition: i32,
}

impl OrderKey<'_> {
    fn topic(&self) -> String {
        if self.version >= 13 {
            self.id.hyphenated().to_string()
        } else {
            self.name.to_owned()
        }
    }
}

/// Refuses a batch pipelined behind one this connection refused before
/// its log took it, and remembers such refusals (see [`ProduceOrder`]).
///
/// A refusal also ends once the log would take the batch in order after
/// all. The refused batch may never come back here: librdkafka may have
/// had it acknowledged by another broker while the leadership moved, or
/// dropped it with a new producer epoch on another partition's account;
/// waiting for it wedged the producer on this connection for good (the
/// real-NFS campaign saw thousands of NOT_LEADER_OR_FOLLOWER answers from
/// a broker that led the partition).
async fn in_order(
    order: &mut ProduceOrder,
    at: OrderKey<'_>,
    records: &Bytes,
    led: Result<(String, Arc<PartitionLog>), i16>,
) -> Result<(String, Arc<PartitionLog>), i16> {
    if led.is_ok() && order.is_empty() {
        return led;
    }
    let topic = at.topic();
    if led.is_ok() && !order.watches(&topic, at.partition) {
        return led;
    }
    let Ok(first) = batch::parse(records) else {
        return led;
    };
    match led {
        Ok((id, log)) => {
            if log.takes_in_order(&first).await {
                order.release(&topic, at.partition);
            }
            if order.behind_a_refusal(&topic, at.partition, &first) {
                Err(code(ResponseError::NotLeaderOrFollower))
            } else {
                Ok((id, log))
            }
        }
        Err(c) => {
            order.refused(&topic, at.partition, &first);
            Err(c)
        }
    }
}
