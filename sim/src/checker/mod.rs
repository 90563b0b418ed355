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

use crate::history::{Event, Outcome};
use crate::workload::PARTITIONS;

mod acls;
mod compaction;
mod epochs;
pub mod failover;
mod groups;
mod invariant;
mod last_acked;
pub mod publications;
mod quotas;
mod reads;
mod reassignments;
mod requests;
mod topics;
mod trim;
mod txn_files;
mod txns;
mod violations;
mod writes;

pub use violations::Violations;

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
    txn_files::check(events, &mut out);
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

/// A commit's answer (or giving up): when, offset, acknowledged.
type Attempt = (Duration, i64, bool);

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
    /// Every commit's answer (or giving up): when, offset, acknowledged.
    attempts: BTreeMap<(&'a str, i32), Vec<Attempt>>,
    /// The newest OffsetFetch answer: answered, sent, offset.
    served: BTreeMap<(&'a str, i32), (Duration, Duration, i64)>,
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
            attempts: BTreeMap::new(),
            served: BTreeMap::new(),
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
                acked,
            } => self.commit(t, group, *partition, *offset, *acked),
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
            } => self.assigned(member, *generation, partitions),
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
            } => self.churn_read(t, *incarnation, values, in_doubt),
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
            Event::ProducerId { client, broker, id } => self.producer_id(t, client, *broker, *id),
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

    fn commit(&mut self, t: &Duration, group: &'a str, partition: i32, offset: i64, acked: bool) {
        self.attempts
            .entry((group, partition))
            .or_default()
            .push((*t, offset, acked));
        if acked {
            self.committed
                .entry((group, partition))
                .or_default()
                .push((*t, offset));
        } else {
            // A commit without a positive answer may still take effect,
            // even later than newer ones (a request left on a connection
            // the client gave up on): its offset is a legal answer from now
            // on.
            self.in_doubt
                .entry((group, partition))
                .or_default()
                .insert(offset);
        }
    }

    fn assigned(&mut self, member: &'a str, generation: i32, partitions: &[i32]) {
        for p in partitions {
            match self.owners.insert((generation, *p), member) {
                Some(other) if other != member => self.violate(
                    Invariant::GroupExclusivity,
                    format!("generation {generation}: partition {p} owned by {other} and {member}"),
                ),
                _ => {}
            }
        }
    }

    fn churn_read(
        &mut self,
        t: &Duration,
        incarnation: u32,
        values: &[String],
        in_doubt: &[String],
    ) {
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

    fn producer_id(&mut self, t: &Duration, client: &'a str, broker: u32, id: i64) {
        if let Some((first, by, when)) = self.producer_ids.insert(id, (client, broker, *t)) {
            self.violate(Invariant::ProducerIdReused, format!(
                "producer id {id} went to {first} from broker-{by} at {} and to {client} from broker-{broker} at {}",
                at(&when),
                at(t)
            ));
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
            Event::GroupOnVolume { .. } => &[I::CommitNotDurable, I::ServedNotDurable],
            Event::TxnOnVolume { .. } => &[I::TxnStateNotDurable],
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
            Event::TxnBumpFenced { own: true, .. } => &[I::SpuriousFence],
            Event::TxnInit { from: Some(_), .. } => &[I::SpuriousFence, I::TxnStateNotDurable],
            Event::TxnInit { .. } => &[I::TxnStateNotDurable],
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
                outcome: crate::actors::movers::AdminOutcome::Acked,
                ..
            } => &[I::ReassignmentLost],
            Event::ReassignFinal { found: Some(_) } => &[I::ReassignmentUnhonoured],
            Event::QuotaChange {
                outcome: crate::actors::movers::AdminOutcome::Acked,
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
mod tests;
