//! What fetches returned (nonmonotonic-poll, poll-skip, inconsistent-offsets).

use std::time::Duration;

use super::{Invariant, Judge, at};

impl<'a> Judge<'a> {
    /// A fetch starts where it asked, has no gaps, and agrees with every
    /// other read and with the final log.
    pub(super) fn poll(
        &mut self,
        t: &Duration,
        client: &'a str,
        partition: i32,
        from: i64,
        got: &'a [(i64, String)],
    ) {
        if let Some((first, _)) = got.first() {
            if *first < from {
                self.violate(
                    Invariant::NonmonotonicPoll,
                    format!(
                        "{client} at {} asked {partition}/{from} and got offset {first}",
                        at(t)
                    ),
                );
            } else if *first > from {
                self.violate(
                    Invariant::PollSkip,
                    format!(
                        "{client} at {} asked {partition}/{from} and got offset {first} first",
                        at(t)
                    ),
                );
            }
        }
        for pair in got.windows(2) {
            if pair[1].0 != pair[0].0 + 1 {
                self.violate(
                    Invariant::PollSkip,
                    format!(
                        "{client} at {} read {partition}/{} then {partition}/{}",
                        at(t),
                        pair[0].0,
                        pair[1].0
                    ),
                );
            }
        }
        for (offset, value) in got {
            if let Some((prev, who)) = self.seen_at.get(&(partition, *offset)) {
                if *prev != value.as_str() {
                    self.violate(Invariant::InconsistentOffsets, format!(
                        "{partition}/{offset} read as {prev} by {who} and as {value} by {client} at {}",
                        at(t)
                    ));
                }
            } else {
                self.seen_at.insert((partition, *offset), (value, client));
            }
            if let Some((v, _)) = self.index.by_offset.get(&(partition, *offset)) {
                if *v != value.as_str() {
                    self.violate(Invariant::InconsistentOffsets, format!(
                        "{partition}/{offset} read as {value} by {client} at {}, the final log has {v}",
                        at(t)
                    ));
                }
            }
        }
    }
}
