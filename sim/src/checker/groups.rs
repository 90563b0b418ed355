//! Consumer groups (committed-offset-regression).

use std::time::Duration;

use super::{Invariant, Judge, at};

impl<'a> Judge<'a> {
    /// OffsetFetch never returns less than an acknowledged commit, unless
    /// that smaller offset was itself a commit in doubt.
    pub(super) fn committed_offset(
        &mut self,
        t: &Duration,
        group: &str,
        partition: i32,
        offset: i64,
    ) {
        let key = (group, partition);
        let doubtful = self.in_doubt.get(&key).is_some_and(|s| s.contains(&offset));
        if let Some((acked, when)) = self.committed.get(&key) {
            if offset < *acked && !doubtful {
                self.violate(Invariant::CommittedOffsetRegression, format!(
                    "group {group} partition {partition}: offset {acked} was committed at {when}, OffsetFetch at {} returned {offset}",
                    at(t)
                ));
            }
        }
    }
}
