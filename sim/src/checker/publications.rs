//! undurable-publication: the model NFS audits every rename at the
//! instant it makes a name visible (`vfs::model::Publication`): a file, or
//! every file in a directory renamed into place, whose bytes the server
//! has not all committed is a name that a server restart or its writer's
//! crash can leave pointing at bytes nobody wrote, after readers acted on
//! it. The generalisation of undurable-manifest to every file the
//! contract's first rule (temp, fsync, rename) publishes, judged whether
//! or not a restart falls in the window.
//!
//! Renames to a tombstone are not publications: they take a deleted
//! topic, or a swept staging directory, out of every reader's sight.

use vfs::model::{ModelNfs, Publication};

use super::Invariant;

/// What a tombstone's name starts with (`broker::layout`).
const TOMBSTONE: &str = ".tombstone-";

/// (publications audited, violations).
pub fn check(nfs: &ModelNfs) -> (u64, Vec<String>) {
    let (audited, undurable) = nfs.publications();
    let found = undurable
        .iter()
        .filter(|p| !is_tombstone(&p.name))
        .map(describe)
        .collect();
    (audited, found)
}

fn is_tombstone(name: &str) -> bool {
    name.rsplit('/')
        .next()
        .is_some_and(|last| last.starts_with(TOMBSTONE))
}

fn describe(p: &Publication) -> String {
    let what = if p.file == p.name {
        String::new()
    } else {
        format!(" ({} in it)", p.file)
    };
    Invariant::UndurablePublication.says(format!(
        "host {} renamed {}{what} into sight at {:.3}s with {} of its {} bytes committed at the server{}",
        p.host,
        p.name,
        p.at.as_secs_f64(),
        p.committed,
        p.len,
        if p.unsent {
            ", and pages of it still unsent in a host's cache"
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tombstone_is_no_publication() {
        assert!(is_tombstone("topics/.tombstone-abc"));
        assert!(is_tombstone("topics/abc/.tombstone-staging-1-x"));
        assert!(!is_tombstone("topics/abc"));
        assert!(!is_tombstone("groups/3/.tombstone-ish/x"));
    }
}
