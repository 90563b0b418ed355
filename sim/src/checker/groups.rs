//! Consumer groups (committed-offset-regression, commit-not-durable,
//! served-not-durable, consumer-group-overlap, holding-not-durable).

use std::collections::BTreeMap;
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
        group: &'a str,
        partition: i32,
        offset: i64,
    ) {
        if offset >= 0 {
            self.served.insert((group, partition), (*t, *sent, offset));
        }
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
        group: &'a str,
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
            self.served_on_volume(t, sent, group, (*partition, *offset), file_epoch);
        }
    }

    /// served-not-durable: the newest offset an OffsetFetch returned before
    /// the look began is in the file, or a commit of what the file has
    /// came after that OffsetFetch was sent (a lower commit is legal), or
    /// may still land (no answer). A coordinator that keeps a commit in
    /// memory after its write failed answers it until it dies, and its
    /// successor loads the older offset: the consumer goes back.
    fn served_on_volume(
        &mut self,
        t: &Duration,
        look: &Duration,
        group: &'a str,
        (partition, on_file): (i32, i64),
        file_epoch: Option<u32>,
    ) {
        let key = (group, partition);
        let Some(&(answered, sent, offset)) = self.served.get(&key) else {
            return;
        };
        if answered >= *look || offset <= on_file {
            return;
        }
        let excused = self
            .attempts
            .get(&key)
            .into_iter()
            .flatten()
            .any(|(at, o, acked)| *o == on_file && (!acked || *at >= sent));
        if !excused {
            self.violate(Invariant::ServedNotDurable, format!(
                "group {group} partition {partition}: OffsetFetch sent at {} returned {offset} at {}, and the file a new coordinator would load, read from {} to {}, has {on_file} (epoch {file_epoch:?}); no commit of {on_file} came after",
                at(&sent),
                at(&answered),
                at(look),
                at(t)
            ));
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
        let before: BTreeMap<i32, Duration> = self
            .holders
            .get(member)
            .filter(|(_, u)| u > t)
            .map(|(held, _)| held.clone())
            .unwrap_or_default();
        let mut mine = BTreeMap::new();
        for &p in partitions {
            if let Some(since) = before.get(&p) {
                mine.insert(p, *since);
                continue;
            }
            mine.insert(p, *t);
            let other = self
                .holders
                .iter()
                .find(|(m, (held, u))| **m != member && u > t && held.contains_key(&p))
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

    /// The file a new coordinator would load, read from `sent` to `t`, has
    /// every partition a member held all that time (its session lasting
    /// past `t`) as that member's. The coordinator answers only once the
    /// file says so, and only the member letting go or its session ending
    /// takes the partition from it.
    pub(super) fn holders_on_volume(
        &mut self,
        t: &Duration,
        sent: &Duration,
        on_volume: &[(String, Vec<i32>)],
    ) {
        let mut missing = Vec::new();
        for (member, (held, until)) in &self.holders {
            if until <= t {
                continue;
            }
            let file = on_volume
                .iter()
                .find(|(m, _)| m == member)
                .map(|(_, ps)| ps);
            for (p, since) in held {
                if since <= sent && !file.is_some_and(|ps| ps.contains(p)) {
                    missing.push(format!("member {member} has held partition {p} since {} (session to {}), the file gives it {file:?}", at(since), at(until)));
                }
            }
        }
        for m in missing {
            self.violate(
                Invariant::HoldingNotDurable,
                format!("in the file read from {} to {}: {m}", at(sent), at(t)),
            );
        }
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
