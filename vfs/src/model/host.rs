//! What one NFS client host remembers: attributes, name lookups (positive
//! and negative), directory listings, clean pages, dirty pages and pages
//! written but not yet committed. Nothing here is shared between hosts.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::errno::Errno;
use super::server::{Attr, Fh, PAGE};
use crate::DirEntry;

pub(crate) struct AttrEntry {
    pub attr: Attr,
    pub fetched: Instant,
    pub timeout: Duration,
}

/// A page as this host will send it: the whole page's bytes and the span
/// `[lo, hi)` it changed (only that span goes over the wire).
#[derive(Clone)]
pub(crate) struct PageBuf {
    pub data: Vec<u8>,
    pub lo: usize,
    pub hi: usize,
}

impl PageBuf {
    pub fn new(base: &[u8]) -> Self {
        let mut data = vec![0u8; PAGE];
        data[..base.len()].copy_from_slice(base);
        Self { data, lo: 0, hi: 0 }
    }

    /// Adds a write of `bytes` at `at`; false if it does not touch the span
    /// (the client must then send the old span first).
    pub(crate) fn absorb(&mut self, at: usize, bytes: &[u8]) -> bool {
        let end = at + bytes.len();
        if self.lo != self.hi && (end < self.lo || at > self.hi) {
            return false;
        }
        self.data[at..end].copy_from_slice(bytes);
        if self.lo == self.hi {
            (self.lo, self.hi) = (at, end);
        } else {
            (self.lo, self.hi) = (self.lo.min(at), self.hi.max(end));
        }
        true
    }
}

#[derive(Default)]
pub(crate) struct CachedFile {
    pub fh: Option<Fh>,
    /// The change attribute the clean pages belong to.
    pub change: u64,
    pub clean: BTreeMap<u64, Vec<u8>>,
    pub dirty: BTreeMap<u64, PageBuf>,
    /// Sent with WRITE but not yet committed, with the server's verifier at
    /// the time; re-sent if the verifier changes (server restart).
    pub unstable: BTreeMap<u64, (PageBuf, u64)>,
    /// End of this host's own writes (the size it sees before the server does).
    pub local_size: u64,
    /// A write-back error, reported by the next write, fsync or close.
    pub wb_error: Option<Errno>,
    pub opens: u32,
}

impl CachedFile {
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
}

#[derive(Default)]
pub(crate) struct Host {
    pub incarnation: u32,
    /// Whether this incarnation did anything (a reboot then means a crash).
    pub used: bool,
    pub attrs: BTreeMap<u64, AttrEntry>,
    pub dentries: BTreeMap<u64, BTreeMap<String, Option<Fh>>>,
    pub listings: BTreeMap<u64, Vec<DirEntry>>,
    pub files: BTreeMap<u64, CachedFile>,
    /// Files this host unlinked while open: file id -> (directory, `.nfs` name).
    pub silly: BTreeMap<u64, (Fh, String)>,
    pub silly_counter: u32,
}

impl Host {
    pub(crate) fn next_incarnation(&self) -> Self {
        Self {
            incarnation: self.incarnation + 1,
            ..Self::default()
        }
    }

    pub(crate) fn is_open(&self, id: u64) -> bool {
        self.files.get(&id).is_some_and(|f| f.opens > 0)
    }

    /// Forgets what this host knew about a directory's names.
    pub(crate) fn purge_dir(&mut self, id: u64) {
        self.dentries.remove(&id);
        self.listings.remove(&id);
    }

    pub(crate) fn set_dentry(&mut self, dir: Fh, name: &str, target: Option<Fh>) {
        self.dentries
            .entry(dir.id)
            .or_default()
            .insert(name.to_owned(), target);
    }

    pub(crate) fn silly_name(&mut self, id: u64) -> String {
        self.silly_counter += 1;
        format!(".nfs{id:016x}{:08x}", self.silly_counter)
    }

    /// True if `dir/name` is a `.nfs` file this host still has open.
    pub(crate) fn holds_silly(&self, dir: Fh, name: &str) -> bool {
        self.silly
            .iter()
            .any(|(id, (d, n))| *d == dir && n == name && self.is_open(*id))
    }
}
