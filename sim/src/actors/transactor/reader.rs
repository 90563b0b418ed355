//! The read_committed reader of the transactions' topic, and the final
//! read of it and of the transactions' group offsets.

use super::*;
use crate::actors::{Actor, Finale, Play, Role, Stage};
use std::net::Ipv4Addr;

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

/// The read_committed reader of the transactions' topic, and its final
/// read on a node of its own (a read that cannot finish must not use up
/// the others' deadline).
pub struct TxnReader;
pub static TXN_READER: TxnReader = TxnReader;

impl Actor for TxnReader {
    fn name(&self) -> &'static str {
        "txn-reader"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("txn-reader-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(txn_reader(s, stage.faults_end))
    }

    fn finale(&self, stage: &Stage, deadline: Duration) -> Vec<Finale> {
        let s = stage.session("final-txn-reader");
        vec![Finale {
            name: "final-txn-reader",
            ip: Ipv4Addr::new(10, 0, 2, 2),
            play: Box::pin(final_read(s, deadline)),
        }]
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
