//! Judges a run's history against the final state of the log, Jepsen
//! style. Each violation names its invariant first, then the operations
//! involved.

use std::collections::{BTreeMap, BTreeSet};

use crate::workload::{Event, Outcome, PARTITIONS};

const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const KAFKA_STORAGE_ERROR: i16 = 56;

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
    let mut committed: BTreeMap<(&str, i32), (i64, String)> = BTreeMap::new();
    let mut in_doubt: BTreeMap<(&str, i32), BTreeSet<i64>> = BTreeMap::new();
    let mut owners: BTreeMap<(i32, i32), &str> = BTreeMap::new();
    // Per broker and partition: every answer's arrival, epoch and client.
    type Answers<'a> = Vec<(std::time::Duration, i32, &'a str)>;
    let mut epochs: BTreeMap<(u32, &str, i32), Answers> = BTreeMap::new();
    let mut regressed: BTreeSet<(u32, &str, i32)> = BTreeSet::new();
    // Admin requests whose outcome is unknown: no answer, or a failure the
    // volume may explain (an EIO after the server applied the request).
    let mut admin_in_doubt: BTreeSet<(&str, &str, bool)> = BTreeSet::new();
    for (t, e) in events {
        match e {
            // A broker never goes back to an older leader epoch of a
            // partition: it only follows newer assignments. Only answers in
            // real-time order count: one that arrived before this request
            // was sent (an answer held up by the network was made earlier).
            Event::Metadata {
                client,
                sent,
                broker,
                topic_id,
                partitions,
            } => {
                for (p, leader, epoch) in partitions {
                    if *leader < 0 || *epoch < 0 {
                        continue;
                    }
                    let key = (*broker, topic_id.as_str(), *p);
                    let earlier = epochs.entry(key).or_default();
                    let before = earlier
                        .iter()
                        .filter(|(got, _, _)| got < sent)
                        .max_by_key(|(_, e, _)| *e);
                    if let Some((got, seen, who)) = before {
                        if epoch < seen && regressed.insert(key) {
                            out.push(format!(
                                "epoch-regression broker-{broker} answered {client} (asked at {}) that broker-{leader} leads {topic_id}/{p} in leader epoch {epoch}, after answering {who} leader epoch {seen} at {}",
                                at(sent),
                                at(got)
                            ));
                        }
                    }
                    earlier.push((*t, *epoch, client.as_str()));
                }
            }
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
                group,
                partition,
                offset,
                acked: true,
            } => {
                committed.insert((group, *partition), (*offset, at(t)));
            }
            // A commit without a positive answer may still take effect, even
            // later than newer ones (a request left on a connection the
            // client gave up on): its offset is a legal answer from now on.
            Event::Commit {
                group,
                partition,
                offset,
                acked: false,
            } => {
                in_doubt
                    .entry((group, *partition))
                    .or_default()
                    .insert(*offset);
            }
            Event::Committed {
                group,
                partition,
                offset,
            } => {
                let key = (group.as_str(), *partition);
                let doubtful = in_doubt.get(&key).is_some_and(|s| s.contains(offset));
                if let Some((acked, when)) = committed.get(&key) {
                    if offset < acked && !doubtful {
                        out.push(format!(
                            "committed-offset-regression group {group} partition {partition}: offset {acked} was committed at {when}, OffsetFetch at {} returned {offset}",
                            at(t)
                        ));
                    }
                }
            }
            Event::Assigned {
                member,
                generation,
                partitions,
            } => {
                for p in partitions {
                    match owners.insert((*generation, *p), member) {
                        Some(other) if other != member.as_str() => out.push(format!(
                            "group-exclusivity generation {generation}: partition {p} owned by {other} and {member}"
                        )),
                        _ => {}
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
            // A create (or a grow) of a topic only this client asks for
            // fails only for the volume's reasons: an I/O error injected
            // while it ran. Anything else the cluster did to itself (a
            // sweep of a live creator's staging, two admin requests
            // tripping over each other). "Already exists" is fine only
            // after an attempt whose outcome is unknown.
            Event::Admin {
                client,
                topic,
                grow,
                broker,
                sent,
                answer,
                volume_errors,
            } => {
                let key = (client.as_str(), topic.as_str(), *grow);
                let retried = admin_in_doubt.contains(&key);
                match answer {
                    None => {
                        admin_in_doubt.insert(key);
                    }
                    Some((0, _)) => {}
                    Some((TOPIC_ALREADY_EXISTS, _)) if !grow && retried => {}
                    Some((INVALID_PARTITIONS, _)) if *grow && retried => {}
                    Some((KAFKA_STORAGE_ERROR, _)) if *volume_errors > 0 => {
                        admin_in_doubt.insert(key);
                    }
                    Some((code, message)) => {
                        admin_in_doubt.insert(key);
                        out.push(format!(
                            "create-failed {client} {} {topic} via broker-{broker} (sent at {}, answered at {}, {volume_errors} volume errors meanwhile): error {code} {message}",
                            if *grow { "grew" } else { "created" },
                            at(sent),
                            at(t)
                        ));
                    }
                }
            }
            Event::DeletedRead {
                incarnation,
                values,
            } => {
                if let Some(v) = values.first() {
                    out.push(format!(
                        "read-from-deleted-topic incarnation {incarnation} was deleted, then a fetch at {} returned {v}",
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

/// How many operations each invariant was checked against.
pub fn counts(
    events: &[(std::time::Duration, Event)],
    logs: &FinalLogs,
) -> BTreeMap<&'static str, usize> {
    let mut c: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (_, e) in events {
        let keys: &[&'static str] = match e {
            Event::Produce {
                outcome: Outcome::Acked { .. },
                idempotent,
                ..
            } => {
                if *idempotent {
                    &["lost-write", "duplicate"]
                } else {
                    &["lost-write", "split-brain"]
                }
            }
            Event::Poll { .. } => &["inconsistent-offsets", "nonmonotonic-poll", "poll-skip"],
            Event::Committed { .. } => &["committed-offset-regression"],
            Event::Assigned { .. } => &["group-exclusivity"],
            Event::ChurnRead { .. } => &["recreated-topic-not-empty"],
            Event::DeletedRead { .. } => &["read-from-deleted-topic"],
            Event::Metadata { .. } => &["epoch-regression"],
            Event::Deleted { .. } => &["deletion-leftover", "deleted-partition-recreated"],
            Event::Admin {
                answer: Some(_), ..
            } => &["create-failed"],
            _ => &[],
        };
        for k in keys {
            *c.entry(k).or_default() += 1;
        }
    }
    c.insert("liveness", logs.len());
    c
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

    fn admin(
        topic: &str,
        grow: bool,
        answer: Option<(i16, &str)>,
        volume_errors: u64,
    ) -> (Duration, Event) {
        (
            Duration::ZERO,
            Event::Admin {
                client: "creator-0".into(),
                topic: topic.into(),
                grow,
                broker: 1,
                sent: Duration::ZERO,
                answer: answer.map(|(c, m)| (c, m.into())),
                volume_errors,
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

    fn event(e: Event) -> (Duration, Event) {
        (Duration::from_secs(1), e)
    }

    /// Broker 0 answering, between `sent` and `got` seconds, that `leader`
    /// leads partition 0 in `epoch`.
    fn metadata(leader: i32, epoch: i32, sent: u64, got: u64) -> (Duration, Event) {
        (
            Duration::from_secs(got),
            Event::Metadata {
                client: "c".into(),
                sent: Duration::from_secs(sent),
                broker: 0,
                topic_id: "t".into(),
                partitions: vec![(0, leader, epoch)],
            },
        )
    }

    fn poll(from: i64, got: &[(i64, &str)]) -> (Duration, Event) {
        event(Event::Poll {
            client: "r".into(),
            partition: 0,
            from,
            got: got.iter().map(|(o, v)| (*o, (*v).to_owned())).collect(),
        })
    }

    /// Every anomaly, each in a history of its own: the checker names
    /// exactly that one, and nothing in a clean history.
    #[test]
    fn each_anomaly_is_reported_alone_and_by_name() {
        let base = [(0, "a", 1), (1, "b", 1), (2, "c", 1)];
        let clean_log = logs(&[(0, &base)]);
        type History = Vec<(Duration, Event)>;
        let cases: Vec<(&str, History, FinalLogs)> = vec![
            (
                "lost-write",
                vec![acked(0, "b", 1, 1), acked(0, "z", 7, 1)],
                clean_log.clone(),
            ),
            ("lost-write", vec![acked(0, "z", 1, 1)], clean_log.clone()),
            (
                "duplicate",
                vec![acked(0, "a", 0, 1)],
                logs(&[(0, &[(0, "a", 1), (1, "b", 1), (2, "a", 1)])]),
            ),
            (
                "inconsistent-offsets",
                vec![poll(0, &[(0, "a"), (1, "x")])],
                clean_log.clone(),
            ),
            (
                "nonmonotonic-poll",
                vec![poll(1, &[(0, "a"), (1, "b")])],
                clean_log.clone(),
            ),
            ("poll-skip", vec![poll(0, &[(1, "b")])], clean_log.clone()),
            (
                "poll-skip",
                vec![poll(0, &[(0, "a"), (2, "c")])],
                clean_log.clone(),
            ),
            (
                "poll-skip",
                vec![],
                logs(&[(0, &[(0, "a", 1), (2, "c", 1)])]),
            ),
            (
                "committed-offset-regression",
                vec![
                    event(Event::Commit {
                        group: "g".into(),
                        partition: 0,
                        offset: 5,
                        acked: true,
                    }),
                    event(Event::Committed {
                        group: "g".into(),
                        partition: 0,
                        offset: 3,
                    }),
                ],
                clean_log.clone(),
            ),
            (
                "read-from-deleted-topic",
                vec![event(Event::DeletedRead {
                    incarnation: 1,
                    values: vec!["churn-1-0".into()],
                })],
                clean_log.clone(),
            ),
            (
                "recreated-topic-not-empty",
                vec![event(Event::ChurnRead {
                    incarnation: 2,
                    values: vec!["churn-1-0".into()],
                })],
                clean_log.clone(),
            ),
            (
                "epoch-regression",
                vec![
                    metadata(1, 3, 1, 2),
                    metadata(2, 3, 3, 4),
                    metadata(1, 4, 5, 6),
                    metadata(0, 2, 7, 8),
                ],
                clean_log.clone(),
            ),
            (
                "split-brain",
                vec![acked(0, "b", 1, 2), acked(0, "c", 2, 1)],
                clean_log.clone(),
            ),
            (
                "group-exclusivity",
                vec![
                    event(Event::Assigned {
                        member: "m1".into(),
                        generation: 3,
                        partitions: vec![0, 1],
                    }),
                    event(Event::Assigned {
                        member: "m2".into(),
                        generation: 3,
                        partitions: vec![1, 2],
                    }),
                ],
                clean_log.clone(),
            ),
            (
                "create-failed",
                vec![admin("t1", false, Some((56, "was damaged")), 0)],
                clean_log.clone(),
            ),
            (
                "create-failed",
                vec![admin("t1", false, Some((36, "")), 0)],
                clean_log.clone(),
            ),
            (
                "create-failed",
                vec![admin("t1:3", true, Some((56, "swept")), 0)],
                clean_log.clone(),
            ),
            (
                "create-failed",
                // Already exists is fine only for a name asked for before.
                vec![
                    admin("t1", false, None, 0),
                    admin("t2", false, Some((36, "")), 0),
                ],
                clean_log.clone(),
            ),
            ("liveness", vec![], {
                let mut l = clean_log.clone();
                l.remove(&1);
                l
            }),
        ];
        for (expected, events, l) in cases {
            let found = check(&events, &l);
            assert!(
                !found.is_empty() && names(&found).iter().all(|n| *n == expected),
                "expected only {expected}, got {found:#?}"
            );
        }
        let quiet = vec![
            // Overlapping requests: the older answer was made before the
            // newer one, whatever the order of arrival.
            metadata(1, 3, 1, 2),
            metadata(1, 4, 3, 5),
            metadata(0, 3, 4, 6),
            // A commit that got no positive answer may land after a newer one.
            event(Event::Commit {
                group: "g".into(),
                partition: 1,
                offset: 1,
                acked: false,
            }),
            event(Event::Commit {
                group: "g".into(),
                partition: 1,
                offset: 2,
                acked: true,
            }),
            event(Event::Committed {
                group: "g".into(),
                partition: 1,
                offset: 1,
            }),
            acked(0, "a", 0, 1),
            acked(0, "b", 1, 1),
            poll(0, &[(0, "a"), (1, "b")]),
            poll(2, &[(2, "c")]),
            event(Event::Commit {
                group: "g".into(),
                partition: 0,
                offset: 2,
                acked: true,
            }),
            event(Event::Committed {
                group: "g".into(),
                partition: 0,
                offset: 2,
            }),
            event(Event::ChurnRead {
                incarnation: 3,
                values: vec!["churn-3-0".into()],
            }),
            event(Event::DeletedRead {
                incarnation: 3,
                values: vec![],
            }),
            event(Event::Assigned {
                member: "m1".into(),
                generation: 3,
                partitions: vec![0],
            }),
            event(Event::Assigned {
                member: "m2".into(),
                generation: 3,
                partitions: vec![1, 2],
            }),
            event(Event::Assigned {
                member: "m2".into(),
                generation: 4,
                partitions: vec![0],
            }),
        ];
        let quiet = quiet
            .into_iter()
            .chain([
                admin("t1", false, Some((0, "")), 0),
                // No answer, then "exists": the first attempt went through.
                admin("t2", false, None, 0),
                admin("t2", false, Some((36, "")), 0),
                // A storage error while the volume injected I/O errors, then
                // "exists": the failed attempt may have been applied.
                admin("t3", false, Some((56, "EIO")), 2),
                admin("t3", false, Some((36, "")), 0),
                admin("t1:2", true, None, 0),
                admin("t1:2", true, Some((37, "already 2")), 0),
            ])
            .collect::<Vec<_>>();
        let clean = check(&quiet, &clean_log);
        assert!(clean.is_empty(), "{clean:?}");
    }
}
