//! Acknowledged writes against the final log (lost-write, split-brain).

use std::time::Duration;

use super::{Invariant, Judge, at};

impl<'a> Judge<'a> {
    /// An acknowledged write is in the final log where its answer said.
    pub(super) fn acked(
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
            Some((v, _)) => self.violate(Invariant::LostWrite, format!(
                "{client} at {} had {value} acknowledged at {partition}/{offset} by broker-{broker}, the log has {v} there",
                at(t)
            )),
            None => self.violate(Invariant::LostWrite, format!(
                "{client} at {} had {value} acknowledged at {partition}/{offset} by broker-{broker}, the log ends before it",
                at(t)
            )),
        }
    }

    /// Two brokers never acknowledge plain writes in one leader epoch.
    pub(super) fn split_brain(mut self) -> Vec<String> {
        for ((p, epoch), brokers) in std::mem::take(&mut self.ackers) {
            if brokers.len() > 1 {
                self.violate(Invariant::SplitBrain, format!(
                    "partition {p} leader epoch {epoch}: writes acknowledged by brokers {brokers:?}"
                ));
            }
        }
        self.out
    }
}
