//! The security documents' rules. security-change-lost: every marker an
//! admin (`markers`) had acknowledged is in the newest complete version of
//! its document after the run (markers are only added, so whatever came
//! after cannot have removed one). acl-unapplied: once the faults healed,
//! every broker applies them all within a bound.
//!
//! The no-going-back rules, one per document:
//! acl-regression (the guarded topic, `guard`) and credential-regression
//! (the probed login, `logins`). A broker that refused the probe under
//! version `v` may accept it later only under a newer version that
//! accepts it, so such a version must have existed (been begun) before the
//! acceptance was answered.
//!
//! Whether a version accepts comes from its content, read off the volume
//! after the run (the admin's requests can outlive their answers, so a
//! version's content cannot be told from which request was pending). When
//! it was begun is bounded from below by the admin's reads of the newest
//! version after each change: a version above the newest one read at time
//! `t` did not exist at `t`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::history::Event;

use super::{Invariant, at};

/// What a rule needs of the history, whichever document it is about.
#[derive(Default)]
struct Record {
    /// Per version: whether it refuses the probe (`None`: no complete
    /// claim; `Some(None)`: unreadable).
    contents: Vec<(u64, Option<Option<bool>>)>,
    /// The admin's reads of the newest version: (when, version).
    reads: Vec<(Duration, u64)>,
    /// The probe's answers: (answered, broker, sent, accepted, version).
    probes: Vec<(Duration, u32, Duration, bool, Option<u64>)>,
}

/// Per version: the earliest time it can have existed, and whether it may
/// accept the probe.
fn versions(r: &Record) -> BTreeMap<u64, (Duration, bool)> {
    r.contents
        .iter()
        .map(|(n, seen)| {
            // Incomplete: never applied by anyone. Unreadable: taken as
            // accepting (it can only excuse).
            let may_accept = match seen {
                None => false,
                Some(None) => true,
                Some(Some(refuses)) => !refuses,
            };
            let not_before = r
                .reads
                .iter()
                .filter(|(_, top)| *top < *n)
                .map(|(t, _)| *t)
                .max()
                .unwrap_or_default();
            (*n, (not_before, may_accept))
        })
        .collect()
}

fn judge(r: &Record, invariant: Invariant, what: &str, out: &mut Vec<String>) {
    let versions = versions(r);
    if versions.is_empty() {
        return;
    }
    // Per broker: the newest version it refused under, and when that
    // answer came.
    let mut refused: BTreeMap<u32, (u64, Duration)> = BTreeMap::new();
    for &(answered, broker, sent, accepted, version) in &r.probes {
        if !accepted {
            if let Some(v) = version {
                let e = refused.entry(broker).or_insert((v, answered));
                if v >= e.0 {
                    *e = (v, answered);
                }
            }
            continue;
        }
        // Only an acceptance decided after the refusal was answered.
        let Some(&(v, refused_at)) = refused.get(&broker) else {
            continue;
        };
        if sent < refused_at {
            continue;
        }
        let excused = versions
            .range(v + 1..)
            .any(|(_, (not_before, may_accept))| *may_accept && *not_before < answered);
        if !excused {
            out.push(invariant.says(format!(
                "broker {broker} refused the probe's {what} under version {v} (answered {}), \
                 then accepted one sent {} with no accepting version after {v} begun by {}",
                at(&refused_at),
                at(&sent),
                at(&answered)
            )));
        }
    }
}

fn check_markers(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let mut finals: BTreeMap<&str, Option<(u64, BTreeSet<u64>)>> = BTreeMap::new();
    for (_, e) in events {
        if let Event::SecurityMarkersFinal { doc, found } = e {
            let found = found
                .as_ref()
                .map(|(v, m)| (*v, m.iter().copied().collect()));
            finals.insert(doc, found);
        }
    }
    for (t, e) in events {
        let Event::SecurityMarker {
            doc,
            marker,
            start,
            acked: true,
        } = e
        else {
            continue;
        };
        // No final read (the run ended early) or an unreadable one: no
        // verdict.
        let Some(Some((version, markers))) = finals.get(doc) else {
            continue;
        };
        if !markers.contains(marker) {
            out.push(Invariant::SecurityChangeLost.says(format!(
                "{doc}: the change adding marker {marker} (sent {}, acknowledged {}) is not in \
                 version {version}, the newest complete one",
                at(start),
                at(t)
            )));
        }
    }
}

/// How long after the faults healed a broker may take to apply the
/// acknowledged ACL changes: a broker restarted at the very end starts,
/// then reads the ACLs within its refresh (1 s).
const APPLY_BOUND: Duration = Duration::from_secs(15);

fn check_applied(events: &[(Duration, Event)], out: &mut Vec<String>) {
    for (_, e) in events {
        let Event::AclsApplied {
            broker,
            after_heal,
            missing,
        } = e
        else {
            continue;
        };
        match missing {
            Some(m) if m.is_empty() && *after_heal <= APPLY_BOUND => {}
            Some(m) if m.is_empty() => out.push(Invariant::AclUnapplied.says(format!(
                "broker {broker} applied every acknowledged ACL change only {} after the \
                 faults healed",
                at(after_heal)
            ))),
            Some(m) => out.push(Invariant::AclUnapplied.says(format!(
                "broker {broker} still lacks acknowledged marker ACLs {m:?} {} after the \
                 faults healed",
                at(after_heal)
            ))),
            None => out.push(Invariant::AclUnapplied.says(format!(
                "broker {broker} never answered DescribeAcls in the {} after the faults healed",
                at(after_heal)
            ))),
        }
    }
}

pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    check_markers(events, out);
    check_applied(events, out);
    let (mut acls, mut logins) = (Record::default(), Record::default());
    for (t, e) in events {
        match e {
            Event::AclVersions { versions } => acls.contents.clone_from(versions),
            Event::AclChange {
                top: Some(top),
                read_at,
                ..
            } => acls.reads.push((*read_at, *top)),
            Event::AclProbe {
                broker,
                sent,
                allowed,
                version,
            } => acls.probes.push((*t, *broker, *sent, *allowed, *version)),
            Event::CredentialVersions { versions } => logins.contents.clone_from(versions),
            Event::CredentialChange {
                top: Some(top),
                read_at,
                ..
            } => logins.reads.push((*read_at, *top)),
            Event::LoginProbe {
                broker,
                sent,
                accepted,
                version,
            } => logins
                .probes
                .push((*t, *broker, *sent, *accepted, *version)),
            _ => {}
        }
    }
    judge(&acls, Invariant::AclRegression, "write (ACL)", out);
    judge(
        &logins,
        Invariant::CredentialRegression,
        "login (credentials)",
        out,
    );
}
