//! NFSv4 read delegations, their recall, and the grace period after a
//! server restart: the two ways a real NFS server makes one host's call wait
//! on something other than the call itself.
//!
//! What real Linux NFS showed (ci/realnfs): nfsd delegates a file to a host
//! that opens it for reading without O_DIRECT, when no other host has it
//! open for writing (the model does not check that last condition, so it
//! delegates a little more than nfsd). Before another host may open that
//! file for writing,
//! truncate it, rename over it, rename it or remove it, the server recalls
//! the delegation. A live holder returns it at once; a holder whose host
//! lost power never answers, and the server waits until that host's lease
//! has run out (90 s by default). Meanwhile the calling host's kernel holds
//! the directory, so its other calls in that directory (listings, creates,
//! renames, removals) wait too. A client that opens with O_DIRECT asks for
//! no delegation (NFSv4.1 WANT_NO_DELEG) and gets none. After a restart the
//! server refuses new opens, renames and removals until its grace period
//! ends; clients retry, so those calls wait.

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::Instant;

use super::server::{Fh, ROOT, Server};

/// A host incarnation: a host id and its boot count.
pub(crate) type Holder = (u32, u32);

#[derive(Default)]
pub(crate) struct Delegations {
    /// File id -> the incarnations it is delegated to.
    held: BTreeMap<u64, BTreeSet<Holder>>,
    /// Incarnations that lost power, and when.
    dead: BTreeMap<Holder, Instant>,
    /// Host -> directory path -> until when a recall holds it there.
    locked_dirs: BTreeMap<u32, BTreeMap<String, Instant>>,
    /// New opens, renames and removals wait until then (a server restart).
    pub grace_until: Option<Instant>,
}

impl Delegations {
    pub fn grant(&mut self, id: u64, holder: Holder) {
        self.held.entry(id).or_default().insert(holder);
    }

    pub fn count(&self) -> usize {
        self.held.values().map(BTreeSet::len).sum()
    }

    /// A server restart: the delegations of hosts that are gone cannot be
    /// reclaimed and vanish with the server's memory; live hosts reclaim
    /// theirs.
    pub fn server_restarted(&mut self, grace_until: Option<Instant>) {
        let dead = &self.dead;
        self.held.retain(|_, holders| {
            holders.retain(|h| !dead.contains_key(h));
            !holders.is_empty()
        });
        self.dead.clear();
        self.grace_until = grace_until;
    }

    pub fn in_grace(&self, now: Instant) -> bool {
        self.grace_until.is_some_and(|t| now < t)
    }

    /// An incarnation lost power now: its delegations stay until its lease
    /// runs out.
    pub fn lost_power(&mut self, holder: Holder, now: Instant) {
        if self.held.values().any(|s| s.contains(&holder)) {
            self.dead.insert(holder, now);
        }
        self.locked_dirs.remove(&holder.0);
    }

    /// Recalls the delegations of file `id` held by hosts other than
    /// `caller`: the live ones are returned now; `Some(t)` if a dead one
    /// holds it until its lease ends at `t`.
    pub fn recall(
        &mut self,
        id: u64,
        caller: u32,
        now: Instant,
        lease: std::time::Duration,
    ) -> Option<Instant> {
        let holders = self.held.get_mut(&id)?;
        let mut wait = None;
        holders.retain(|h| {
            if h.0 == caller {
                return true;
            }
            match self.dead.get(h) {
                Some(&died) if now < died + lease => {
                    wait = wait.max(Some(died + lease));
                    true
                }
                _ => false,
            }
        });
        if holders.is_empty() {
            self.held.remove(&id);
        }
        wait
    }

    /// Host `h`'s kernel holds directory `dir` until `until` (a call of its
    /// waits there on a recall).
    pub fn lock_dir(&mut self, h: u32, dir: &str, until: Instant) {
        self.locked_dirs
            .entry(h)
            .or_default()
            .insert(dir.to_owned(), until);
    }

    /// Until when host `h`'s calls in `dir` wait behind a recall it is in.
    pub fn dir_locked_until(&self, h: u32, dir: &str, now: Instant) -> Option<Instant> {
        self.locked_dirs
            .get(&h)?
            .get(dir)
            .copied()
            .filter(|&t| now < t)
    }
}

/// The file at `path` as the server has it now (no client cache, no fault).
pub(crate) fn server_file(server: &Server, path: &str) -> Option<Fh> {
    let mut fh = ROOT;
    for name in path.split('/').filter(|c| !c.is_empty()) {
        fh = server.lookup(fh, name).ok()?;
    }
    Some(fh)
}

/// The directory part of `path` ("" for the root).
pub(crate) fn parent(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit_once('/')
        .map_or("", |(d, _)| d)
}
