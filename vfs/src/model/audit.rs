//! The durability audit of publications: the model's god view, at the
//! moment a rename makes a file (or a directory and every file in it)
//! visible under its new name, of whether every byte of it is committed at
//! the server. The contract's first rule (write a temp, fsync, rename)
//! exists so that a name never points at bytes a server restart or the
//! writer's crash can still take back; no host can tell, so only the
//! model can judge it, and it does so at the instant of the rename rather
//! than when a restart happens to fall in the window.
//!
//! Exclusive creates are not audited here: they publish an empty file,
//! committed by construction; what a claimant writes into it afterwards
//! is made durable by whoever acts on it (`durable::make_durable`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::host::Host;
#[cfg(doc)]
use super::server::Server;

/// A file that became visible by a rename while some of its bytes were
/// not committed at the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    /// The name the rename gave (a file, or the directory renamed).
    pub name: String,
    /// The file whose bytes were not committed: `name` itself, or a path
    /// below the renamed directory.
    pub file: String,
    /// The host that renamed it.
    pub host: u32,
    /// Bytes the server had committed (what a restart keeps).
    pub committed: u64,
    /// Bytes on the server.
    pub len: u64,
    /// Whether some host still held pages of it it had not sent.
    pub unsent: bool,
    /// When, since the model began.
    pub at: Duration,
}

/// The audit's findings and how many publications it looked at.
#[derive(Default)]
pub(crate) struct Audit {
    pub audited: u64,
    pub undurable: Vec<Publication>,
}

/// One file found not committed under a published name: its path below
/// the name, committed bytes, bytes on the server, pages unsent.
pub(crate) type Uncommitted = (String, u64, u64, bool);

impl Audit {
    /// The inodes some host holds pages of that it has not sent yet.
    pub fn unsent(hosts: &BTreeMap<u32, Host>) -> BTreeSet<u64> {
        hosts
            .values()
            .flat_map(|h| h.files.iter())
            .filter(|(_, f)| f.has_dirty())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Records what the rename by `host` made visible as `name`, as
    /// [`Server::uncommitted_under`] found it at that instant.
    pub fn published(&mut self, (host, name): (u32, &str), found: Vec<Uncommitted>, at: Duration) {
        self.audited += 1;
        for (rel, committed, len, unsent) in found {
            let file = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{name}/{rel}")
            };
            self.undurable.push(Publication {
                name: name.to_owned(),
                file,
                host,
                committed,
                len,
                unsent,
                at,
            });
        }
    }
}
