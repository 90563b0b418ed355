//! txn-state-not-durable: each look of the observer at a transactional
//! id's file, as a new coordinator would load it, against the
//! InitProducerId answers that came before the look began. A coordinator
//! that answers before its file is written, keeps a bump in memory after
//! the write failed, or forgets the id (a file removed, a takeover that
//! did not load it) hands its successor an older producer, or none: the
//! successor then gives a fenced zombie its epoch back, or a new producer
//! id to the live one. A client sees that only if a coordinator dies in
//! the window; the look sees it at once.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::history::Event;

use super::{Invariant, at};

/// When an InitProducerId was answered, and the producer it handed out.
type Answer = (Duration, (i64, i16));

pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    // Per transactional id: every answered InitProducerId, in answer order.
    let mut inits: BTreeMap<&str, Vec<Answer>> = BTreeMap::new();
    for (t, e) in events {
        match e {
            Event::TxnInit {
                transactional_id,
                producer,
                ..
            } => {
                let answered = inits.entry(transactional_id).or_default();
                // One producer id per transactional id for a whole run:
                // a new one only once its epochs are spent (32,766 bumps).
                if let Some((when, first)) = answered.iter().find(|(_, p)| p.0 != producer.0) {
                    out.push(Invariant::TxnStateNotDurable.says(format!(
                        "{transactional_id} was handed a new producer {producer:?} at {} although producer {first:?} was handed at {} and its epochs are far from spent: a coordinator forgot the id",
                        at(t),
                        at(when)
                    )));
                }
                answered.push((*t, *producer));
            }
            Event::TxnOnVolume {
                transactional_id,
                sent,
                producer,
                file_epoch,
                newest_epoch,
            } => {
                // The highest epoch answered before the look began (two
                // clients' answers may arrive out of order).
                let before = inits
                    .get(transactional_id.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|(t, _)| t < sent);
                let Some(&(when, handed)) = before.max_by_key(|(_, p)| *p) else {
                    continue;
                };
                let kept =
                    producer.is_some_and(|(pid, epoch)| pid == handed.0 && epoch >= handed.1);
                if !kept {
                    out.push(Invariant::TxnStateNotDurable.says(format!(
                        "{transactional_id} was handed producer {handed:?} at {}; a new coordinator reading from {} would load {} (newest claim {newest_epoch})",
                        at(&when),
                        at(sent),
                        match (producer, file_epoch) {
                            (Some(p), Some(e)) => format!("producer {p:?} from the file of epoch {e}"),
                            _ => "no file".to_owned(),
                        }
                    )));
                }
            }
            _ => {}
        }
    }
}
