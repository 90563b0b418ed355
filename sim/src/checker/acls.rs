//! The guarded topic (`guard`): acl-regression. A broker that refused the
//! probe under ACL version `v` may accept it later only under a newer
//! version that allows it, so such a version must have existed (been begun)
//! before the acceptance was answered.
//!
//! Whether a version allows comes from its content, read off the volume
//! after the run (the admin's requests can outlive their answers, so a
//! version's content cannot be told from which request was pending). When
//! it was begun is bounded from below by the admin's reads of the newest
//! version after each change: a version above the newest one read at time
//! `t` did not exist at `t`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::workload::Event;

use super::{Invariant, at};

/// Per version: the earliest time it can have existed, and whether it may
/// allow the probe.
fn versions(events: &[(Duration, Event)]) -> BTreeMap<u64, (Duration, bool)> {
    let mut allows: BTreeMap<u64, bool> = BTreeMap::new();
    let mut reads: Vec<(Duration, u64)> = Vec::new();
    for (_, e) in events {
        match e {
            Event::AclVersions { versions } => {
                for (n, seen) in versions {
                    // Incomplete: never applied by anyone. Unreadable:
                    // taken as allowing (it can only excuse).
                    let may_allow = match seen {
                        None => false,
                        Some(None) => true,
                        Some(Some(denies)) => !denies,
                    };
                    allows.insert(*n, may_allow);
                }
            }
            Event::AclChange {
                top: Some(top),
                read_at,
                ..
            } => reads.push((*read_at, *top)),
            _ => {}
        }
    }
    allows
        .into_iter()
        .map(|(n, may_allow)| {
            let not_before = reads
                .iter()
                .filter(|(_, top)| *top < n)
                .map(|(t, _)| *t)
                .max()
                .unwrap_or_default();
            (n, (not_before, may_allow))
        })
        .collect()
}

pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let versions = versions(events);
    if versions.is_empty() {
        return;
    }
    // Per broker: the newest version it refused under, and when that
    // answer came.
    let mut refused: BTreeMap<u32, (u64, Duration)> = BTreeMap::new();
    for (answered, e) in events {
        let Event::AclProbe {
            broker,
            sent,
            allowed,
            version,
        } = e
        else {
            continue;
        };
        if !allowed {
            if let Some(v) = version {
                let r = refused.entry(*broker).or_insert((*v, *answered));
                if *v >= r.0 {
                    *r = (*v, *answered);
                }
            }
            continue;
        }
        // Only an acceptance decided after the refusal was answered.
        let Some(&(v, refused_at)) = refused.get(broker) else {
            continue;
        };
        if *sent < refused_at {
            continue;
        }
        let excused = versions
            .range(v + 1..)
            .any(|(_, (not_before, may_allow))| *may_allow && *not_before < *answered);
        if !excused {
            out.push(Invariant::AclRegression.says(format!(
                "broker {broker} refused the probe under ACL version {v} (answered {}), then \
                 accepted a write sent {} with no allowing version after {v} begun by {}",
                at(&refused_at),
                at(sent),
                at(answered)
            )));
        }
    }
}
