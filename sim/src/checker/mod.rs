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

mod acls;
mod compaction;
mod epochs;
pub mod failover;
mod groups;
mod invariant;
mod last_acked;
mod quotas;
mod reads;
mod reassignments;
mod requests;
mod topics;
mod trim;
mod txns;
mod writes;

pub use invariant::Invariant;

const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const KAFKA_STORAGE_ERROR: i16 = 56;

/// The final log of each partition: `(offset, value, leader epoch)`.
pub(crate) type FinalLogs = BTreeMap<i32, Vec<(i64, String, i32)>>;

pub fn check(events: &[(Duration, Event)], logs: &FinalLogs) -> Vec<String> {
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        if !logs.contains_key(&p) {
            out.push(Invariant::Liveness.says(format!(
                "partition {p} was not readable and writable after the faults healed"
            )));
        }
    }
    trim::check(events, &mut out);
    compaction::check(events, &mut out);
    txns::check(events, &mut out);
    acls::check(events, &mut out);
    reassignments::check(events, &mut out);
    quotas::check(events, &mut out);
    topics::new_topics(events, &mut out);
    requests::answered(events, &mut out);
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
                        out.push(Invariant::PollSkip.says(format!(
                            "final read of partition {p} jumped from offset {e} to {offset}"
                        )));
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
                out.push(Invariant::Duplicate.says(format!(
                    "value {value} is in the log {} times: {places:?}",
                    places.len()
                )));
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
    /// Acknowledged commits per (group, partition), in answer order.
    committed: BTreeMap<(&'a str, i32), Vec<(Duration, i64)>>,
    in_doubt: BTreeMap<(&'a str, i32), BTreeSet<i64>>,
    owners: BTreeMap<(i32, i32), &'a str>,
    /// What each consumer-protocol member holds (each partition with the
    /// time it has held it since), and until when.
    holders: BTreeMap<&'a str, (BTreeMap<i32, Duration>, Duration)>,
    epochs: BTreeMap<(u32, &'a str, i32), Answers<'a>>,
    regressed: BTreeSet<(u32, &'a str, i32)>,
    /// Producer ids handed out so far: who got each, from which broker, when.
    producer_ids: BTreeMap<i64, (&'a str, u32, Duration)>,
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
            holders: BTreeMap::new(),
            epochs: BTreeMap::new(),
            regressed: BTreeSet::new(),
            admin_in_doubt: BTreeSet::new(),
            producer_ids: BTreeMap::new(),
        }
    }

    fn violate(&mut self, invariant: Invariant, detail: String) {
        self.out.push(invariant.says(detail));
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
                self.committed
                    .entry((group, *partition))
                    .or_default()
                    .push((*t, *offset));
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
                sent,
            } => self.committed_offset(t, sent, group, *partition, *offset),
            Event::GroupOnVolume {
                group,
                sent,
                offsets,
                file_epoch,
                newest_epoch,
            } => self.group_on_volume(t, sent, group, offsets, (*file_epoch, *newest_epoch)),
            Event::Assigned {
                member,
                generation,
                partitions,
            } => {
                for p in partitions {
                    match self.owners.insert((*generation, *p), member) {
                        Some(other) if other != member.as_str() => self.violate(Invariant::GroupExclusivity, format!(
                            "generation {generation}: partition {p} owned by {other} and {member}"
                        )),
                        _ => {}
                    }
                }
            }
            Event::Holds {
                member,
                partitions,
                until,
            } => self.holds(t, member, partitions, *until),
            Event::HoldersOnVolume { sent, holders } => self.holders_on_volume(t, sent, holders),
            Event::ChurnRead {
                incarnation,
                values,
                in_doubt,
            } => {
                let prefix = format!("churn-{incarnation}-");
                if let Some(old) = values
                    .iter()
                    .find(|v| !v.starts_with(&prefix) && !in_doubt.contains(v))
                {
                    self.violate(
                        Invariant::RecreatedTopicNotEmpty,
                        format!(
                            "incarnation {incarnation} of the recreated topic read {old} at {}",
                            at(t)
                        ),
                    );
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
            Event::ProducerId { client, broker, id } => {
                if let Some((first, by, when)) =
                    self.producer_ids.insert(*id, (client, *broker, *t))
                {
                    self.violate(Invariant::ProducerIdReused, format!(
                        "producer id {id} went to {first} from broker-{by} at {} and to {client} from broker-{broker} at {}",
                        at(&when),
                        at(t)
                    ));
                }
            }
            Event::Truncated {
                partition,
                epoch,
                given_up,
            } if !given_up.is_empty() => {
                self.violate(Invariant::NothingGivenUp, format!(
                    "at {} the repair of {partition} in epoch {epoch} gave up offsets {given_up:?} of an undamaged volume",
                    at(t)
                ));
            }
            Event::DeletedRead {
                incarnation,
                values,
            } => {
                if let Some(v) = values.first() {
                    self.violate(Invariant::ReadFromDeletedTopic, format!(
                        "incarnation {incarnation} was deleted, then a fetch at {} returned {v}",
                        at(t)
                    ));
                }
            }
            _ => {}
        }
    }
}

/// How many operations each invariant was checked against.
pub fn counts(events: &[(Duration, Event)], logs: &FinalLogs) -> BTreeMap<Invariant, usize> {
    use Invariant as I;
    let mut c: BTreeMap<Invariant, usize> = BTreeMap::new();
    for (_, e) in events {
        let keys: &[Invariant] = match e {
            Event::Produce {
                outcome: Outcome::Acked { .. },
                idempotent,
                ..
            } => {
                if *idempotent {
                    &[I::LostWrite, I::Duplicate]
                } else {
                    &[I::LostWrite, I::SplitBrain]
                }
            }
            Event::Poll { .. } => &[I::InconsistentOffsets, I::NonmonotonicPoll, I::PollSkip],
            Event::Committed { .. } => &[I::CommittedOffsetRegression],
            Event::GroupOnVolume { .. } => &[I::CommitNotDurable],
            Event::Assigned { .. } => &[I::GroupExclusivity],
            Event::Holds { partitions, .. } if !partitions.is_empty() => &[I::ConsumerGroupOverlap],
            Event::HoldersOnVolume { .. } => &[I::HoldingNotDurable],
            Event::ChurnRead { .. } => &[I::RecreatedTopicNotEmpty],
            Event::DeletedRead { .. } => &[I::ReadFromDeletedTopic],
            Event::Metadata { .. } => &[I::EpochRegression],
            Event::Deleted { .. } => &[I::DeletionLeftover, I::DeletedPartitionRecreated],
            Event::Admin {
                answer: Some(_), ..
            } => &[I::CreateFailed],
            Event::TrimProduced { .. } => &[I::TrimmedWriteLost],
            Event::ProducerId { .. } => &[I::ProducerIdReused],
            Event::Trimmed { .. } | Event::TrimStart { .. } => &[I::DeleteRecordsUndone],
            Event::TrimFinal { .. } => &[I::PollSkip, I::Liveness],
            Event::CompactProduced { .. } => &[I::CompactedWriteLost],
            Event::CompactTxnProduced { .. } => &[I::CompactedWriteLost, I::AbortedRead],
            Event::CompactRead { .. } => &[I::CompactedWriteLost, I::AbortedRead],
            Event::CompactFinal { .. } => &[I::CompactionUnfinished, I::Liveness],
            Event::TxnPoll { .. } => &[I::AbortedRead, I::UncommittedRead],
            Event::TxnWrite { joined: false, .. } => &[I::UnjoinedWrite],
            Event::TxnWrite {
                outcome: Outcome::Acked { .. },
                ..
            } => &[I::LostCommit],
            Event::TxnBumpFenced { own: true, .. } | Event::TxnInit { from: Some(_), .. } => {
                &[I::SpuriousFence]
            }
            Event::TxnEnd { commit: true, .. } => &[I::TornTransaction, I::FencedWrite],
            Event::TxnEnd { .. } => &[I::TornTransaction],
            Event::TxnFinal { .. } => &[I::AbortedRead, I::Liveness],
            Event::TxnOffsetsFinal { .. } => &[I::AbortedOffsets],
            Event::TxnRogueOffsets { .. } | Event::TxnRogueFinal { .. } => &[I::UnjoinedWrite],
            Event::AclProbe { allowed: true, .. } => &[I::AclRegression],
            Event::LoginProbe { accepted: true, .. } => &[I::CredentialRegression],
            Event::SecurityMarker { acked: true, .. } => &[I::SecurityChangeLost],
            Event::AclsApplied { .. } => &[I::AclUnapplied],
            Event::Reassign {
                outcome: crate::movers::AdminOutcome::Acked,
                ..
            } => &[I::ReassignmentLost],
            Event::ReassignFinal { found: Some(_) } => &[I::ReassignmentUnhonoured],
            Event::QuotaChange {
                outcome: crate::movers::AdminOutcome::Acked,
                ..
            } => &[I::QuotaChangeLost],
            Event::QuotaWindow { .. } | Event::QuotaProduced { .. } => &[I::QuotaExceeded],
            Event::NewTopicWritable { .. } => &[I::NewTopicUnwritable],
            Event::Truncated { .. } => &[I::NothingGivenUp],
            Event::FinalRequests { .. } => &[I::RequestUnanswered, I::Liveness],
            _ => &[],
        };
        for k in keys {
            *c.entry(*k).or_default() += 1;
        }
    }
    *c.entry(I::Liveness).or_default() += logs.len();
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

    /// A commit of `offset` to group `g` partition 0, answered at `ms`.
    fn commit(ms: u64, offset: i64, acked: bool) -> (Duration, Event) {
        (
            Duration::from_millis(ms),
            Event::Commit {
                group: "g".into(),
                partition: 0,
                offset,
                acked,
            },
        )
    }

    fn event(e: Event) -> (Duration, Event) {
        (Duration::from_secs(1), e)
    }

    /// A consumer-protocol member holding `partitions` from `at` to `until`
    /// seconds.
    fn holds(at: u64, member: &str, partitions: &[i32], until: u64) -> (Duration, Event) {
        (
            Duration::from_secs(at),
            Event::Holds {
                member: member.into(),
                partitions: partitions.to_vec(),
                until: Duration::from_secs(until),
            },
        )
    }

    #[test]
    fn a_partition_moves_once_its_holder_let_go_or_lapsed() {
        let l = logs(&[(0, &[(0, "a", 1), (1, "b", 1), (2, "c", 1)])]);
        let released = vec![
            holds(1, "m1", &[0, 1], 11),
            holds(2, "m1", &[0], 11),
            holds(3, "m2", &[1], 13),
        ];
        assert_eq!(check(&released, &l), Vec::<String>::new());
        let lapsed = vec![holds(1, "m1", &[0, 1], 11), holds(12, "m2", &[0, 1], 22)];
        assert_eq!(check(&lapsed, &l), Vec::<String>::new());
        // m1's lease renewed with the same partitions: still held.
        let renewed = vec![
            holds(1, "m1", &[0], 11),
            holds(10, "m1", &[0], 20),
            holds(12, "m2", &[0], 22),
        ];
        assert_eq!(names(&check(&renewed, &l)), ["consumer-group-overlap"]);
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
    fn an_offset_fetch_is_judged_against_the_commits_acknowledged_before_it_was_sent() {
        let base = [(0, "a", 1), (1, "b", 1), (2, "c", 1)];
        let clean_log = logs(&[(0, &base)]);
        let fetched = |sent: u64, answered: u64, offset: i64| {
            (
                Duration::from_millis(answered),
                Event::Committed {
                    group: "g".into(),
                    partition: 0,
                    offset,
                    sent: Duration::from_millis(sent),
                },
            )
        };
        // Sent before the commit of 9 was acknowledged: 5 is a legal answer
        // (the coordinator may have read before the commit).
        let slow = vec![
            commit(1_000, 5, true),
            commit(2_000, 9, true),
            fetched(1_500, 3_000, 5),
        ];
        assert!(check(&slow, &clean_log).is_empty());
        // Sent after it: 5 went back.
        let stale = vec![
            commit(1_000, 5, true),
            commit(2_000, 9, true),
            fetched(2_500, 3_000, 5),
        ];
        let found = check(&stale, &clean_log);
        assert_eq!(
            names(&found),
            vec!["committed-offset-regression"],
            "{found:?}"
        );
    }

    #[test]
    fn a_group_file_is_judged_against_commits_acknowledged_before_it_was_read() {
        let clean_log = logs(&[(0, &[(0, "a", 1)])]);
        let on_volume = |sent: u64, offset: i64| {
            (
                Duration::from_millis(sent + 10),
                Event::GroupOnVolume {
                    group: "g".into(),
                    sent: Duration::from_millis(sent),
                    offsets: vec![(0, offset)],
                    file_epoch: (offset >= 0).then_some(1),
                    newest_epoch: 1,
                },
            )
        };
        // Read before the commit of 9 was acknowledged: 5 may be all there was.
        let early = vec![
            commit(1_000, 5, true),
            on_volume(1_500, 5),
            commit(2_000, 9, true),
        ];
        assert!(check(&early, &clean_log).is_empty());
        // A commit in doubt may land after a newer one and stay.
        let late = vec![
            commit(1_000, 4, false),
            commit(2_000, 9, true),
            on_volume(2_500, 4),
        ];
        assert!(check(&late, &clean_log).is_empty());
        // Read after it: the file lost the commit, or never had it.
        for offset in [5, -1] {
            let lost = vec![
                commit(1_000, 5, true),
                commit(2_000, 9, true),
                on_volume(2_500, offset),
            ];
            let found = check(&lost, &clean_log);
            assert_eq!(names(&found), vec!["commit-not-durable"], "{found:?}");
        }
    }

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
                        sent: Duration::from_secs(1),
                    }),
                ],
                clean_log.clone(),
            ),
            (
                "commit-not-durable",
                vec![
                    event(Event::Commit {
                        group: "g".into(),
                        partition: 0,
                        offset: 5,
                        acked: true,
                    }),
                    event(Event::GroupOnVolume {
                        group: "g".into(),
                        sent: Duration::from_secs(1),
                        offsets: vec![(0, 3), (1, -1)],
                        file_epoch: Some(1),
                        newest_epoch: 2,
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
                    in_doubt: vec!["churn-1-1".into()],
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
                "consumer-group-overlap",
                vec![
                    holds(1, "m1", &[0, 1], 11),
                    holds(2, "m2", &[2], 12),
                    holds(3, "m2", &[1, 2], 13),
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
            (
                "new-topic-unwritable",
                vec![event(Event::NewTopicWritable {
                    topic: "t".into(),
                    answered: Duration::from_secs(10),
                    writable: Duration::from_secs(27),
                    settle: Duration::from_secs(1),
                })],
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
            event(Event::NewTopicWritable {
                topic: "t".into(),
                answered: Duration::from_secs(10),
                writable: Duration::from_secs(25),
                settle: Duration::from_secs(1),
            }),
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
                sent: Duration::from_secs(1),
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
                sent: Duration::from_secs(1),
            }),
            event(Event::ChurnRead {
                incarnation: 3,
                values: vec!["churn-3-0".into(), "churn-2-1".into()],
                // A write of incarnation 2 that got no answer: a broker may
                // take it late, into whichever topic has the name by then.
                in_doubt: vec!["churn-2-1".into()],
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
