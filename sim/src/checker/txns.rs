//! The transactions' topic (`transactor`): Jepsen's transactional
//! anomalies. aborted-read (a record of a transaction that did not commit
//! read under read_committed), uncommitted-read (read before its commit
//! was asked for), torn-transaction (read in part, or a record twice),
//! lost-commit, aborted-offsets (offsets of a transaction that did not
//! commit in effect, or those of an acknowledged commit lost),
//! unjoined-write and fenced-write.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::actors::transactor::{SENTINEL, TXN_PARTITIONS};
use crate::history::{Event, Outcome};

use super::{Invariant, at};

/// What the history says of one transaction.
#[derive(Default)]
struct Txn<'a> {
    /// Its writes: value, whether acknowledged.
    writes: Vec<(&'a str, bool)>,
    end: Option<End<'a>>,
}

/// A transaction's EndTxn: commit or abort, sent when, outcome, offsets.
type End<'a> = (bool, Duration, &'a Outcome, &'a [(i32, i64)]);

impl Txn<'_> {
    /// Only an EndTxn(commit) commits; one refused at its first attempt
    /// (`Outcome::Refused`) did not.
    fn may_have_committed(&self) -> bool {
        matches!(self.end, Some((true, _, o, _)) if !matches!(o, Outcome::Refused(_)))
    }

    fn committed(&self) -> bool {
        matches!(self.end, Some((true, _, Outcome::Acked { .. }, _)))
    }
}

/// The transaction a value belongs to: values are
/// `tx:<label>:<partition>.<k>`.
fn label_of(value: &str) -> Option<&str> {
    value.strip_prefix("tx:")?.rsplit_once(':').map(|(l, _)| l)
}

pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let mut txns: BTreeMap<&str, Txn> = BTreeMap::new();
    // Transactional id -> (answered at, producer) of every InitProducerId.
    let mut inits: Vec<(Duration, (i64, i16))> = Vec::new();
    let mut finals: BTreeMap<i32, &[(i64, String)]> = BTreeMap::new();
    let mut final_offsets = None;
    let mut any = false;
    for (t, e) in events {
        match e {
            Event::TxnInit { producer, .. } => inits.push((*t, *producer)),
            Event::TxnBumpFenced {
                client,
                transactional_id,
                producer,
                own: true,
            } => out.push(Invariant::SpuriousFence.says(format!(
                "{client}, the only producer of {transactional_id}, was fenced at {} bumping its own epoch as {producer:?}",
                at(t)
            ))),
            Event::TxnWrite {
                label,
                value,
                outcome,
                joined: false,
                ..
            } => {
                if matches!(outcome, Outcome::Acked { .. }) {
                    out.push(Invariant::UnjoinedWrite.says(format!(
                        "{value} of transaction {label}, to a partition not added to it, was acknowledged ({outcome:?})"
                    )));
                }
            }
            Event::TxnWrite {
                label,
                value,
                outcome,
                ..
            } => {
                any = true;
                let acked = matches!(outcome, Outcome::Acked { .. });
                txns.entry(label).or_default().writes.push((value, acked));
            }
            Event::TxnEnd {
                label,
                commit,
                sent,
                outcome,
                offsets,
                ..
            } => {
                txns.entry(label).or_default().end = Some((*commit, *sent, outcome, offsets));
            }
            Event::TxnFinal { partition, records } => {
                finals.insert(*partition, records);
            }
            Event::TxnOffsetsFinal { offsets } => final_offsets = Some(offsets),
            Event::TxnRogueOffsets {
                label,
                code: Some(0),
                ..
            } => out.push(Invariant::UnjoinedWrite.says(format!(
                "transaction {label}'s offsets for a group it never added were acknowledged"
            ))),
            Event::TxnRogueFinal { offsets } => {
                for (partition, offset) in offsets.iter().filter(|(_, o)| *o >= 0) {
                    out.push(Invariant::UnjoinedWrite.says(format!(
                        "a group no transaction added has offset {offset} for partition {partition}"
                    )));
                }
            }
            _ => {}
        }
    }
    if !any {
        return;
    }
    fenced_writes(events, &inits, out);
    // Reads along the way.
    for (t, e) in events {
        let Event::TxnPoll { partition, got, .. } = e else {
            continue;
        };
        for (offset, value) in got.iter().filter(|(_, v)| !v.starts_with(SENTINEL)) {
            judge_read(
                &txns,
                value,
                &format!("{partition}/{offset}"),
                Some(*t),
                out,
            );
        }
    }
    if (0..TXN_PARTITIONS).any(|p| !finals.contains_key(&p)) {
        out.push(Invariant::Liveness.says(format!(
            "the transactions' topic was not read to its end, every transaction ended, before the deadline (read: {:?})",
            finals.keys().collect::<Vec<_>>()
        )));
        return;
    }
    judge_final(&txns, &finals, out);
    if let Some(offsets) = final_offsets {
        judge_offsets(&txns, offsets, out);
    }
}

/// The final read: every record once, and every transaction all or
/// nothing (a committed one whole).
fn judge_final(
    txns: &BTreeMap<&str, Txn>,
    finals: &BTreeMap<i32, &[(i64, String)]>,
    out: &mut Vec<String>,
) {
    let mut read: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for (p, records) in finals {
        for (offset, value) in records.iter() {
            judge_read(txns, value, &format!("{p}/{offset}"), None, out);
            read.entry(value).or_default().push((*p, *offset));
        }
    }
    for (value, places) in &read {
        if places.len() > 1 {
            out.push(Invariant::TornTransaction.says(format!(
                "{value} is in the final read more than once: {places:?}"
            )));
        }
    }
    for (label, txn) in txns {
        let acked: Vec<&str> = txn.writes.iter().filter(|w| w.1).map(|w| w.0).collect();
        let seen: Vec<&str> = acked
            .iter()
            .copied()
            .filter(|v| read.contains_key(v))
            .collect();
        if txn.committed() && seen.len() < acked.len() {
            out.push(Invariant::LostCommit.says(format!(
                "transaction {label} was committed (acknowledged) and the final read lacks {:?} of its acknowledged writes {acked:?}",
                acked.iter().filter(|v| !seen.contains(v)).collect::<Vec<_>>()
            )));
        } else if !seen.is_empty() && seen.len() < acked.len() {
            out.push(Invariant::TornTransaction.says(format!(
                "the final read has {seen:?} of transaction {label} but not the rest of its acknowledged writes {acked:?}"
            )));
        }
    }
}

/// A record read under read_committed: its transaction may have committed,
/// and (for a read along the way at `when`) its commit was asked for
/// before.
fn judge_read(
    txns: &BTreeMap<&str, Txn>,
    value: &str,
    place: &str,
    when: Option<Duration>,
    out: &mut Vec<String>,
) {
    let Some(label) = label_of(value) else {
        out.push(Invariant::AbortedRead.says(format!(
            "{value} at {place} was never written by a transaction"
        )));
        return;
    };
    let txn = txns.get(label);
    if !txn.is_some_and(|t| t.may_have_committed()) {
        let how = match txn.and_then(|t| t.end) {
            None => "never ended (abandoned or given up)".to_owned(),
            Some((commit, _, outcome, _)) => format!(
                "ended by {} -> {outcome:?}",
                if commit { "a commit" } else { "an abort" }
            ),
        };
        out.push(Invariant::AbortedRead.says(format!(
            "{value} read at {place}{} under read_committed, and transaction {label} {how}",
            when.map_or(" in the final read".to_owned(), |t| format!(
                " at {}",
                at(&t)
            ))
        )));
        return;
    }
    if let (Some(t), Some((_, sent, _, _))) = (when, txn.and_then(|t| t.end)) {
        if t < sent {
            out.push(Invariant::UncommittedRead.says(format!(
                "{value} read at {place} at {} under read_committed, before transaction {label}'s commit was sent at {}",
                at(&t),
                at(&sent)
            )));
        }
    }
}

/// The group's final offsets: each one sent by a transaction that may
/// have committed, and none below an acknowledged commit's.
fn judge_offsets(txns: &BTreeMap<&str, Txn>, offsets: &[(i32, i64)], out: &mut Vec<String>) {
    for &(partition, offset) in offsets {
        let senders: Vec<(&str, &Txn)> = txns
            .iter()
            .filter(|(_, t)| t.end.is_some_and(|e| e.3.contains(&(partition, offset))))
            .map(|(l, t)| (*l, t))
            .collect();
        if offset >= 0 && !senders.iter().any(|(_, t)| t.may_have_committed()) {
            out.push(Invariant::AbortedOffsets.says(format!(
                "the transaction group's offset of partition {partition} is {offset}, and no transaction that may have committed sent it (sent by {:?})",
                senders.iter().map(|(l, _)| l).collect::<Vec<_>>()
            )));
        }
        let newest_committed = txns
            .iter()
            .filter(|(_, t)| t.committed())
            .flat_map(|(l, t)| {
                t.end
                    .map_or(&[][..], |e| e.3)
                    .iter()
                    .filter(|(p, _)| *p == partition)
                    .map(move |(_, o)| (*o, *l))
            })
            .max();
        if let Some((o, label)) = newest_committed {
            if offset < o {
                out.push(Invariant::AbortedOffsets.says(format!(
                    "the transaction group's offset of partition {partition} is {offset}, below {o} of transaction {label}, whose commit was acknowledged"
                )));
            }
        }
    }
}

/// No commit acknowledged for a producer epoch sent after a newer epoch of
/// the same producer id was handed out. (A fenced producer's write to a
/// partition its transaction already holds is accepted until the abort
/// marker arrives, as in Kafka; it is never read, which aborted-read
/// judges.)
fn fenced_writes(
    events: &[(Duration, Event)],
    inits: &[(Duration, (i64, i16))],
    out: &mut Vec<String>,
) {
    for (_, e) in events {
        let Event::TxnEnd {
            label,
            commit: true,
            producer,
            sent,
            outcome: Outcome::Acked { .. },
            ..
        } = e
        else {
            continue;
        };
        let newer = inits
            .iter()
            .find(|(answered, (p, ep))| *p == producer.0 && *ep > producer.1 && answered < sent);
        if let Some((answered, (_, epoch))) = newer {
            out.push(Invariant::FencedWrite.says(format!(
                "the commit of transaction {label} as {producer:?}, sent at {}, was acknowledged although epoch {epoch} was handed out at {}",
                at(sent),
                at(answered)
            )));
        }
    }
}
