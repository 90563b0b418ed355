//! The compacted topic: compacted-write-lost, compaction-unfinished, and
//! its liveness.
//!
//! What a reader may see of a key depends on writes whose answer never
//! came (they may have landed): a record newer than the newest
//! acknowledged one may stand in for it, and a tombstone sent after it may
//! have deleted the key (and, past delete.retention.ms, gone itself).
//!
//! A transaction's records count as acknowledged once its commit was;
//! one whose commit was sent without an answer may have committed; one
//! never sent a commit was aborted (by its abort, its producer's next
//! epoch or the coordinator's timeout), and the final read_committed read
//! must not see its records (aborted-read).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::actors::compactor::{DELETE_RETENTION, Written};
use crate::history::{Event, Outcome};

use super::Invariant;

/// A write sent: when, and its value (`None`: a tombstone).
type Sent<'a> = (Duration, &'a Option<String>);
/// A write acknowledged: its offset, value, when it was answered and
/// when it was sent.
type Acked<'a> = (i64, &'a Option<String>, Duration, Duration);

/// A whole read of a partition: when it started and ended, and what it
/// read by offset.
struct WholeRead<'a> {
    partition: i32,
    started: Duration,
    ended: Duration,
    log: BTreeMap<i64, &'a Written>,
    what: &'static str,
}

/// Judges the compactor's history on its own: it writes only its topic.
pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let (reads, finals) = whole_reads(events, out);
    let w = Writes::of(events);
    for read in &reads {
        nothing_invented(read, &w, out);
    }
    for read in &reads {
        newest_kept(read, &w, out);
    }
    for partition in &w.written {
        if !finals.contains(partition) {
            out.push(Invariant::Liveness.says(format!(
                "compacted partition {partition} was not readable after the faults healed"
            )));
        }
    }
}

/// Every whole read of a partition (the final ones too, by partition),
/// and the final reads that found a key more than once
/// (compaction-unfinished).
fn whole_reads<'a>(
    events: &'a [(Duration, Event)],
    out: &mut Vec<String>,
) -> (Vec<WholeRead<'a>>, BTreeSet<i32>) {
    let mut finals: BTreeSet<i32> = BTreeSet::new();
    let mut reads: Vec<WholeRead> = Vec::new();
    for (at, e) in events {
        if let Event::CompactRead {
            partition,
            started,
            records,
        } = e
        {
            reads.push(WholeRead {
                partition: *partition,
                started: *started,
                ended: *at,
                log: records.iter().map(|(o, w)| (*o, w)).collect(),
                what: "a read while writes went on",
            });
        }
        if let Event::CompactFinal {
            partition,
            records,
            settled,
        } = e
        {
            finals.insert(*partition);
            reads.push(WholeRead {
                partition: *partition,
                started: *at,
                ended: *at,
                log: records.iter().map(|(o, w)| (*o, w)).collect(),
                what: "the final read",
            });
            if !settled {
                let mut seen = BTreeSet::new();
                let twice: BTreeSet<&String> = records
                    .iter()
                    .filter(|(_, (k, _))| !seen.insert(k))
                    .map(|(_, (k, _))| k)
                    .collect();
                out.push(Invariant::CompactionUnfinished.says(format!(
                    "compacted partition {partition} still had keys {twice:?} more than once at the end of the liveness phase"
                )));
            }
        }
    }
    (reads, finals)
}

/// Per partition and key: every write sent (when, value) and every one
/// acknowledged (offset, value, when); what each offset was written with;
/// and the records of transactions never committed.
struct Writes<'a> {
    sent: BTreeMap<(i32, &'a str), Vec<Sent<'a>>>,
    acked: BTreeMap<(i32, &'a str), Vec<Acked<'a>>>,
    at_offset: BTreeMap<(i32, i64), (&'a str, &'a Option<String>)>,
    written: BTreeSet<i32>,
    /// Records of aborted transactions: by offset where it is known, else
    /// by value (values are unique; an aborted tombstone without an offset
    /// cannot be told apart, and is not looked for).
    aborted_at: BTreeMap<(i32, i64), &'a str>,
    aborted_values: BTreeMap<(i32, &'a str, &'a str), &'a str>,
}

impl<'a> Writes<'a> {
    fn of(events: &'a [(Duration, Event)]) -> Self {
        let mut sent: BTreeMap<(i32, &str), Vec<Sent>> = BTreeMap::new();
        let mut acked: BTreeMap<(i32, &str), Vec<Acked>> = BTreeMap::new();
        let mut at_offset: BTreeMap<(i32, i64), (&str, &Option<String>)> = BTreeMap::new();
        let mut written: BTreeSet<i32> = BTreeSet::new();
        let txns = Txns::of(events);
        let mut aborted_at: BTreeMap<(i32, i64), &str> = BTreeMap::new();
        let mut aborted_values: BTreeMap<(i32, &str, &str), &str> = BTreeMap::new();
        for (at, e) in events {
            match e {
                Event::CompactTxnSent {
                    label,
                    partition,
                    records,
                } => {
                    let produced = txns.produced.get(label.as_str());
                    let committed = txns.committed.get(label.as_str());
                    for (i, (key, value)) in records.iter().enumerate() {
                        let offset = produced.map(|(o, _)| o + i as i64);
                        if !txns.commit_sent.contains(label.as_str()) {
                            match (offset, value) {
                                (Some(o), _) => {
                                    aborted_at.insert((*partition, o), label);
                                }
                                (None, Some(v)) => {
                                    aborted_values.insert((*partition, key, v), label);
                                }
                                (None, None) => {}
                            }
                            continue;
                        }
                        // Its commit was sent, so the batch was acknowledged.
                        let (Some(offset), Some((_, produced_at))) = (offset, produced) else {
                            continue;
                        };
                        sent.entry((*partition, key.as_str()))
                            .or_default()
                            .push((*produced_at, value));
                        at_offset.insert((*partition, offset), (key.as_str(), value));
                        if let Some(answered) = committed {
                            written.insert(*partition);
                            acked
                                .entry((*partition, key.as_str()))
                                .or_default()
                                .push((offset, value, *answered, *at));
                        }
                    }
                }
                Event::CompactSent {
                    partition,
                    key,
                    value,
                } => sent
                    .entry((*partition, key.as_str()))
                    .or_default()
                    .push((*at, value)),
                Event::CompactProduced {
                    partition,
                    sent,
                    offset,
                    key,
                    value,
                } => {
                    written.insert(*partition);
                    acked
                        .entry((*partition, key.as_str()))
                        .or_default()
                        .push((*offset, value, *at, *sent));
                    at_offset.insert((*partition, *offset), (key.as_str(), value));
                }
                _ => {}
            }
        }
        Self {
            sent,
            acked,
            at_offset,
            written,
            aborted_at,
            aborted_values,
        }
    }
}

/// Every record `read` found was written there (compacted-write-lost)
/// and committed (aborted-read).
fn nothing_invented(read: &WholeRead, w: &Writes, out: &mut Vec<String>) {
    let WholeRead { partition, log, .. } = read;
    for (offset, (key, value)) in log {
        let aborted = w.aborted_at.get(&(*partition, *offset)).or_else(|| {
            value
                .as_deref()
                .and_then(|v| w.aborted_values.get(&(*partition, key.as_str(), v)))
        });
        if let Some(label) = aborted {
            out.push(Invariant::AbortedRead.says(format!(
                "compacted partition {partition} has {key}={value:?} at {offset}, written by transaction {label}, which was never committed"
            )));
            continue;
        }
        let invented = match w.at_offset.get(&(*partition, *offset)) {
            Some((k, v)) => k != key || *v != value,
            None => !w
                .sent
                .get(&(*partition, key.as_str()))
                .is_some_and(|w| w.iter().any(|(_, v)| *v == value)),
        };
        if invented {
            out.push(Invariant::CompactedWriteLost.says(format!(
                "compacted partition {partition} has {key}={value:?} at {offset}, which no write put there"
            )));
        }
    }
}

/// `read` holds, for every key, the newest write acknowledged before it
/// started, or a newer one sent before it ended (compacted-write-lost).
fn newest_kept(read: &WholeRead, w: &Writes, out: &mut Vec<String>) {
    // How long a tombstone stays is not judged: its delete horizon is in
    // the clock of the leader that first kept it, and the next leader's
    // clock may be minutes ahead (the simulator skews and jumps each
    // broker's clock), as on any cluster.
    for ((partition, key), writes) in w.acked.range((read.partition, "")..) {
        if *partition != read.partition {
            break;
        }
        let Some((offset, value, answered, _)) = writes
            .iter()
            .filter(|w| w.2 < read.started)
            .max_by_key(|w| w.0)
        else {
            continue;
        };
        let newest_read = read
            .log
            .iter()
            .filter(|(_, (k, _))| k == key)
            .map(|(o, _)| *o)
            .max();
        let ok = match newest_read {
            Some(o) if o >= *offset => true,
            // An older value of a key deleted last: a pass removed it
            // only after the read had gone by, and a later one removed
            // the tombstone (past its horizon) before the read got
            // there. Kafka gives a reader delete.retention.ms to read a
            // compacted log whole and see every tombstone; a read that
            // took longer may miss them.
            Some(_) => {
                value.is_none() && read.ended.saturating_sub(read.started) >= DELETE_RETENTION
            }
            // Gone: a tombstone went last (it goes too, after
            // delete.retention.ms), or one sent later may have landed.
            None => {
                value.is_none()
                    || w.sent.get(&(*partition, *key)).is_some_and(|w| {
                        w.iter().any(|(at, v)| {
                            v.is_none() && *at + REQUEST_TIMEOUT >= *answered && *at <= read.ended
                        })
                    })
            }
        };
        if !ok {
            out.push(Invariant::CompactedWriteLost.says(format!(
                "{key}={value:?} was acknowledged at {partition}/{offset} (at {:.3}s), the newest acknowledged write of {key} when {} started (at {:.3}s), whose newest {key} is {newest_read:?}",
                answered.as_secs_f64(),
                read.what,
                read.started.as_secs_f64()
            )));
        }
    }
}

/// The compactor's transactions by label: where each batch landed (first
/// offset, when it was acknowledged), which ones may have committed (a
/// commit sent and not refused), and when a commit was acknowledged.
#[derive(Default)]
struct Txns<'a> {
    produced: BTreeMap<&'a str, (i64, Duration)>,
    commit_sent: BTreeSet<&'a str>,
    committed: BTreeMap<&'a str, Duration>,
}

impl<'a> Txns<'a> {
    fn of(events: &'a [(Duration, Event)]) -> Self {
        let mut t = Txns::default();
        for (at, e) in events {
            match e {
                Event::CompactTxnProduced { label, offset } => {
                    t.produced.insert(label, (*offset, *at));
                }
                Event::CompactTxnEnd {
                    label,
                    commit: true,
                    outcome,
                } => {
                    // A refusal says it did not commit (only an answer to
                    // its first attempt is taken for one).
                    match outcome {
                        Outcome::Refused(_) => {}
                        Outcome::Acked { .. } => {
                            t.commit_sent.insert(label);
                            t.committed.insert(label, *at);
                        }
                        Outcome::Unknown => {
                            t.commit_sent.insert(label);
                        }
                    }
                }
                _ => {}
            }
        }
        t
    }
}

/// How long before an answer a write sent without one may still have been
/// in flight (the simulator clients' longest request timeout), and so
/// land after the answered one.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn judged(events: &[(Duration, Event)]) -> Vec<String> {
        let mut out = Vec::new();
        check(events, &mut out);
        out
    }

    fn sent(ms: u64, key: &str, value: Option<&str>) -> (Duration, Event) {
        (
            at(ms),
            Event::CompactSent {
                partition: 0,
                key: key.into(),
                value: value.map(Into::into),
            },
        )
    }

    fn acked(ms: u64, offset: i64, key: &str, value: Option<&str>) -> (Duration, Event) {
        (
            at(ms),
            Event::CompactProduced {
                partition: 0,
                sent: at(ms - 10),
                offset,
                key: key.into(),
                value: value.map(Into::into),
            },
        )
    }

    fn last(records: &[(i64, &str, Option<&str>)], settled: bool) -> (Duration, Event) {
        (
            at(90_000),
            Event::CompactFinal {
                partition: 0,
                records: records
                    .iter()
                    .map(|(o, k, v)| (*o, ((*k).to_owned(), v.map(Into::into))))
                    .collect(),
                settled,
            },
        )
    }

    #[test]
    fn the_newest_acknowledged_value_of_a_key_must_stay() {
        let history = [
            sent(100, "a", Some("a1")),
            acked(110, 0, "a", Some("a1")),
            sent(200, "a", Some("a2")),
            acked(210, 1, "a", Some("a2")),
        ];
        let with = |end: (Duration, Event)| {
            let mut h = history.to_vec();
            h.push(end);
            judged(&h)
        };
        assert!(with(last(&[(1, "a", Some("a2"))], true)).is_empty());
        let lost = with(last(&[(0, "a", Some("a1"))], true));
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].starts_with("compacted-write-lost"), "{lost:?}");
        let gone = with(last(&[], true));
        assert!(gone[0].starts_with("compacted-write-lost"), "{gone:?}");
        let wrong = with(last(&[(1, "a", Some("a1"))], true));
        assert!(wrong[0].starts_with("compacted-write-lost"), "{wrong:?}");
        let stale = with(last(&[(0, "a", Some("a1")), (1, "a", Some("a2"))], false));
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(stale[0].starts_with("compaction-unfinished"), "{stale:?}");
    }

    #[test]
    fn writes_without_an_answer_may_stand_in_for_the_newest() {
        let history = vec![
            sent(100, "a", Some("a1")),
            acked(110, 0, "a", Some("a1")),
            sent(200, "a", Some("a2")), // no answer
            sent(300, "b", None),       // no answer
        ];
        let mut newer = history.clone();
        newer.push(last(&[(1, "a", Some("a2"))], true));
        assert!(judged(&newer).is_empty(), "{:?}", judged(&newer));
        // A tombstone acknowledged last may take its key with it.
        let mut deleted = history.clone();
        deleted.push(sent(400, "a", None));
        deleted.push(acked(410, 2, "a", None));
        deleted.push(last(&[], true));
        assert!(judged(&deleted).is_empty(), "{:?}", judged(&deleted));
        // An unanswered tombstone sent after the newest answer may too.
        let mut maybe = history.clone();
        maybe.push(sent(400, "a", None));
        maybe.push(last(&[], true));
        assert!(judged(&maybe).is_empty(), "{:?}", judged(&maybe));
        // A value nobody wrote is not.
        let mut invented = history;
        invented.push(last(&[(0, "a", Some("a1")), (3, "a", Some("zz"))], true));
        assert_eq!(judged(&invented).len(), 1, "{:?}", judged(&invented));
    }

    fn txn(ms: u64, label: &str, records: &[(&str, Option<&str>)]) -> (Duration, Event) {
        (
            at(ms),
            Event::CompactTxnSent {
                label: label.into(),
                partition: 0,
                records: records
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.map(Into::into)))
                    .collect(),
            },
        )
    }

    fn txn_written(ms: u64, label: &str, offset: i64) -> (Duration, Event) {
        (
            at(ms),
            Event::CompactTxnProduced {
                label: label.into(),
                offset,
            },
        )
    }

    fn txn_end(ms: u64, label: &str, commit: bool, outcome: Outcome) -> (Duration, Event) {
        (
            at(ms),
            Event::CompactTxnEnd {
                label: label.into(),
                commit,
                outcome,
            },
        )
    }

    #[test]
    fn transactions_count_once_committed_and_never_when_aborted() {
        let ok = Outcome::Acked {
            offset: 0,
            broker: 0,
        };
        let history = vec![
            sent(100, "a", Some("a1")),
            acked(110, 0, "a", Some("a1")),
            // Committed: its a2 is the newest of a.
            txn(200, "t0", &[("a", Some("a2")), ("b", Some("b1"))]),
            txn_written(210, "t0", 1),
            txn_end(220, "t0", true, ok.clone()),
            // Aborted: a3 must never be read.
            txn(300, "t1", &[("a", Some("a3"))]),
            txn_written(310, "t1", 4),
            txn_end(320, "t1", false, ok.clone()),
            // Its commit unanswered: b2 may be read, and need not be.
            txn(400, "t2", &[("b", Some("b2"))]),
            txn_written(410, "t2", 6),
            txn_end(420, "t2", true, Outcome::Unknown),
        ];
        let with = |end: (Duration, Event)| {
            let mut h = history.clone();
            h.push(end);
            judged(&h)
        };
        assert!(with(last(&[(1, "a", Some("a2")), (2, "b", Some("b1"))], true)).is_empty());
        assert!(with(last(&[(1, "a", Some("a2")), (6, "b", Some("b2"))], true)).is_empty());
        let aborted = with(last(&[(2, "b", Some("b1")), (4, "a", Some("a3"))], true));
        assert!(
            aborted.iter().any(|v| v.starts_with("aborted-read")),
            "{aborted:?}"
        );
        let lost = with(last(&[(0, "a", Some("a1")), (2, "b", Some("b1"))], true));
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].starts_with("compacted-write-lost"), "{lost:?}");
        // A transaction never sent a commit was aborted, even if its batch
        // was written: its records are not writes that may stand in.
        let mut abandoned = history.clone();
        abandoned.push(txn(500, "t3", &[("c", Some("c1"))]));
        abandoned.push(txn_written(510, "t3", 8));
        abandoned.push(last(
            &[
                (1, "a", Some("a2")),
                (2, "b", Some("b1")),
                (8, "c", Some("c1")),
            ],
            true,
        ));
        let read = judged(&abandoned);
        assert!(
            read.iter().any(|v| v.starts_with("aborted-read")),
            "{read:?}"
        );
    }

    #[test]
    fn a_read_while_writing_holds_what_was_acknowledged_before_it_started() {
        let read = |started: u64, ended: u64, records: &[(i64, &str, Option<&str>)]| {
            (
                at(ended),
                Event::CompactRead {
                    partition: 0,
                    started: at(started),
                    records: records
                        .iter()
                        .map(|(o, k, v)| (*o, ((*k).to_owned(), v.map(Into::into))))
                        .collect(),
                },
            )
        };
        let history = vec![
            sent(100, "a", Some("a1")),
            acked(110, 0, "a", Some("a1")),
            sent(300, "a", Some("a2")),
            acked(310, 1, "a", Some("a2")),
        ];
        let with = |r: (Duration, Event)| {
            let mut h = history.clone();
            h.push(r);
            h.push(last(&[(1, "a", Some("a2"))], true));
            judged(&h)
        };
        // Started before a2 was acknowledged: a1 will do, and so will a2.
        assert!(with(read(200, 400, &[(0, "a", Some("a1"))])).is_empty());
        assert!(with(read(200, 400, &[(1, "a", Some("a2"))])).is_empty());
        // Started after: a1 alone means a2 was lost, for a while at least.
        let lost = with(read(320, 400, &[(0, "a", Some("a1"))]));
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].contains("a read while writes went on"), "{lost:?}");
        assert!(!with(read(320, 400, &[])).is_empty());
        // A key deleted last: an older value read means its tombstone went
        // before the read got there, which a read may see only if it took
        // longer than delete.retention.ms (Kafka's bound for a whole read).
        let mut deleted = history.clone();
        deleted.push(sent(350, "a", None));
        deleted.push(acked(360, 2, "a", None));
        let judge = |r: (Duration, Event)| {
            let mut h = deleted.clone();
            h.push(r);
            h.push(last(&[], true));
            judged(&h)
        };
        assert!(judge(read(400, 1_000, &[])).is_empty());
        assert!(judge(read(400, 1_000, &[(2, "a", None)])).is_empty());
        let resurrected = judge(read(400, 1_000, &[(1, "a", Some("a2"))]));
        assert_eq!(resurrected.len(), 1, "{resurrected:?}");
        let slow = 400 + DELETE_RETENTION.as_millis() as u64;
        assert!(judge(read(400, slow, &[(1, "a", Some("a2"))])).is_empty());
    }
}
