//! The compacted topic: compacted-write-lost, compaction-unfinished, and
//! its liveness.
//!
//! What a reader may see of a key depends on writes whose answer never
//! came (they may have landed): a record newer than the newest
//! acknowledged one may stand in for it, and a tombstone sent after it may
//! have deleted the key (and, past delete.retention.ms, gone itself).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::compactor::Written;
use crate::workload::Event;

use super::Invariant;

/// A write sent: when, and its value (`None`: a tombstone).
type Sent<'a> = (Duration, &'a Option<String>);
/// A write acknowledged: its offset, value, when it was answered and
/// when it was sent.
type Acked<'a> = (i64, &'a Option<String>, Duration, Duration);

/// Judges the compactor's history on its own: it writes only its topic.
pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let mut finals: BTreeMap<i32, BTreeMap<i64, &Written>> = BTreeMap::new();
    let mut read_at: BTreeMap<i32, Duration> = BTreeMap::new();
    for (at, e) in events {
        if let Event::CompactFinal {
            partition,
            records,
            settled,
        } = e
        {
            finals.insert(*partition, records.iter().map(|(o, w)| (*o, w)).collect());
            read_at.insert(*partition, *at);
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
    // Per partition and key: every write sent (when, value) and every one
    // acknowledged (offset, value, when).
    let mut sent: BTreeMap<(i32, &str), Vec<Sent>> = BTreeMap::new();
    let mut acked: BTreeMap<(i32, &str), Vec<Acked>> = BTreeMap::new();
    let mut at_offset: BTreeMap<(i32, i64), (&str, &Option<String>)> = BTreeMap::new();
    let mut written: BTreeSet<i32> = BTreeSet::new();
    for (at, e) in events {
        match e {
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
    for (partition, log) in &finals {
        for (offset, (key, value)) in log {
            let invented = match at_offset.get(&(*partition, *offset)) {
                Some((k, v)) => k != key || *v != value,
                None => !sent
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
    for ((partition, key), writes) in &acked {
        let Some(log) = finals.get(partition) else {
            continue; // reported as liveness
        };
        let Some((offset, value, answered, sent_at)) = writes.iter().max_by_key(|w| w.0) else {
            continue;
        };
        let newest_read = log
            .iter()
            .filter(|(_, (k, _))| k == key)
            .map(|(o, _)| *o)
            .max();
        // How long a tombstone stays is not judged here: its delete
        // horizon is in the clock of the leader that first kept it, and
        // the next leader's clock may be minutes ahead (the simulator
        // skews and jumps each broker's clock), as on any cluster.
        let _ = (sent_at, &read_at);
        let ok = match newest_read {
            Some(o) if o >= *offset => true,
            Some(_) => false,
            // Gone: a tombstone went last (it goes too, after
            // delete.retention.ms), or one sent later may have landed.
            None => {
                value.is_none()
                    || sent.get(&(*partition, *key)).is_some_and(|w| {
                        w.iter()
                            .any(|(at, v)| v.is_none() && *at + REQUEST_TIMEOUT >= *answered)
                    })
            }
        };
        if !ok {
            out.push(Invariant::CompactedWriteLost.says(format!(
                "{key}={value:?} was acknowledged at {partition}/{offset} (at {:.3}s), the newest acknowledged write of {key}, and the final log's newest {key} is {newest_read:?}",
                answered.as_secs_f64()
            )));
        }
    }
    for partition in &written {
        if !finals.contains_key(partition) {
            out.push(Invariant::Liveness.says(format!(
                "compacted partition {partition} was not readable after the faults healed"
            )));
        }
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
}
