//! Historical bugs, kept so the simulator can replay them (`sim --scenario
//! <name> --reintroduce <name>`). Compiled only into the simulation build
//! (`cfg(madsim)`): the production binary has none of these code paths,
//! which CI checks by looking for [`MARK`] in the release binary.
//!
//! Each switch is the real old code path, not a fake violation: see the
//! scenario file of the same name under `scenarios/` for its story.

// Each old code path is compiled as a child of the module it patches
// (`log::staging`, `log::topic`, `log::partition`, `cluster::assignment`),
// so this module is only the switch and depends on nothing of the broker.

use std::cell::RefCell;
use std::collections::BTreeSet;

/// Logged whenever a historical path runs; absent from production builds.
pub(crate) const MARK: &str = "kaas-reintroduced-historical-bug";

/// The bugs that can be switched back on.
pub const BUGS: &[&str] = &[
    "torn-assignment",
    "stuck-topic-delete",
    "resurrected-partition",
    "zombie-append",
    "staging-sweep",
    // Not a broker code path: the volume's files opened buffered (as
    // `PosixVfs` did before it opened them with O_DIRECT on NFS); the
    // simulator's model NFS then hands out delegations.
    "delegation-stall",
];

thread_local! {
    // One simulated run lives on one thread (madsim), so a thread-local
    // switch reaches every node of that run and nothing else.
    static ON: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
}

/// Switches the named bugs on for runs on this thread (and the others off).
pub fn reintroduce(bugs: &[String]) {
    ON.with(|on| *on.borrow_mut() = bugs.iter().cloned().collect());
}

/// Whether the named historical path is switched on.
pub fn on(bug: &str) -> bool {
    let active = ON.with(|on| on.borrow().contains(bug));
    if active {
        tracing::warn!(bug, "{MARK}: taking the historical code path");
    }
    active
}
