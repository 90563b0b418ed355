//! The observer's view of controller elections: who wrote each controller
//! epoch's assignment, against who won that epoch's claim.
//!
//! Clients cannot see this: a second controller of one epoch is hidden
//! behind the partition-level fencing as long as it places partitions the
//! same way. The volume shows it, so the observer reads it from there.

use std::collections::{BTreeMap, BTreeSet};

use broker::cluster::{assignment, election};
use vfs::Vfs;
use vfs::durable::ClaimToken;

use crate::checker::Invariant;
use crate::checker::Violations;

/// Epochs past the newest one seen that each look also opens: a claim may
/// be undecided for a while, and its successor written meanwhile.
const AHEAD: u32 = 3;

pub(crate) struct Controllers {
    token: ClaimToken,
    /// Per controller epoch: the brokers its assignment named so far.
    writers: BTreeMap<u32, BTreeSet<u32>>,
    /// Per controller epoch: the broker its claim names, once readable.
    winners: BTreeMap<u32, u32>,
    /// Violations already reported, by epoch (one each is enough).
    reported: BTreeSet<u32>,
}

impl Controllers {
    pub(crate) fn new() -> Self {
        Self {
            token: ClaimToken::fresh("observer"),
            writers: BTreeMap::new(),
            winners: BTreeMap::new(),
            reported: BTreeSet::new(),
        }
    }

    /// Reads the assignments of the newest epochs (fresh opens) and checks
    /// each against its epoch's claim.
    pub(crate) async fn look(&mut self, vfs: &dyn Vfs, violations: &Violations, at: &str) {
        let newest = self.writers.keys().next_back().copied().unwrap_or(1);
        for epoch in newest.saturating_sub(1).max(1)..=newest + AHEAD {
            let written = match assignment::read(vfs, epoch).await {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    violations.checked(Invariant::TornRead);
                    violations.push(Invariant::TornRead.says(format!(
                        "assignment of controller epoch {epoch} at {at}: {e}"
                    )));
                    continue;
                }
                Err(_) => continue, // the volume said no this time
            };
            violations.checked(Invariant::TornRead);
            violations.checked(Invariant::OneController);
            self.writers
                .entry(epoch)
                .or_default()
                .insert(written.controller);
            if let std::collections::btree_map::Entry::Vacant(slot) = self.winners.entry(epoch) {
                match election::holder(vfs, epoch, &self.token).await {
                    Ok(election::Holder::Broker(b)) => {
                        slot.insert(b);
                    }
                    // The winner completes its claim (durably) and reads it
                    // back before it writes an assignment: an assignment
                    // read before this claim was seen incomplete had no
                    // winner behind it.
                    Ok(election::Holder::Undecided) if self.reported.insert(epoch) => {
                        violations.push(Invariant::OneController.says(format!(
                            "controller epoch {epoch}: an assignment written by broker(s) {:?} while its claim holds no complete claim (seen at {at})",
                            self.writers[&epoch]
                        )));
                    }
                    _ => {}
                }
            }
            self.judge(epoch, violations, at);
        }
    }

    fn judge(&mut self, epoch: u32, violations: &Violations, at: &str) {
        let writers = &self.writers[&epoch];
        let winner = self.winners.get(&epoch);
        let wrong = writers.len() > 1 || winner.is_some_and(|w| !writers.contains(w));
        if wrong && self.reported.insert(epoch) {
            violations.push(Invariant::OneController.says(format!(
                "controller epoch {epoch}: assignments written by broker(s) {writers:?}, claim won by {} (seen at {at})",
                winner.map_or("nobody yet".to_owned(), |w| format!("broker-{w}"))
            )));
        }
    }
}
