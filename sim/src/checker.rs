//! Judges a run's history against the final state of the log, Jepsen
//! style. Each violation names its invariant first, then the operations
//! involved.
//!
//! `check` reads the final logs once (`FinalIndex`), then walks the history
//! in order with a `Judge` whose one method per kind of event holds one
//! family of invariants; what needs the whole history (split-brain) is
//! judged at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::workload::{Event, Outcome, PARTITIONS};

const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const KAFKA_STORAGE_ERROR: i16 = 56;

/// The final log of each partition: `(offset, value, leader epoch)`.
pub(crate) type FinalLogs = BTreeMap<i32, Vec<(i64, String, i32)>>;

pub fn check(events: &[(Duration, Event)], logs: &FinalLogs) -> Vec<String> {
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        if !logs.contains_key(&p) {
            out.push(format!(
                "liveness partition {p} was not readable and writable after the faults healed"
            ));
        }
    }
    let index = FinalIndex::new(logs, &mut out);
    index.duplicates(events, &mut out);
    let mut judge = Judge::new(logs, &index, out);
    for (t, e) in events {
        judge.see(t, e);
    }
    judge.split_brain()
}

fn at(d: &Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// The final log by offset and by value.
struct FinalIndex<'a> {
    by_offset: BTreeMap<(i32, i64), (&'a str, i32)>,
    by_value: BTreeMap<&'a str, Vec<(i32, i64)>>,
}

impl<'a> FinalIndex<'a> {
    fn new(logs: &'a FinalLogs, out: &mut Vec<String>) -> Self {
        let mut index = FinalIndex {
            by_offset: BTreeMap::new(),
            by_value: BTreeMap::new(),
        };
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
                index.by_offset.insert((*p, *offset), (value, *epoch));
                index.by_value.entry(value).or_default().push((*p, *offset));
            }
        }
        index
    }

    /// Only idempotent producers promise one copy per value.
    fn duplicates(&self, events: &[(Duration, Event)], out: &mut Vec<String>) {
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
        for (value, places) in &self.by_value {
            if places.len() > 1 && idempotent.contains(value) {
                out.push(format!(
                    "duplicate value {value} is in the log {} times: {places:?}",
                    places.len()
                ));
            }
        }
    }
}

/// Per broker and partition: every answer's arrival, epoch and client.
type Answers<'a> = Vec<(Duration, i32, &'a str)>;

/// What the history has shown so far, for the invariants that compare an
/// event with earlier ones.
struct Judge<'a> {
    /// The violations found so far, in the order they were found.
    out: Vec<String>,
    logs: &'a FinalLogs,
    index: &'a FinalIndex<'a>,
    /// Brokers that acknowledged plain writes, per partition and epoch.
    ackers: BTreeMap<(i32, i32), BTreeSet<u32>>,
    /// The first value read at each offset, and by whom.
    seen_at: BTreeMap<(i32, i64), (&'a str, &'a str)>,
    committed: BTreeMap<(&'a str, i32), (i64, String)>,
    in_doubt: BTreeMap<(&'a str, i32), BTreeSet<i64>>,
    owners: BTreeMap<(i32, i32), &'a str>,
    epochs: BTreeMap<(u32, &'a str, i32), Answers<'a>>,
    regressed: BTreeSet<(u32, &'a str, i32)>,
    /// Admin requests whose outcome is unknown: no answer, or a failure the
    /// volume may explain (an EIO after the server applied the request).
    admin_in_doubt: BTreeSet<(&'a str, &'a str, bool)>,
}

impl<'a> Judge<'a> {
    fn new(logs: &'a FinalLogs, index: &'a FinalIndex<'a>, out: Vec<String>) -> Self {
        Judge {
            out,
            logs,
            index,
            ackers: BTreeMap::new(),
            seen_at: BTreeMap::new(),
            committed: BTreeMap::new(),
            in_doubt: BTreeMap::new(),
            owners: BTreeMap::new(),
            epochs: BTreeMap::new(),
            regressed: BTreeSet::new(),
            admin_in_doubt: BTreeSet::new(),
        }
    }

    fn see(&mut self, t: &Duration, e: &'a Event) {
        match e {
            Event::Metadata {
                client,
                sent,
                broker,
                topic_id,
                partitions,
            } => {
                for (p, leader, epoch) in partitions {
                    self.metadata(t, client, sent, *broker, topic_id, (*p, *leader, *epoch));
                }
            }
            Event::Produce {
                client,
                idempotent,
                partition,
                value,
                outcome: Outcome::Acked { offset, broker },
            } => self.acked(
                t,
                client,
                *idempotent,
                (*partition, *offset),
                value,
                *broker,
            ),
            Event::Poll {
                client,
                partition,
                from,
                got,
            } => self.poll(t, client, *partition, *from, got),
            Event::Commit {
                group,
                partition,
                offset,
                acked: true,
            } => {
                self.committed.insert((group, *partition), (*offset, at(t)));
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
                self.in_doubt
                    .entry((group, *partition))
                    .or_default()
                    .insert(*offset);
            }
            Event::Committed {
                group,
                partition,
                offset,
            } => self.committed_offset(t, group, *partition, *offset),
            Event::Assigned {
                member,
                generation,
                partitions,
            } => {
                for p in partitions {
                    match self.owners.insert((*generation, *p), member) {
                        Some(other) if other != member.as_str() => self.out.push(format!(
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
                    self.out.push(format!(
                        "recreated-topic-not-empty incarnation {incarnation} of the recreated topic read {old} at {}",
                        at(t)
                    ));
                }
            }
            Event::Admin {
                client,
                topic,
                grow,
                broker,
                sent,
                answer,
                volume_errors,
            } => {
                let request = (client.as_str(), topic.as_str(), *grow);
                self.admin(t, request, *broker, sent, answer, *volume_errors);
            }
            Event::DeletedRead {
                incarnation,
                values,
            } => {
                if let Some(v) = values.first() {
                    self.out.push(format!(
                        "read-from-deleted-topic incarnation {incarnation} was deleted, then a fetch at {} returned {v}",
                        at(t)
                    ));
                }
            }
            _ => {}
        }
    }

    /// A broker never goes back to an older leader epoch of a partition: it
    /// only follows newer assignments. Only answers in real-time order
    /// count: one that arrived before this request was sent (an answer
    /// held up by the network was made earlier).
    fn metadata(
        &mut self,
        t: &Duration,
        client: &'a str,
        sent: &Duration,
        broker: u32,
        topic_id: &'a str,
        (p, leader, epoch): (i32, i32, i32),
    ) {
        if leader < 0 || epoch < 0 {
            return;
        }
        let key = (broker, topic_id, p);
        let earlier = self.epochs.entry(key).or_default();
        let before = earlier
            .iter()
            .filter(|(got, _, _)| got < sent)
            .max_by_key(|(_, e, _)| *e);
        if let Some((got, seen, who)) = before {
            if epoch < *seen && self.regressed.insert(key) {
                self.out.push(format!(
                    "epoch-regression broker-{broker} answered {client} (asked at {}) that broker-{leader} leads {topic_id}/{p} in leader epoch {epoch}, after answering {who} leader epoch {seen} at {}",
                    at(sent),
                    at(got)
                ));
            }
        }
        earlier.push((*t, epoch, client));
    }

    /// An acknowledged write is in the final log where its answer said.
    fn acked(
        &mut self,
        t: &Duration,
        client: &str,
        idempotent: bool,
        (partition, offset): (i32, i64),
        value: &str,
        broker: u32,
    ) {
        if !self.logs.contains_key(&partition) {
            return; // reported as liveness
        }
        match self.index.by_offset.get(&(partition, offset)) {
            // A retry an idempotent producer sent to a new leader is
            // answered by it for a batch its predecessor wrote, so only
            // plain writes say which broker appended.
            Some((v, epoch)) if *v == value => {
                if !idempotent {
                    self.ackers
                        .entry((partition, *epoch))
                        .or_default()
                        .insert(broker);
                }
            }
            Some((v, _)) => self.out.push(format!(
                "lost-write {client} at {} had {value} acknowledged at {partition}/{offset} by broker-{broker}, the log has {v} there",
                at(t)
            )),
            None => self.out.push(format!(
                "lost-write {client} at {} had {value} acknowledged at {partition}/{offset} by broker-{broker}, the log ends before it",
                at(t)
            )),
        }
    }

    /// A fetch starts where it asked, has no gaps, and agrees with every
    /// other read and with the final log.
    fn poll(
        &mut self,
        t: &Duration,
        client: &'a str,
        partition: i32,
        from: i64,
        got: &'a [(i64, String)],
    ) {
        if let Some((first, _)) = got.first() {
            if *first < from {
                self.out.push(format!(
                    "nonmonotonic-poll {client} at {} asked {partition}/{from} and got offset {first}",
                    at(t)
                ));
            } else if *first > from {
                self.out.push(format!(
                    "poll-skip {client} at {} asked {partition}/{from} and got offset {first} first",
                    at(t)
                ));
            }
        }
        for pair in got.windows(2) {
            if pair[1].0 != pair[0].0 + 1 {
                self.out.push(format!(
                    "poll-skip {client} at {} read {partition}/{} then {partition}/{}",
                    at(t),
                    pair[0].0,
                    pair[1].0
                ));
            }
        }
        for (offset, value) in got {
            if let Some((prev, who)) = self.seen_at.get(&(partition, *offset)) {
                if *prev != value.as_str() {
                    self.out.push(format!(
                        "inconsistent-offsets {partition}/{offset} read as {prev} by {who} and as {value} by {client} at {}",
                        at(t)
                    ));
                }
            } else {
                self.seen_at.insert((partition, *offset), (value, client));
            }
            if let Some((v, _)) = self.index.by_offset.get(&(partition, *offset)) {
                if *v != value.as_str() {
                    self.out.push(format!(
                        "inconsistent-offsets {partition}/{offset} read as {value} by {client} at {}, the final log has {v}",
                        at(t)
                    ));
                }
            }
        }
    }

    /// OffsetFetch never returns less than an acknowledged commit, unless
    /// that smaller offset was itself a commit in doubt.
    fn committed_offset(&mut self, t: &Duration, group: &str, partition: i32, offset: i64) {
        let key = (group, partition);
        let doubtful = self.in_doubt.get(&key).is_some_and(|s| s.contains(&offset));
        if let Some((acked, when)) = self.committed.get(&key) {
            if offset < *acked && !doubtful {
                self.out.push(format!(
                    "committed-offset-regression group {group} partition {partition}: offset {acked} was committed at {when}, OffsetFetch at {} returned {offset}",
                    at(t)
                ));
            }
        }
    }

    /// A create (or a grow) of a topic only this client asks for fails
    /// only for the volume's reasons: an I/O error injected while it ran.
    /// Anything else the cluster did to itself (a sweep of a live creator's
    /// staging, two admin requests tripping over each other). "Already
    /// exists" is fine only after an attempt whose outcome is unknown.
    fn admin(
        &mut self,
        t: &Duration,
        request: (&'a str, &'a str, bool),
        broker: u32,
        sent: &Duration,
        answer: &Option<(i16, String)>,
        volume_errors: u64,
    ) {
        let (client, topic, grow) = request;
        let retried = self.admin_in_doubt.contains(&request);
        match answer {
            None => {
                self.admin_in_doubt.insert(request);
            }
            Some((0, _)) => {}
            Some((TOPIC_ALREADY_EXISTS, _)) if !grow && retried => {}
            Some((INVALID_PARTITIONS, _)) if grow && retried => {}
            Some((KAFKA_STORAGE_ERROR, _)) if volume_errors > 0 => {
                self.admin_in_doubt.insert(request);
            }
            Some((code, message)) => {
                self.admin_in_doubt.insert(request);
                self.out.push(format!(
                    "create-failed {client} {} {topic} via broker-{broker} (sent at {}, answered at {}, {volume_errors} volume errors meanwhile): error {code} {message}",
                    if grow { "grew" } else { "created" },
                    at(sent),
                    at(t)
                ));
            }
        }
    }

    /// Two brokers never acknowledge plain writes in one leader epoch.
    fn split_brain(mut self) -> Vec<String> {
        for ((p, epoch), brokers) in std::mem::take(&mut self.ackers) {
            if brokers.len() > 1 {
                self.out.push(format!(
                    "split-brain partition {p} leader epoch {epoch}: writes acknowledged by brokers {brokers:?}"
                ));
            }
        }
        self.out
    }
}

/// How many operations each invariant was checked against.
pub fn counts(events: &[(Duration, Event)], logs: &FinalLogs) -> BTreeMap<&'static str, usize> {
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
