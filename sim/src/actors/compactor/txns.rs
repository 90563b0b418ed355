//! The compactor's transactions: now and then it writes a few of its keys
//! in a transaction of its own transactional id, which it commits, aborts,
//! or abandons until the coordinator aborts it. Compaction then meets
//! aborted data, commit and abort markers and open transactions on the
//! same keys as plain writes: aborted records must never be taken for a
//! key's newest, open ones never cleaned, and a marker must stay while
//! records it decides are in the log.

use std::collections::BTreeSet;
use std::time::Duration;

use madsim::rand::Rng;

use crate::actors::transactor::{Ended, Next, TXN_TIMEOUT_MS, Txp, coordinator_trouble, producer};
use crate::history::{Event, Outcome};
use crate::session::Session;

use super::{COMPACT_PARTITIONS, COMPACT_TOPIC, KEYS, Written};

/// Only the compactor uses it: a fence of its epoch bump is a bug.
const COMPACT_TXN_ID: &str = "sim-compact-txn";

/// The compactor's transactional producer between its transactions.
pub(super) struct TxnWriter {
    next: Next,
    unanswered: BTreeSet<&'static str>,
    n: u64,
}

impl TxnWriter {
    pub(super) fn new() -> Self {
        TxnWriter {
            next: Next::Fresh,
            unanswered: BTreeSet::new(),
            n: 0,
        }
    }

    /// One transaction of one batch (1-3 keyed records, a tombstone now and
    /// then) to a random partition.
    pub(super) async fn transaction(&mut self, s: &mut Session, until: Duration) {
        let next = std::mem::replace(&mut self.next, Next::Fresh);
        let Some(mut txp) = producer(
            s,
            next,
            COMPACT_TXN_ID,
            COMPACT_TXN_ID,
            until,
            &mut self.unanswered,
        )
        .await
        else {
            return;
        };
        let label = format!("{}-t{}", s.name, self.n);
        self.n += 1;
        let ended = one(s, &mut txp, &label).await;
        // Plain writes follow: they carry no transactional id.
        s.transactional_id = None;
        self.next = ended.next(txp);
    }
}

async fn one(s: &mut Session, txp: &mut Txp, label: &str) -> Ended {
    let (partition, records) = {
        let mut rng = madsim::rand::thread_rng();
        let partition = rng.gen_range(0..COMPACT_PARTITIONS);
        let records: Vec<Written> = (0..rng.gen_range(1..=3))
            .map(|i| {
                let key = format!("k{}", rng.gen_range(0..KEYS));
                let value =
                    (!rng.gen_ratio(1, 6)).then(|| format!("t-{partition}-{key}-{label}-{i}"));
                (key, value)
            })
            .collect();
        (partition, records)
    };
    match s.add_partitions(txp, COMPACT_TOPIC, &[partition]).await {
        Some(0) => {}
        Some(c) if !coordinator_trouble(c) => return Ended::Refused(c),
        _ => return Ended::Unclean,
    }
    s.history.record(
        s.now(),
        Event::CompactTxnSent {
            label: label.to_owned(),
            partition,
            records: records.clone(),
        },
    );
    let seq = *txp.seq.entry(partition).or_insert(0);
    let keyed: Vec<(&[u8], Option<&[u8]>)> = records
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_deref().map(str::as_bytes)))
        .collect();
    let batch = broker::log::batch::build_transactional_keyed(
        (txp.pid, txp.epoch, seq),
        broker::clock::now_ms(),
        &keyed,
    );
    match s.produce_in_txn(txp, COMPACT_TOPIC, partition, batch).await {
        Outcome::Acked { offset, .. } => {
            txp.seq
                .insert(partition, seq.wrapping_add(records.len() as i32));
            s.history.record(
                s.now(),
                Event::CompactTxnProduced {
                    label: label.to_owned(),
                    offset,
                },
            );
        }
        Outcome::Refused(c) => return Ended::Refused(c),
        Outcome::Unknown => return Ended::Unclean,
    }
    let roll = madsim::rand::thread_rng().gen_range(0..10);
    if roll == 0 {
        // Abandoned, long enough for the coordinator to abort it: its
        // records sit open in the log while passes run.
        let ms = u64::try_from(TXN_TIMEOUT_MS).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms + 1_500)).await;
        return Ended::Unclean;
    }
    let commit = roll > 3;
    let outcome = s.end(txp, commit).await;
    s.history.record(
        s.now(),
        Event::CompactTxnEnd {
            label: label.to_owned(),
            commit,
            outcome: outcome.clone(),
        },
    );
    match outcome {
        Outcome::Acked { .. } => Ended::Clean,
        Outcome::Refused(c) => Ended::Refused(c),
        Outcome::Unknown => Ended::Unclean,
    }
}
