//! Consumer groups (committed-offset-regression, commit-not-durable,
//! consumer-group-overlap).

use std::collections::BTreeSet;
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
        if let Some((when, acked)) = self.regressed(group, partition, sent, offset) {
            self.violate(Invariant::CommittedOffsetRegression, format!(
                "group {group} partition {partition}: offset {acked} was committed at {}, OffsetFetch sent at {} returned {offset} at {}",
                at(&when),
                at(sent),
                at(t)
            ));
        }
    }

    /// The file a new coordinator would load holds, for each partition, at
    /// least the last commit acknowledged before the observer began to
    /// read it (or a smaller commit in doubt, which may have landed late).
    /// A coordinator acknowledges only once its epoch's file has the
    /// commit and its epoch is confirmed, so no crash, freeze or takeover
    /// after that may take the commit off the volume.
    pub(super) fn group_on_volume(
        &mut self,
        t: &Duration,
        sent: &Duration,
        group: &str,
        offsets: &[(i32, i64)],
        (file_epoch, newest_epoch): (Option<u32>, u32),
    ) {
        for (partition, offset) in offsets {
            if let Some((when, acked)) = self.regressed(group, *partition, sent, *offset) {
                self.violate(Invariant::CommitNotDurable, format!(
                    "group {group} partition {partition}: offset {acked} was committed at {}, and the file a new coordinator would load (newest claimed epoch {newest_epoch}), read from {} to {}, {}",
                    at(&when),
                    at(sent),
                    at(t),
                    match (file_epoch, offset) {
                        (None, _) => "does not exist".to_owned(),
                        (Some(e), -1) => format!("epoch {e}'s, has no offset"),
                        (Some(e), o) => format!("epoch {e}'s, has {o}"),
                    }
                ));
            }
        }
    }

    /// A consumer-protocol member takes `partitions` at `t` (holding them
    /// until `until`): none of those it did not hold already may still be
    /// held by another member whose session has not lapsed.
    pub(super) fn holds(
        &mut self,
        t: &Duration,
        member: &'a str,
        partitions: &[i32],
        until: Duration,
    ) {
        let mine: BTreeSet<i32> = partitions.iter().copied().collect();
        let before = self.holders.get(member).filter(|(_, u)| u > t);
        let new: Vec<i32> = mine
            .iter()
            .copied()
            .filter(|p| before.is_none_or(|(held, _)| !held.contains(p)))
            .collect();
        for p in new {
            let other = self
                .holders
                .iter()
                .find(|(m, (held, u))| **m != member && u > t && held.contains(&p))
                .map(|(m, (_, u))| (m.to_string(), *u));
            if let Some((other, u)) = other {
                self.violate(Invariant::ConsumerGroupOverlap, format!(
                    "partition {p} given to member {member} at {} while member {other} held it (its session lasting to {})",
                    at(t),
                    at(&u)
                ));
            }
        }
        self.holders.insert(member, (mine, until));
    }

    /// The last commit acknowledged by `sent` (when, offset), if `offset`
    /// is below it and is not itself a commit in doubt.
    fn regressed(
        &self,
        group: &str,
        partition: i32,
        sent: &Duration,
        offset: i64,
    ) -> Option<(Duration, i64)> {
        let key = (group, partition);
        let doubtful = self.in_doubt.get(&key).is_some_and(|s| s.contains(&offset));
        self.committed
            .get(&key)
            .and_then(|acks| acks.iter().rev().find(|(when, _)| when <= sent))
            .copied()
            .filter(|(_, acked)| offset < *acked && !doubtful)
    }
}
