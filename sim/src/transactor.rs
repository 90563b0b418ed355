//! Transactional clients: two producers that write transactions spanning
//! the partitions of their own topic (led by different brokers), send
//! offsets to them now and then, and commit, abort or abandon them; they
//! share a transactional id part of the time, so each fences the other.
//! After an abortable error a producer bumps its own epoch (KIP-360), or
//! claims the one its timed-out transaction was aborted under (KIP-588).
//! Now and then one misbehaves: a write to a partition, or offsets for a
//! group, that its transaction never added. A read_committed reader drops aborted records as Kafka consumers do (by
//! the aborted-transaction lists of its fetches), and the liveness phase
//! reads the topic and the group's offsets once every transaction ended.
//!
//! Their history (`Event::Txn*`) lets the checker hold Jepsen's
//! transactional anomalies: no aborted or never-committed record is read
//! under read_committed, a committed transaction is read whole, no
//! committed record is lost, offsets of an aborted transaction never take
//! effect, a fenced producer's writes are refused, what was never added
//! to a transaction is refused, and a producer is never fenced by its own
//! epoch bump.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, EndTxnRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, OffsetFetchRequest, ProducerId,
    RequestKind, ResponseKind, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;

use crate::workload::{Event, Outcome, Session};

pub const TXN_TOPIC: &str = "txns";
pub const TXN_PARTITIONS: i32 = 3;
/// The prefix of the plain records the final read writes first (never
/// part of a transaction; the checker skips them).
pub const SENTINEL: &str = "final-txn-";
/// The group the transactions send offsets to: transactor `i` commits
/// partition `i` of [`TXN_TOPIC`], with offsets that grow with each
/// transaction.
pub const TXN_GROUP: &str = "sim-txn-group";
/// A group no transaction ever adds: a misbehaving client's offsets for it
/// must be refused (KIP-890) and never take effect.
pub const ROGUE_GROUP: &str = "sim-txn-rogue";
/// Short, so that abandoned transactions are aborted within a run.
pub(crate) const TXN_TIMEOUT_MS: i32 = 3_000;

// Error codes the transactor acts on.
const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const CONCURRENT_TRANSACTIONS: i16 = 51;

fn text(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

pub(crate) fn coordinator_trouble(code: i16) -> bool {
    matches!(
        code,
        NOT_COORDINATOR
            | COORDINATOR_NOT_AVAILABLE
            | COORDINATOR_LOAD_IN_PROGRESS
            | CONCURRENT_TRANSACTIONS
    )
}

/// The transactional id only transactor 1 uses: nothing but its own
/// InitProducerIds may fence it.
pub const EXCLUSIVE_ID: &str = "sim-txn-b";

/// The transactional ids: transactor 0 always uses the first; transactor 1
/// uses it one time in four (fencing transactor 0 and being fenced by it),
/// its own otherwise.
fn pick_id(index: u32) -> &'static str {
    if index == 0 || madsim::rand::thread_rng().gen_ratio(1, 4) {
        "sim-txn"
    } else {
        EXCLUSIVE_ID
    }
}

/// A transactional producer as the coordinator knows it.
pub(crate) struct Txp {
    pub id: &'static str,
    pub pid: i64,
    pub epoch: i16,
    pub seq: BTreeMap<i32, i32>,
}

/// How a transaction ended, for what the producer does next.
pub(crate) enum Ended {
    Clean,
    /// Refused with this error code.
    Refused(i16),
    /// Abandoned, or an answer never came.
    Unclean,
}

/// Error codes after which a Kafka client needs a new producer (fatal):
/// PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING.
pub(crate) fn fatal(code: i16) -> bool {
    matches!(code, 90 | 49)
}

/// Transactions on [`TXN_TOPIC`] until `until`.
pub async fn transactor(mut s: Session, index: u32, until: Duration) {
    while !s.create_topic(TXN_TOPIC, TXN_PARTITIONS).await {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if s.now() >= until {
            return;
        }
    }
    let mut offset = 0i64;
    let mut n = 0u64;
    let mut next = Next::Fresh;
    // Ids a fresh InitProducerId of this client went unanswered for: it
    // may still take effect and fence this client's later epochs.
    let mut unanswered = BTreeSet::new();
    while s.now() < until {
        let next_now = std::mem::replace(&mut next, Next::Fresh);
        let Some(mut txp) = producer(
            &mut s,
            next_now,
            pick_id(index),
            EXCLUSIVE_ID,
            until,
            &mut unanswered,
        )
        .await
        else {
            continue;
        };
        let label = format!("{}-{n}", s.name);
        n += 1;
        let ended = one_transaction(&mut s, &mut txp, &label, index, &mut offset).await;
        next = ended.next(txp);
        let pause = madsim::rand::thread_rng().gen_range(10..200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// What the producer does before its next transaction.
pub(crate) enum Next {
    Continue(Txp),
    Fresh,
    Bump(Txp),
}

impl Ended {
    /// As Kafka's clients: after a clean end the producer goes on; after
    /// a fatal error a new producer starts over (its InitProducerId aborts
    /// whatever is left open); after anything else the producer bumps its
    /// own epoch (KIP-360), which aborts the open transaction, or claims
    /// the epoch its timed-out transaction was aborted under (KIP-588).
    pub(crate) fn next(self, txp: Txp) -> Next {
        match self {
            Ended::Clean => Next::Continue(txp),
            Ended::Refused(c) if fatal(c) => Next::Fresh,
            Ended::Refused(_) | Ended::Unclean => Next::Bump(txp),
        }
    }
}

/// The producer for the next transaction: `next`'s, or a new one for
/// `fresh_id`, or `next`'s with its epoch bumped. `None` if that failed
/// (a bump of a producer only this client uses, `exclusive_id`, that is
/// fenced by something other than its own unanswered InitProducerId is
/// recorded for the checker).
pub(crate) async fn producer(
    s: &mut Session,
    next: Next,
    fresh_id: &'static str,
    exclusive_id: &str,
    until: Duration,
    unanswered: &mut BTreeSet<&'static str>,
) -> Option<Txp> {
    match next {
        Next::Continue(t) => Some(t),
        Next::Fresh => match init(s, fresh_id, None, until, unanswered).await {
            Init::Ready(t) => Some(t),
            Init::Fenced | Init::GaveUp => None,
        },
        Next::Bump(old) => {
            let own = old.id == exclusive_id && !unanswered.contains(old.id);
            match init(s, old.id, Some(&old), until, unanswered).await {
                Init::Ready(t) => Some(t),
                Init::Fenced => {
                    s.history.record(
                        s.now(),
                        Event::TxnBumpFenced {
                            client: s.name.clone(),
                            transactional_id: old.id.to_owned(),
                            producer: (old.pid, old.epoch),
                            own,
                        },
                    );
                    None
                }
                Init::GaveUp => None,
            }
        }
    }
}

/// One transaction: partitions added, a record written to each, offsets
/// sent half the time, then committed, aborted or abandoned.
async fn one_transaction(
    s: &mut Session,
    txp: &mut Txp,
    label: &str,
    index: u32,
    offset: &mut i64,
) -> Ended {
    let count = madsim::rand::thread_rng().gen_range(1..=TXN_PARTITIONS);
    let first = madsim::rand::thread_rng().gen_range(0..TXN_PARTITIONS);
    let partitions: Vec<i32> = (0..count).map(|k| (first + k) % TXN_PARTITIONS).collect();
    match s.add_partitions(txp, TXN_TOPIC, &partitions).await {
        Some(0) => {}
        Some(c) if !coordinator_trouble(c) => return Ended::Refused(c),
        _ => return Ended::Unclean,
    }
    s.transactional_id = Some(txp.id.to_owned());
    if let Some(ended) = pipelined_writes(s, txp, label, &partitions).await {
        return ended;
    }
    if madsim::rand::thread_rng().gen_ratio(1, 25) {
        if let Some(other) = (0..TXN_PARTITIONS).find(|p| !partitions.contains(p)) {
            unjoined_write(s, txp, label, other).await;
        }
    }
    if madsim::rand::thread_rng().gen_ratio(1, 25) {
        let code = s
            .txn_offset_commit(txp, ROGUE_GROUP, index as i32, 1_000_000)
            .await;
        s.history.record(
            s.now(),
            Event::TxnRogueOffsets {
                client: s.name.clone(),
                label: label.to_owned(),
                code,
            },
        );
    }
    let mut offsets = Vec::new();
    if madsim::rand::thread_rng().gen_bool(0.5) {
        *offset += 1;
        if s.send_offsets(txp, index as i32, *offset).await {
            offsets.push((index as i32, *offset));
        } else {
            return Ended::Unclean;
        }
    }
    let roll = madsim::rand::thread_rng().gen_range(0..20);
    if roll == 0 {
        // Abandoned: half the time long enough for the coordinator to
        // abort it (the producer then claims the bumped epoch, KIP-588).
        if madsim::rand::thread_rng().gen_bool(0.5) {
            let ms = u64::try_from(TXN_TIMEOUT_MS).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms + 1_500)).await;
        }
        return Ended::Unclean;
    }
    let commit = roll > 4;
    let sent = s.now();
    let outcome = s.end(txp, commit).await;
    s.history.record(
        s.now(),
        Event::TxnEnd {
            client: s.name.clone(),
            label: label.to_owned(),
            commit,
            sent,
            producer: (txp.pid, txp.epoch),
            offsets,
            outcome: outcome.clone(),
        },
    );
    match outcome {
        Outcome::Acked { .. } => Ended::Clean,
        Outcome::Refused(c) => Ended::Refused(c),
        _ => Ended::Unclean,
    }
}

/// The transaction's writes: 1-3 batches to each of its partitions, all in
/// flight at once as librdkafka pipelines them (the first batch to a
/// partition opens the transaction there while the next ones wait behind it
/// on the same connection). One that gets a retriable error or no answer
/// is sent again alone, in order, until a write fails; every answer is
/// recorded. `Some` when the transaction cannot go on.
async fn pipelined_writes(
    s: &mut Session,
    txp: &mut Txp,
    label: &str,
    partitions: &[i32],
) -> Option<Ended> {
    let per = madsim::rand::thread_rng().gen_range(1..=3);
    let mut writes = Vec::new();
    for &partition in partitions {
        for k in 0..per {
            let (value, seq, batch) = txn_batch(txp, label, partition, k);
            writes.push((partition, value, seq, batch));
        }
    }
    let sent = s.now();
    let answers = s
        .produce_pipelined(
            TXN_TOPIC,
            writes.iter().map(|(p, _, _, b)| (*p, b.clone())).collect(),
        )
        .await;
    let mut ended = None;
    for ((partition, value, seq, batch), answer) in writes.into_iter().zip(answers) {
        let outcome = match answer {
            Ok((0, offset, broker)) => Outcome::Acked { offset, broker },
            Ok((c, _, _)) if !matches!(c, 6 | 5 | 3 | 7 | 56 | 19) => Outcome::Refused(c),
            _ if ended.is_none() => s.produce_in_txn(txp, TXN_TOPIC, partition, batch).await,
            _ => Outcome::Unknown,
        };
        record_write(
            s,
            txp,
            (label, partition, true),
            value,
            (seq, sent),
            &outcome,
        );
        match outcome {
            Outcome::Acked { .. } => {}
            Outcome::Refused(c) => ended = ended.or(Some(Ended::Refused(c))),
            _ => ended = ended.or(Some(Ended::Unclean)),
        }
    }
    ended
}

/// A misbehaving client's write to a partition it did not add to its
/// transaction: the partition's leader must refuse it (KIP-890), or it
/// would open a transaction there that no marker ever ends.
async fn unjoined_write(s: &mut Session, txp: &mut Txp, label: &str, partition: i32) {
    let (value, seq, batch) = txn_batch(txp, label, partition, 0);
    let sent = s.now();
    let outcome = match s.produce(TXN_TOPIC, partition, batch).await {
        Ok((0, offset, broker)) => Outcome::Acked { offset, broker },
        Ok((code, _, _)) => Outcome::Refused(code),
        Err(()) => Outcome::Unknown,
    };
    record_write(
        s,
        txp,
        (label, partition, false),
        value,
        (seq, sent),
        &outcome,
    );
}

/// Transaction `label`'s `k`th record for `partition`: its value, the
/// producer's sequence there (`k` past the next one), and the batch.
fn txn_batch(txp: &Txp, label: &str, partition: i32, k: i32) -> (String, i32, bytes::Bytes) {
    let value = format!("tx:{label}:{partition}.{k}");
    let seq = txp
        .seq
        .get(&partition)
        .copied()
        .unwrap_or(0)
        .wrapping_add(k);
    let batch = broker::log::batch::build_transactional(
        (txp.pid, txp.epoch, seq),
        broker::clock::now_ms(),
        &[value.as_bytes()],
    );
    (value, seq, batch)
}

/// Records a write of transaction `label` (to a partition added to it or
/// not); once acknowledged, the producer's sequence there moves on.
fn record_write(
    s: &Session,
    txp: &mut Txp,
    (label, partition, joined): (&str, i32, bool),
    value: String,
    (seq, sent): (i32, Duration),
    outcome: &Outcome,
) {
    if matches!(outcome, Outcome::Acked { .. }) {
        txp.seq.insert(partition, seq.wrapping_add(1));
    }
    s.history.record(
        s.now(),
        Event::TxnWrite {
            client: s.name.clone(),
            label: label.to_owned(),
            joined,
            partition,
            value,
            sent,
            producer: (txp.pid, txp.epoch),
            outcome: outcome.clone(),
        },
    );
}

/// What an InitProducerId came to.
enum Init {
    Ready(Txp),
    /// PRODUCER_FENCED to a bump of `from`'s epoch.
    Fenced,
    GaveUp,
}

/// InitProducerId for `id`, at its coordinator: a new producer, or (with
/// `from`) a bump of `from`'s own epoch (KIP-360). A fresh request that
/// went unanswered marks `id` in `unanswered`.
async fn init(
    s: &mut Session,
    id: &'static str,
    from: Option<&Txp>,
    until: Duration,
    unanswered: &mut BTreeSet<&'static str>,
) -> Init {
    let (pid, epoch) = from.map_or((-1, -1), |t| (t.pid, t.epoch));
    while s.now() < until + Duration::from_secs(10) {
        if let Some(to) = s.txn_coordinator(id).await {
            let req = InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(text(id))))
                .with_transaction_timeout_ms(TXN_TIMEOUT_MS)
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch);
            match s
                .client
                .call(
                    to,
                    ApiKey::InitProducerId,
                    3,
                    RequestKind::InitProducerId(req),
                )
                .await
            {
                Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => {
                    s.history.record(
                        s.now(),
                        Event::TxnInit {
                            client: s.name.clone(),
                            transactional_id: id.to_owned(),
                            from: from.map(|t| (t.pid, t.epoch)),
                            producer: (r.producer_id.0, r.producer_epoch),
                        },
                    );
                    return Init::Ready(Txp {
                        id,
                        pid: r.producer_id.0,
                        epoch: r.producer_epoch,
                        seq: BTreeMap::new(),
                    });
                }
                Ok(ResponseKind::InitProducerId(r)) if from.is_some() && r.error_code == 90 => {
                    return Init::Fenced;
                }
                Err(_) if from.is_none() => {
                    unanswered.insert(id);
                }
                other => {
                    tracing::debug!(client = %s.name, ?other, "transactional InitProducerId");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Init::GaveUp
}

impl Session {
    /// The coordinator of transactional id `id` (FindCoordinator key type 1).
    async fn txn_coordinator(&mut self, id: &str) -> Option<u32> {
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
    async fn at_txn_coordinator(
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
    async fn send_offsets(&mut self, txp: &Txp, partition: i32, offset: i64) -> bool {
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
    async fn txn_offset_commit(
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
    async fn fetch_committed(
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
    async fn txn_group_offsets(&mut self, group: &str) -> Option<Vec<(i32, i64)>> {
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

/// The committed records of a read_committed fetch's `set` (see
/// [`committed_batches`]) at or after `from`, and the offset after the
/// last batch.
pub(crate) fn committed_records(
    set: &[u8],
    from: i64,
    aborted: &[(i64, i64)],
) -> (Vec<(i64, String)>, i64) {
    let (batches, next) = committed_batches(set, aborted);
    let mut out = Vec::new();
    for (h, batch) in batches {
        for (i, v) in broker::log::batch::decode_values(batch)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let offset = h.base_offset + i as i64;
            if offset >= from {
                out.push((offset, String::from_utf8_lossy(&v).into_owned()));
            }
        }
    }
    (out, next.max(from))
}

/// Kafka's consumer-side filter of a read_committed fetch: a transactional
/// batch of a producer whose aborted transaction (`aborted`: producer id,
/// first offset) began at or before it is dropped until that producer's
/// abort marker; control batches are never records. Returns the whole data
/// batches kept, and the offset after the last whole batch (a size-limited
/// fetch may end in part of one).
pub(crate) fn committed_batches<'a>(
    set: &'a [u8],
    aborted: &[(i64, i64)],
) -> (Vec<(broker::log::batch::BatchHeader, &'a [u8])>, i64) {
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    pending.sort_by_key(|(_, first)| *first);
    let mut pending = pending.into_iter().peekable();
    let mut aborting = BTreeSet::new();
    let (mut out, mut next) = (Vec::new(), 0);
    let mut at = 0;
    while at < set.len() {
        let Ok(h) = broker::log::batch::parse(&set[at..]) else {
            break;
        };
        let batch = &set[at..at + h.size];
        at += h.size;
        next = next.max(h.next_offset());
        while let Some((pid, _)) = pending.next_if(|(_, first)| *first <= h.last_offset()) {
            aborting.insert(pid);
        }
        if let Some(c) = h.control {
            if c.marker == broker::log::batch::Marker::Abort {
                aborting.remove(&h.producer_id);
            }
            continue;
        }
        if h.is_transactional() && aborting.contains(&h.producer_id) {
            continue;
        }
        out.push((h, batch));
    }
    (out, next)
}

/// Reads [`TXN_TOPIC`] read_committed all the time, as a downstream
/// consumer of the transactions does.
pub async fn txn_reader(mut s: Session, until: Duration) {
    let mut pos: BTreeMap<i32, i64> = (0..TXN_PARTITIONS).map(|p| (p, 0)).collect();
    while s.now() < until {
        for partition in 0..TXN_PARTITIONS {
            let from = pos[&partition];
            if let Some((got, next, _, _)) = s.fetch_committed(partition, from).await {
                pos.insert(partition, next);
                if !got.is_empty() {
                    s.history.record(
                        s.now(),
                        Event::TxnPoll {
                            partition,
                            from,
                            got,
                        },
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The liveness phase's read: every partition of [`TXN_TOPIC`] to its end
/// once no transaction is open (the last stable offset is the high
/// watermark), and the group's offsets, before `deadline`. Each partition
/// first takes a plain record (a [`SENTINEL`]) and is read past it: only
/// the partition's current leader acknowledges a write, so a broker that
/// still serves an old view (its follower loop held for a while) cannot
/// end the read early with an old high watermark.
pub async fn final_read(mut s: Session, deadline: Duration) {
    for partition in 0..TXN_PARTITIONS {
        let sentinel = format!("{SENTINEL}{partition}");
        let mut end = None;
        let mut records = Vec::new();
        let mut from = 0;
        while s.now() < deadline {
            let Some(end) = end else {
                let batch = broker::log::batch::build(
                    (-1, -1, -1),
                    broker::clock::now_ms(),
                    &[sentinel.as_bytes()],
                );
                match s.produce(TXN_TOPIC, partition, batch).await {
                    Ok((0, offset, _)) => end = Some(offset),
                    _ => tokio::time::sleep(Duration::from_millis(300)).await,
                }
                continue;
            };
            match s.fetch_committed(partition, from).await {
                Some((got, next, lso, hw)) => {
                    records.extend(got.into_iter().filter(|(_, v)| *v != sentinel));
                    let stuck = next == from;
                    from = next;
                    if from > end && from >= hw && lso == hw {
                        s.history
                            .record(s.now(), Event::TxnFinal { partition, records });
                        break;
                    }
                    if stuck {
                        // An open transaction, or a broker behind: ask the
                        // cluster for the leader again.
                        s.forget(TXN_TOPIC, partition);
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }
    while s.now() < deadline {
        if let Some(offsets) = s.txn_group_offsets(TXN_GROUP).await {
            s.history
                .record(s.now(), Event::TxnOffsetsFinal { offsets });
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    while s.now() < deadline {
        if let Some(offsets) = s.txn_group_offsets(ROGUE_GROUP).await {
            s.history.record(s.now(), Event::TxnRogueFinal { offsets });
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker::log::batch::{Marker, build, build_marker, build_transactional, stamp};

    fn at(b: bytes::Bytes, offset: i64) -> Vec<u8> {
        let mut v = b.to_vec();
        stamp(&mut v, offset, 1);
        v
    }

    #[test]
    fn aborted_batches_are_dropped_until_their_marker() {
        let mut set = Vec::new();
        set.extend(at(build_transactional((7, 0, 0), 0, &[b"a1"]), 0));
        set.extend(at(build_transactional((8, 0, 0), 0, &[b"c1"]), 1));
        set.extend(at(build((-1, -1, -1), 0, &[b"plain"]), 2));
        set.extend(at(build_marker((7, 0), Marker::Abort, 1, 0), 3));
        set.extend(at(build_transactional((7, 0, 1), 0, &[b"a2"]), 4));
        set.extend(at(build_marker((8, 0), Marker::Commit, 1, 0), 5));
        let (got, next) = committed_records(&set, 1, &[(7, 0)]);
        let values: Vec<&str> = got.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["c1", "plain", "a2"], "a2 is a new transaction");
        assert_eq!(next, 6);
    }
}
