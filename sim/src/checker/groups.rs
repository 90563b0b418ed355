//! Consumer groups (committed-offset-regression).

use std::time::Duration;

use super::{Invariant, Judge, at};

impl<'a> Judge<'a> {
    /// OffsetFetch never returns less than the last commit acknowledged
    /// before it was sent, unless that smaller offset was itself a commit
    /// in doubt. (A commit acknowledged while the fetch was on its way may
    /// or may not be in its answer.)
    pub(super) fn committed_offset(
        &mut self,
        t: &Duration,
        sent: &Duration,
        group: &str,
        partition: i32,
        offset: i64,
    ) {
        let key = (group, partition);
        let doubtful = self.in_doubt.get(&key).is_some_and(|s| s.contains(&offset));
        let before = self
            .committed
            .get(&key)
            .and_then(|acks| acks.iter().rev().find(|(when, _)| when <= sent))
            .copied();
        if let Some((when, acked)) = before {
            if offset < acked && !doubtful {
                self.violate(Invariant::CommittedOffsetRegression, format!(
                    "group {group} partition {partition}: offset {acked} was committed at {}, OffsetFetch sent at {} returned {offset} at {}",
                    at(&when),
                    at(sent),
                    at(t)
                ));
            }
        }
    }
}
