//! Judges a run's history against the final state of the log, Jepsen
//! style. Each violation names its invariant first, then the operations
//! involved.

use std::collections::{BTreeMap, BTreeSet};

use crate::workload::{Event, Outcome, PARTITIONS};

/// The final log of each partition: `(offset, value, leader epoch)`.
pub type FinalLogs = BTreeMap<i32, Vec<(i64, String, i32)>>;

pub fn check(events: &[(std::time::Duration, Event)], logs: &FinalLogs) -> Vec<String> {
    let mut out = Vec::new();
    let at = |d: &std::time::Duration| format!("{:.3}s", d.as_secs_f64());

    for p in 0..PARTITIONS {
        if !logs.contains_key(&p) {
            out.push(format!(
                "liveness partition {p} was not readable and writable after the faults healed"
            ));
        }
    }
    // The final log by offset and by value.
    let mut by_offset: BTreeMap<(i32, i64), (&str, i32)> = BTreeMap::new();
    let mut by_value: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for (p, log) in logs {
        let mut expected = None;
        for (offset, value, epoch) in log {
            if let Some(e) = expected {
                if *offset != e {
                    out.push(format!(
                        "poll-skip final read of partition {p} jumped from offset {e} to {offset}"
                    ));
                }
            }
            expected = Some(offset + 1);
            by_offset.insert((*p, *offset), (value, *epoch));
            by_value.entry(value).or_default().push((*p, *offset));
        }
    }
    let idempotent: BTreeSet<&str> = events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Produce {
                idempotent: true,
                value,
                ..
            } => Some(value.as_str()),
            _ => None,
        })
        .collect();
    for (value, places) in &by_value {
        if places.len() > 1 && idempotent.contains(value) {
            out.push(format!(
                "duplicate value {value} is in the log {} times: {places:?}",
                places.len()
            ));
        }
    }

    let mut ackers: BTreeMap<(i32, i32), BTreeSet<u32>> = BTreeMap::new();
    let mut seen_at: BTreeMap<(i32, i64), (&str, &str)> = BTreeMap::new();
    let mut committed: BTreeMap<i32, (i64, String)> = BTreeMap::new();
    for (t, e) in events {
        match e {
            Event::Produce {
                client,
                idempotent,
                partition,
                value,
                outcome: Outcome::Acked { offset, broker },
            } => {
                if !logs.contains_key(partition) {
                    continue; // reported as liveness
                }
                match by_offset.get(&(*partition, *offset)) {
                    // A retry an idempotent producer sent to a new leader is
                    // answered by it for a batch its predecessor wrote, so
                    // only plain writes say which broker appended.
                    Some((v, epoch)) if *v == value.as_str() => {
                        if !idempotent {
                            ackers.entry((*partition, *epoch)).or_default().insert(*broker);
                        }
                    }
                    Some((v, _)) => out.push(format!(
                        "lost-write {client} at {} had {value} acknowledged at {partition}/{offset} by broker-{broker}, the log has {v} there",
                        at(t)
                    )),
                    None => out.push(format!(
                        "lost-write {client} at {} had {value} acknowledged at {partition}/{offset} by broker-{broker}, the log ends before it",
                        at(t)
                    )),
                }
            }
            Event::Poll {
                client,
                partition,
                from,
                got,
            } => {
                if let Some((first, _)) = got.first() {
                    if *first < *from {
                        out.push(format!(
                            "nonmonotonic-poll {client} at {} asked {partition}/{from} and got offset {first}",
                            at(t)
                        ));
                    } else if *first > *from {
                        out.push(format!(
                            "poll-skip {client} at {} asked {partition}/{from} and got offset {first} first",
                            at(t)
                        ));
                    }
                }
                for pair in got.windows(2) {
                    if pair[1].0 != pair[0].0 + 1 {
                        out.push(format!(
                            "poll-skip {client} at {} read {partition}/{} then {partition}/{}",
                            at(t),
                            pair[0].0,
                            pair[1].0
                        ));
                    }
                }
                for (offset, value) in got {
                    if let Some((prev, who)) = seen_at.get(&(*partition, *offset)) {
                        if *prev != value.as_str() {
                            out.push(format!(
                                "inconsistent-offsets {partition}/{offset} read as {prev} by {who} and as {value} by {client} at {}",
                                at(t)
                            ));
                        }
                    } else {
                        seen_at.insert((*partition, *offset), (value, client));
                    }
                    if let Some((v, _)) = by_offset.get(&(*partition, *offset)) {
                        if *v != value.as_str() {
                            out.push(format!(
                                "inconsistent-offsets {partition}/{offset} read as {value} by {client} at {}, the final log has {v}",
                                at(t)
                            ));
                        }
                    }
                }
            }
            Event::Commit {
                partition,
                offset,
                acked: true,
            } => {
                committed.insert(*partition, (*offset, at(t)));
            }
            Event::Committed { partition, offset } => {
                if let Some((acked, when)) = committed.get(partition) {
                    if offset < acked {
                        out.push(format!(
                            "committed-offset-regression partition {partition}: offset {acked} was committed at {when}, OffsetFetch at {} returned {offset}",
                            at(t)
                        ));
                    }
                }
            }
            Event::ChurnRead {
                incarnation,
                values,
            } => {
                let prefix = format!("churn-{incarnation}-");
                if let Some(old) = values.iter().find(|v| !v.starts_with(&prefix)) {
                    out.push(format!(
                        "recreated-topic-not-empty incarnation {incarnation} of the recreated topic read {old} at {}",
                        at(t)
                    ));
                }
            }
            _ => {}
        }
    }
    for ((p, epoch), brokers) in ackers {
        if brokers.len() > 1 {
            out.push(format!(
                "split-brain partition {p} leader epoch {epoch}: writes acknowledged by brokers {brokers:?}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn acked(p: i32, value: &str, offset: i64, broker: u32) -> (Duration, Event) {
        (
            Duration::ZERO,
            Event::Produce {
                client: "c".into(),
                idempotent: value == "a",
                partition: p,
                value: value.into(),
                outcome: Outcome::Acked { offset, broker },
            },
        )
    }

    type Rows<'a> = &'a [(i64, &'a str, i32)];

    fn logs(entries: &[(i32, Rows<'_>)]) -> FinalLogs {
        let mut out: FinalLogs = (0..PARTITIONS).map(|p| (p, Vec::new())).collect();
        for (p, rows) in entries {
            out.insert(
                *p,
                rows.iter()
                    .map(|(o, v, e)| (*o, (*v).to_owned(), *e))
                    .collect(),
            );
        }
        out
    }

    fn names(v: &[String]) -> Vec<&str> {
        v.iter().filter_map(|s| s.split(' ').next()).collect()
    }

    #[test]
    fn each_invariant_is_named() {
        let l = logs(&[(0, &[(0, "a", 1), (1, "b", 1), (2, "a", 2), (3, "c", 1)])]);
        let events = vec![
            acked(0, "a", 0, 1),
            acked(0, "b", 1, 2),
            acked(0, "c", 3, 1),
            acked(0, "x", 1, 1),
            acked(0, "y", 7, 1),
            (
                Duration::ZERO,
                Event::Poll {
                    client: "r".into(),
                    partition: 0,
                    from: 1,
                    got: vec![(2, "a".into())],
                },
            ),
            (
                Duration::ZERO,
                Event::Commit {
                    partition: 0,
                    offset: 5,
                    acked: true,
                },
            ),
            (
                Duration::ZERO,
                Event::Committed {
                    partition: 0,
                    offset: 3,
                },
            ),
            (
                Duration::ZERO,
                Event::ChurnRead {
                    incarnation: 2,
                    values: vec!["churn-1-0".into()],
                },
            ),
        ];
        let v = check(&events, &l);
        let mut found = names(&v);
        found.sort_unstable();
        found.dedup();
        assert_eq!(
            found,
            [
                "committed-offset-regression",
                "duplicate",
                "lost-write",
                "poll-skip",
                "recreated-topic-not-empty",
                "split-brain"
            ],
            "{v:#?}"
        );
        let clean = check(&[acked(0, "a", 0, 1)], &logs(&[(0, &[(0, "a", 1)])]));
        assert!(clean.is_empty(), "{clean:?}");
        let mut missing = logs(&[]);
        missing.remove(&1);
        assert_eq!(names(&check(&[], &missing)), ["liveness"]);
    }
}
