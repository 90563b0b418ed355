//! The preferred leaders' rules (`movers`).
//!
//! reassignment-lost: per partition, the last acknowledged request (by
//! its answer) set the preferred broker; the one on the volume after the
//! run must be that one, or one a later or concurrent request named (sent
//! before that answer came, or after it), or one an unanswered request
//! named (it may land at any time). An acknowledged request that a
//! stale edit wrote over leaves a value none of these named.
//!
//! reassignment-unhonoured: once the faults healed, the controller moves
//! every partition to its live preferred broker; the harness polls the
//! assignment until the liveness deadline and reports what was left.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::history::Event;

use super::last_acked::{Request, allowed};
use super::{Invariant, at};

pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let mut requests: BTreeMap<i32, Vec<Request<u32>>> = BTreeMap::new();
    let mut found = None;
    for (t, e) in events {
        match e {
            Event::Reassign {
                partition,
                broker,
                sent,
                outcome,
            } => requests
                .entry(*partition)
                .or_default()
                .push((*t, *sent, *broker, *outcome)),
            Event::ReassignFinal { found: f } => found = Some(f.clone()),
            _ => {}
        }
    }
    // No final read (the run ended early) or an unreadable volume: no
    // verdict.
    let Some(Some((pins, unhonoured))) = found else {
        return;
    };
    for (partition, reqs) in &requests {
        let Some((&(answered, sent, broker, _), allowed)) = allowed(reqs) else {
            continue;
        };
        let now = pins.get(partition).copied();
        if !allowed.contains(&now) {
            out.push(Invariant::ReassignmentLost.says(format!(
                "partition {partition}: the volume's preferred broker is {now:?}, but the last \
                 acknowledged reassignment (sent {}, answered {}) named {broker:?} and no later, \
                 concurrent or unanswered one named {now:?}",
                at(&sent),
                at(&answered)
            )));
        }
    }
    for (partition, want, leader) in unhonoured {
        out.push(Invariant::ReassignmentUnhonoured.says(format!(
            "partition {partition}: its preferred broker {want} is live, but broker {leader:?} \
             still leads it at the liveness deadline"
        )));
    }
}
