//! A client that writes a compacted topic: a few keys per partition
//! overwritten again and again, some deleted by tombstones, on small
//! segments that roll by size and by age, so that the leader compacts
//! every few seconds while the faults run (crashes, pauses and NFS faults
//! at every step of a pass: the `compaction` fault point family).
//!
//! Every few seconds it moves one of the topic's partitions to a broker
//! picked at random (AlterPartitionReassignments), so passes race their
//! successors' takeovers. One write in ten is a transaction ([`txns`]).
//!
//! Its history (`Event::Compact*`) lets the checker hold the rules of a
//! compacted log: every record read is one that was written, at the
//! offset its answer named, and none of an aborted transaction; a whole
//! read (every few seconds while it writes, and once the faults healed)
//! holds the newest record of every key acknowledged before it started
//! (or a newer write of the key); and once the passes caught up, every
//! key is read once.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use madsim::rand::Rng;

use crate::actors::{Actor, Finale, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;
use std::net::Ipv4Addr;

mod txns;

pub const COMPACT_TOPIC: &str = "compacted";
pub const COMPACT_PARTITIONS: i32 = 2;
/// Keys per partition: few, so that each is overwritten many times.
const KEYS: u32 = 8;

/// How long tombstones are kept (`delete.retention.ms`).
pub(crate) const DELETE_RETENTION: Duration = Duration::from_secs(3);

/// The topic's settings: segments of a few records that also roll after
/// 1.5 s, every dirty byte worth a pass, tombstones kept
/// [`DELETE_RETENTION`].
const CONFIGS: &[(&str, &str)] = &[
    ("cleanup.policy", "compact"),
    ("segment.bytes", "700"),
    ("segment.ms", "1500"),
    ("min.cleanable.dirty.ratio", "0.01"),
    ("delete.retention.ms", "3000"),
];

pub use crate::history::Written;

fn record(key: &str, value: Option<&str>) -> Bytes {
    broker::log::batch::build_keyed(
        (-1, -1, -1),
        broker::clock::now_ms(),
        &[(key.as_bytes(), value.map(str::as_bytes))],
    )
}

/// Writes [`COMPACT_TOPIC`] until `until`; [`final_read`] reads it back
/// once the faults healed.
pub async fn compactor(mut s: Session, until: Duration) {
    while !s.create_topic(COMPACT_TOPIC, COMPACT_PARTITIONS).await {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if s.now() >= until {
            return;
        }
    }
    'configs: for (key, value) in CONFIGS {
        while s.now() < until {
            if s.alter_config(COMPACT_TOPIC, key, value).await == Some(0) {
                continue 'configs;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let mut n = 0u64;
    let mut txns = txns::TxnWriter::new();
    let mut next_move = s.now() + Duration::from_secs(3);
    let mut next_read = s.now() + Duration::from_secs(4);
    while s.now() < until {
        if s.now() >= next_read {
            // A whole read while passes run: each key's newest write
            // acknowledged before it must be in it.
            let partition = madsim::rand::thread_rng().gen_range(0..COMPACT_PARTITIONS);
            let started = s.now();
            if let Some(records) =
                read_back(&mut s, partition, started + Duration::from_secs(10)).await
            {
                s.history.record(
                    s.now(),
                    Event::CompactRead {
                        partition,
                        started,
                        records,
                    },
                );
            }
            next_read =
                s.now() + Duration::from_millis(madsim::rand::thread_rng().gen_range(2_000..5_000));
        }
        if s.now() >= next_move {
            // Leadership moves now and then, so that a pass held between
            // two of its steps (a fault point's hold) finds a successor
            // when it goes on: the zombie pass the fence must stop.
            let (partition, broker, gap) = {
                let mut rng = madsim::rand::thread_rng();
                (
                    rng.gen_range(0..COMPACT_PARTITIONS),
                    s.any_broker(),
                    rng.gen_range(2_000..6_000),
                )
            };
            let code = crate::actors::movers::move_partition(
                &mut s,
                COMPACT_TOPIC,
                partition,
                Some(broker),
            )
            .await;
            tracing::debug!(partition, broker, ?code, "compacted partition moved");
            next_move = s.now() + Duration::from_millis(gap);
        }
        if madsim::rand::thread_rng().gen_ratio(1, 10) {
            txns.transaction(&mut s, until).await;
            continue;
        }
        let (partition, key, tombstone) = {
            let mut rng = madsim::rand::thread_rng();
            (
                rng.gen_range(0..COMPACT_PARTITIONS),
                format!("k{}", rng.gen_range(0..KEYS)),
                rng.gen_ratio(1, 6),
            )
        };
        let value = (!tombstone).then(|| format!("c-{partition}-{key}-{n}"));
        n += 1;
        s.history.record(
            s.now(),
            Event::CompactSent {
                partition,
                key: key.clone(),
                value: value.clone(),
            },
        );
        let batch = record(&key, value.as_deref());
        let sent = s.now();
        if let Ok((0, offset, _)) = s.produce(COMPACT_TOPIC, partition, batch).await {
            s.history.record(
                s.now(),
                Event::CompactProduced {
                    partition,
                    sent,
                    offset,
                    key,
                    value,
                },
            );
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// The liveness phase's read of the compacted topic: each partition read
/// whole until every key appears once (the leader rolled the last
/// segment and compacted it), or the deadline, when the last read counts.
pub async fn final_read(mut s: Session, deadline: Duration) {
    for partition in 0..COMPACT_PARTITIONS {
        let mut last = None;
        while s.now() < deadline {
            if let Some(records) = read_back(&mut s, partition, deadline).await {
                let keys: BTreeSet<&String> = records.iter().map(|(_, (k, _))| k).collect();
                let settled = keys.len() == records.len();
                last = Some((records, settled));
                if settled {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if let Some((records, settled)) = last {
            s.history.record(
                s.now(),
                Event::CompactFinal {
                    partition,
                    records,
                    settled,
                },
            );
        }
    }
}

/// Every committed record of `partition` from its log start to its end,
/// read_committed, fetching from the offset after the last one read (the
/// gaps compaction leaves are stepped over). `None` if that could not be
/// read this time, or a transaction is still open.
async fn read_back(
    s: &mut Session,
    partition: i32,
    deadline: Duration,
) -> Option<Vec<(i64, Written)>> {
    let start = s.list_offset(COMPACT_TOPIC, partition, -2).await?;
    let end = s.list_offset(COMPACT_TOPIC, partition, -1).await?;
    let mut out = Vec::new();
    let mut next = start;
    loop {
        if s.now() >= deadline {
            return None;
        }
        let from = next;
        let p = s.fetch_partition(COMPACT_TOPIC, partition, from, 1).await?;
        let aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        let set = p.records.clone().unwrap_or_default();
        let (batches, batches_end) = crate::actors::transactor::committed_batches(&set, &aborted);
        for (_, batch) in batches {
            for (offset, key, value) in broker::log::records::keyed_records(batch)? {
                if offset < next {
                    continue;
                }
                let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
                out.push((offset, (key.map(text).unwrap_or_default(), value.map(text))));
                next = offset + 1;
            }
        }
        // A batch compaction emptied after `next` keeps its last offset:
        // the reader goes on after it, as Kafka's consumers do.
        next = next.max(batches_end);
        let stable = p.last_stable_offset >= p.high_watermark;
        if next >= p.high_watermark.max(end) {
            return stable.then_some(out);
        }
        if next == from {
            // Nothing from `next` on: an open transaction holds the last
            // stable offset back (read again later), or compaction removed
            // the log's last records (tombstones past delete.retention.ms).
            return (stable && p.high_watermark >= end).then_some(out);
        }
    }
}

/// The compacted topic's writer, and its reader on a node of its own once
/// the faults healed (a trimmed topic never created must not keep the
/// others' final reads waiting: seed 64).
pub struct Compactor;
pub static COMPACTOR: Compactor = Compactor;

impl Actor for Compactor {
    fn name(&self) -> &'static str {
        "compactor"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("compactor-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(compactor(s, stage.faults_end))
    }

    fn finale(&self, stage: &Stage, deadline: Duration) -> Vec<Finale> {
        let s = stage.session("final-compact-reader");
        vec![Finale {
            name: "final-compact-reader",
            ip: Ipv4Addr::new(10, 0, 2, 7),
            play: Box::pin(final_read(s, deadline)),
        }]
    }
}
