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

use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, ProducerId, RequestKind, ResponseKind, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::{Event, Outcome};
use crate::session::Session;

mod reader;
mod requests;

pub use reader::{TXN_READER, TxnReader, final_read, txn_reader};
pub(crate) use reader::{committed_batches, committed_records};

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
        TXN_IDS[0]
    } else {
        EXCLUSIVE_ID
    }
}

/// Every transactional id the transactors use.
pub const TXN_IDS: &[&str] = &["sim-txn", EXCLUSIVE_ID];

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
        // The client's process restarts now and then (a pod rolled): its
        // next producer starts with an InitProducerId, whose answer the
        // coordinator must have on the volume first (`txn-state-not-durable`).
        if matches!(next, Next::Continue(_)) && madsim::rand::thread_rng().gen_ratio(1, 8) {
            next = Next::Fresh;
        }
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

/// Two transactional producers.
pub struct Transactors;
pub static TRANSACTORS: Transactors = Transactors;

impl Actor for Transactors {
    fn name(&self) -> &'static str {
        "transactors"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("transactor-0"), Role::client("transactor-1")]
    }

    fn play(&self, role: &'static str, s: Session, stage: &Stage) -> Play {
        let index = if role == "transactor-0" { 0 } else { 1 };
        Box::pin(transactor(s, index, stage.faults_end))
    }
}
