//! The shared state of one simulated NFS deployment and every operation on
//! it. Each method runs under the world's lock as one step; the async layer
//! in `mod.rs` adds latency and the window of two-step operations.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use super::audit::Audit;
use super::config::NfsConfig;
use super::delegations::Delegations;
use super::errno::Errno;
use super::host::{AttrEntry, CachedFile, Host, PageBuf};
use super::server::{Attr, Fh, PAGE, ROOT, Server, Wcc};
use super::stats::FaultStats;
use crate::{Create, DirEntry, FileKind, Metadata, OpenOptions};

pub(crate) type R<T> = Result<T, Errno>;

pub(crate) struct World {
    pub server: Server,
    pub hosts: BTreeMap<u32, Host>,
    pub rng: ChaCha8Rng,
    pub config: NfsConfig,
    pub trace: Vec<String>,
    pub stats: FaultStats,
    pub epoch: Instant,
    /// Armed watches: a pattern and the host whose call first matched it.
    pub watches: Vec<(String, Option<u32>)>,
    /// Hosts whose next call fails with EIO, unapplied
    /// ([`super::ModelNfs::fail_next_call`]).
    pub failing: std::collections::BTreeSet<u32>,
    /// Per host: how many of its next flushes (an fsync's or a close's
    /// write-back and COMMIT) the server refuses with EIO, leaving the
    /// pages dirty in the host's cache ([`super::ModelNfs::fail_next_flushes`]).
    pub failing_flushes: BTreeMap<u32, u32>,
    pub delegations: Delegations,
    /// Per host: the injected stall time its calls sat through.
    pub stalled: BTreeMap<u32, Duration>,
    /// Hosts open files with O_DIRECT, and so ask for no delegation (what
    /// kaas does on NFS; `ModelNfs::set_direct_io`).
    pub direct_io: bool,
    /// What renames made visible before it was committed.
    pub audit: Audit,
}

/// What a fault does to one server call.
enum Injected {
    None,
    EioBefore,
    EioAfter,
    LostReply,
}

/// A rename resolved and, if its target was open on this host, half done.
pub(crate) struct RenamePlan {
    from_dir: Fh,
    from: String,
    to_dir: Fh,
    to: String,
    /// The path `to` names, for the durability audit.
    to_path: String,
    source: Fh,
    pub two_step: bool,
}

fn split(path: &str) -> Vec<&str> {
    path.split('/').filter(|c| !c.is_empty()).collect()
}

fn page_span(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    // (page, offset within page, length, offset within the caller's buffer)
    let end = offset + len as u64;
    let first = offset / PAGE as u64;
    let last = if len == 0 {
        first
    } else {
        (end - 1) / PAGE as u64
    };
    (first..=last).filter_map(move |page| {
        let page_start = page * PAGE as u64;
        let lo = offset.max(page_start);
        let hi = end.min(page_start + PAGE as u64);
        (hi > lo).then(|| {
            (
                page,
                (lo - page_start) as usize,
                (hi - lo) as usize,
                (lo - offset) as usize,
            )
        })
    })
}

impl World {
    pub fn new(config: NfsConfig, seed: u64) -> Self {
        Self {
            server: Server::new(config.preserve_unlinked, config.faults.capacity_bytes),
            hosts: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            config,
            trace: Vec::new(),
            stats: FaultStats::default(),
            epoch: Instant::now(),
            watches: Vec::new(),
            failing: Default::default(),
            failing_flushes: BTreeMap::new(),
            delegations: Delegations::default(),
            stalled: BTreeMap::new(),
            direct_io: true,
            audit: Audit::default(),
        }
    }

    pub fn host(&mut self, h: u32) -> &mut Host {
        self.hosts.entry(h).or_default()
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen_bool(p.min(1.0))
    }

    // ---- faults -------------------------------------------------------

    /// The delay before one of host `h`'s operations reaches the server.
    pub fn latency(&mut self, h: u32) -> Duration {
        let f = &self.config.faults;
        let (min, max, stall_p, stall) = (
            f.latency_min_us,
            f.latency_max_us,
            f.stall_probability,
            f.stall_ms,
        );
        let mut d = Duration::ZERO;
        if max > 0 {
            d += Duration::from_micros(self.rng.gen_range(min.min(max)..=max));
        }
        if self.chance(stall_p) {
            self.stats.stalls += 1;
            d += Duration::from_millis(stall);
            *self.stalled.entry(h).or_default() += Duration::from_millis(stall);
        }
        d
    }

    fn inject(&mut self, non_idempotent: bool) -> Injected {
        let f = self.config.faults.clone();
        if self.chance(f.eio_probability) {
            self.stats.eio += 1;
            return if self.chance(f.eio_applied_share) {
                Injected::EioAfter
            } else {
                Injected::EioBefore
            };
        }
        if non_idempotent && self.chance(f.lost_reply_probability) {
            self.stats.lost_replies += 1;
            return Injected::LostReply;
        }
        Injected::None
    }

    /// One server call with its faults. `retransmit` is what the server
    /// answers a retransmission of a non-idempotent call that had succeeded.
    fn call<T>(&mut self, retransmit: Option<Errno>, f: impl FnOnce(&mut Server) -> R<T>) -> R<T> {
        match self.inject(retransmit.is_some()) {
            Injected::None => f(&mut self.server),
            Injected::EioBefore => Err(Errno::Io),
            Injected::EioAfter => {
                let _ = f(&mut self.server);
                Err(Errno::Io)
            }
            Injected::LostReply => {
                f(&mut self.server)?;
                Err(retransmit.unwrap_or(Errno::Io))
            }
        }
    }

    /// A call that changes directories. On failure the client cannot tell
    /// what happened, so it revalidates those directories before trusting
    /// their cached names again.
    fn dir_call<T>(
        &mut self,
        h: u32,
        dirs: &[Fh],
        retransmit: Option<Errno>,
        f: impl FnOnce(&mut Server) -> R<T>,
    ) -> R<T> {
        let result = self.call(retransmit, f);
        if result.is_err() {
            let host = self.host(h);
            for dir in dirs {
                if let Some(e) = host.attrs.get_mut(&dir.id) {
                    e.timeout = Duration::ZERO;
                }
            }
        }
        result
    }

    /// Memory pressure: one host sends a random subset of its dirty pages.
    pub(crate) fn after_op(&mut self) {
        let p = self.config.faults.writeback_probability;
        if !self.chance(p) {
            return;
        }
        let dirty_hosts: Vec<u32> = self
            .hosts
            .iter()
            .filter(|(_, h)| h.files.values().any(CachedFile::has_dirty))
            .map(|(&id, _)| id)
            .collect();
        let Some(&h) = dirty_hosts.choose(&mut self.rng) else {
            return;
        };
        let mut pages: Vec<(u64, u64)> = self.hosts[&h]
            .files
            .iter()
            .flat_map(|(&id, f)| f.dirty.keys().map(move |&p| (id, p)))
            .collect();
        pages.shuffle(&mut self.rng);
        for (id, page) in pages {
            if self.rng.gen_bool(0.5) {
                self.stats.writebacks += 1;
                self.flush_page(h, id, page);
            }
        }
    }

    // ---- attribute and name caches -------------------------------------

    fn timeouts(&self, kind: FileKind) -> (Duration, Duration) {
        if kind == FileKind::Dir {
            self.config.dir_timeouts()
        } else {
            self.config.file_timeouts()
        }
    }

    /// Records attributes fetched from the server. A changed directory loses
    /// its cached names; a changed file loses its clean pages.
    fn store_attr(&mut self, h: u32, fh: Fh, attr: Attr) {
        let (min, max) = self.timeouts(attr.kind);
        let now = Instant::now();
        let host = self.host(h);
        let timeout = match host.attrs.get(&fh.id) {
            Some(old) if old.attr.change == attr.change => (old.timeout * 2).clamp(min, max),
            // Changed, or names cached before the directory's attributes
            // were: nothing vouches for them, so they go.
            Some(_) | None => {
                host.purge_dir(fh.id);
                min
            }
        };
        host.attrs.insert(
            fh.id,
            AttrEntry {
                attr,
                fetched: now,
                timeout,
            },
        );
        if let Some(cf) = host.files.get_mut(&fh.id) {
            if cf.change != attr.change {
                cf.clean.clear();
                cf.change = attr.change;
            }
        }
    }

    /// Attributes, from the cache while fresh, else from the server.
    fn getattr(&mut self, h: u32, fh: Fh) -> R<Attr> {
        let now = Instant::now();
        if let Some(e) = self.host(h).attrs.get(&fh.id) {
            if now.duration_since(e.fetched) < e.timeout {
                return Ok(e.attr);
            }
        }
        self.getattr_fresh(h, fh)
    }

    fn getattr_fresh(&mut self, h: u32, fh: Fh) -> R<Attr> {
        match self.call(None, |s| s.getattr(fh)) {
            Ok(attr) => {
                self.store_attr(h, fh, attr);
                Ok(attr)
            }
            Err(e) => {
                if e == Errno::Stale {
                    let host = self.host(h);
                    host.attrs.remove(&fh.id);
                    host.purge_dir(fh.id);
                }
                Err(e)
            }
        }
    }

    /// A lookup trusted while the directory's cached attributes are fresh,
    /// negative answers included.
    fn lookup_cached(&mut self, h: u32, dir: Fh, name: &str) -> R<Option<Fh>> {
        self.getattr(h, dir)?;
        if let Some(entry) = self.host(h).dentries.get(&dir.id).and_then(|d| d.get(name)) {
            return Ok(*entry);
        }
        self.lookup_fresh(h, dir, name)
    }

    fn lookup_fresh(&mut self, h: u32, dir: Fh, name: &str) -> R<Option<Fh>> {
        let found = match self.call(None, |s| s.lookup(dir, name)) {
            Ok(fh) => Some(fh),
            Err(Errno::NoEnt) => None,
            Err(e) => return Err(e),
        };
        self.host(h).set_dentry(dir, name, found);
        Ok(found)
    }

    fn resolve_dir(&mut self, h: u32, comps: &[&str], fresh: bool) -> R<Fh> {
        let mut dir = ROOT;
        for name in comps {
            let next = if fresh {
                self.lookup_fresh(h, dir, name)?
            } else {
                self.lookup_cached(h, dir, name)?
            };
            dir = next.ok_or(Errno::NoEnt)?;
        }
        Ok(dir)
    }

    /// Resolves a path through the caches; a stale cached handle makes the
    /// client look the path up again at the server, as Linux does on ESTALE.
    fn resolve_parent<'p>(&mut self, h: u32, path: &'p str) -> R<(Fh, &'p str)> {
        let comps = split(path);
        let (name, parents) = comps.split_last().ok_or(Errno::Inval)?;
        match self.resolve_dir(h, parents, false) {
            Err(Errno::Stale) => Ok((self.resolve_dir(h, parents, true)?, name)),
            other => Ok((other?, name)),
        }
    }

    /// After this host changed a directory: keep its cached names if only
    /// this host changed it, else forget them.
    fn note_dir_change(&mut self, h: u32, dir: Fh, wcc: Wcc) {
        let host = self.host(h);
        host.listings.remove(&dir.id);
        match host.attrs.get_mut(&dir.id) {
            Some(e) if e.attr.change == wcc.pre => e.attr.change = wcc.post,
            _ => {
                host.attrs.remove(&dir.id);
                host.purge_dir(dir.id);
            }
        }
    }

    // ---- path operations ----------------------------------------------

    pub fn open(&mut self, h: u32, path: &str, opts: OpenOptions) -> R<Fh> {
        let comps = split(path);
        let (name, parents) = comps.split_last().ok_or(Errno::IsDir)?;
        // Close-to-open: every name is resolved at the server.
        let dir = self.resolve_dir(h, parents, true)?;
        let fh = match opts.create {
            Create::Never => self.lookup_fresh(h, dir, name)?.ok_or(Errno::NoEnt)?,
            Create::IfMissing | Create::Exclusive => {
                let exclusive = opts.create == Create::Exclusive;
                let retransmit = exclusive.then_some(Errno::Exist);
                let (fh, wcc) =
                    self.dir_call(h, &[dir], retransmit, |s| s.create(dir, name, exclusive))?;
                self.note_dir_change(h, dir, wcc);
                self.host(h).set_dentry(dir, name, Some(fh));
                fh
            }
        };
        let attr = match self.getattr_fresh(h, fh) {
            Err(Errno::Stale) => return Err(Errno::NoEnt),
            other => other?,
        };
        if attr.kind == FileKind::Dir {
            return Err(Errno::IsDir);
        }
        if opts.truncate {
            let wcc = self.call(None, |s| s.truncate(fh))?;
            let cf = self.host(h).files.entry(fh.id).or_default();
            cf.clean.clear();
            cf.dirty.clear();
            cf.unstable.clear();
            cf.local_size = 0;
            cf.change = wcc.post;
            if let Some(e) = self.host(h).attrs.get_mut(&fh.id) {
                e.attr.size = 0;
                e.attr.change = wcc.post;
            }
        }
        let host = self.host(h);
        host.used = true;
        let cf = host.files.entry(fh.id).or_default();
        if cf.fh != Some(fh) {
            *cf = CachedFile {
                fh: Some(fh),
                change: attr.change,
                ..CachedFile::default()
            };
        }
        cf.opens += 1;
        self.server.open_state(fh.id, 1);
        let buffered_read = !opts.write && !opts.truncate && opts.create == Create::Never;
        if buffered_read
            && !self.direct_io
            && self.config.delegations
            && !self.delegations.in_grace(Instant::now())
        {
            let inc = self.host(h).incarnation;
            self.delegations.grant(fh.id, (h, inc));
        }
        Ok(fh)
    }

    pub fn stat(&mut self, h: u32, path: &str) -> R<Metadata> {
        let fh = if split(path).is_empty() {
            ROOT
        } else {
            let (dir, name) = self.resolve_parent(h, path)?;
            self.lookup_cached(h, dir, name)?.ok_or(Errno::NoEnt)?
        };
        let attr = match self.getattr(h, fh) {
            Err(Errno::Stale) => {
                // The cached name pointed at a freed inode: look it up again.
                let (dir, name) = self.resolve_parent(h, path)?;
                let fresh = self.lookup_fresh(h, dir, name)?.ok_or(Errno::NoEnt)?;
                self.getattr_fresh(h, fresh)?
            }
            other => other?,
        };
        let local = self.host(h).files.get(&fh.id).map_or(0, |f| f.local_size);
        Ok(Metadata {
            kind: attr.kind,
            len: attr.size.max(local),
        })
    }

    pub fn unlink(&mut self, h: u32, path: &str) -> R<()> {
        let (dir, name) = self.resolve_parent(h, path)?;
        if self.host(h).holds_silly(dir, name) {
            return Err(Errno::Busy);
        }
        let target = self.lookup_cached(h, dir, name)?.ok_or(Errno::NoEnt)?;
        self.host(h).used = true;
        if self.host(h).is_open(target.id) {
            return self.silly_rename(h, dir, name, target);
        }
        let wcc = self.dir_call(h, &[dir], Some(Errno::NoEnt), |s| s.remove(dir, name))?;
        self.note_dir_change(h, dir, wcc);
        let host = self.host(h);
        host.set_dentry(dir, name, None);
        host.files.remove(&target.id);
        host.attrs.remove(&target.id);
        Ok(())
    }

    /// What the Linux client does instead of removing a name whose file it
    /// has open: renames it to `.nfs…` and removes that at the last close.
    fn silly_rename(&mut self, h: u32, dir: Fh, name: &str, target: Fh) -> R<()> {
        let silly = self.host(h).silly_name(target.id);
        let (wcc, _) = self.dir_call(h, &[dir], Some(Errno::NoEnt), |s| {
            s.rename(dir, name, dir, &silly)
        })?;
        self.note_dir_change(h, dir, wcc);
        let host = self.host(h);
        host.set_dentry(dir, name, None);
        host.set_dentry(dir, &silly, Some(target));
        host.silly.insert(target.id, (dir, silly));
        Ok(())
    }

    pub fn mkdir(&mut self, h: u32, path: &str) -> R<()> {
        let (dir, name) = self.resolve_parent(h, path)?;
        if self.lookup_cached(h, dir, name)?.is_some() {
            return Err(Errno::Exist);
        }
        self.host(h).used = true;
        let (fh, wcc) = self.dir_call(h, &[dir], Some(Errno::Exist), |s| s.mkdir(dir, name))?;
        self.note_dir_change(h, dir, wcc);
        self.host(h).set_dentry(dir, name, Some(fh));
        Ok(())
    }

    pub fn rmdir(&mut self, h: u32, path: &str) -> R<()> {
        let (dir, name) = self.resolve_parent(h, path)?;
        let target = self.lookup_cached(h, dir, name)?.ok_or(Errno::NoEnt)?;
        self.host(h).used = true;
        let wcc = self.dir_call(h, &[dir], Some(Errno::NoEnt), |s| s.rmdir(dir, name))?;
        self.note_dir_change(h, dir, wcc);
        let host = self.host(h);
        host.set_dentry(dir, name, None);
        host.purge_dir(target.id);
        host.attrs.remove(&target.id);
        Ok(())
    }

    /// First part of a rename. If the target is open on this host, its first
    /// step (silly-renaming the target) is done here and `two_step` is set.
    pub(crate) fn rename_begin(&mut self, h: u32, from: &str, to: &str) -> R<RenamePlan> {
        let (from_dir, from_name) = self.resolve_parent(h, from)?;
        let (to_dir, to_name) = self.resolve_parent(h, to)?;
        let source = self
            .lookup_cached(h, from_dir, from_name)?
            .ok_or(Errno::NoEnt)?;
        let target = self.lookup_cached(h, to_dir, to_name)?;
        self.host(h).used = true;
        let mut plan = RenamePlan {
            from_dir,
            from: from_name.to_owned(),
            to_dir,
            to: to_name.to_owned(),
            to_path: split(to).join("/"),
            source,
            two_step: false,
        };
        if let Some(t) = target.filter(|t| *t != source && self.host(h).is_open(t.id)) {
            self.silly_rename(h, to_dir, to_name, t)?;
            plan.two_step = true;
        }
        Ok(plan)
    }

    pub fn interrupted(&mut self) -> bool {
        let p = self.config.faults.interrupt_probability;
        let hit = self.chance(p);
        if hit {
            self.stats.interrupts += 1;
        }
        hit
    }

    pub(crate) fn rename_finish(&mut self, h: u32, plan: &RenamePlan) -> R<()> {
        let dirs = [plan.from_dir, plan.to_dir];
        let unsent = Audit::unsent(&self.hosts);
        let mut published = None;
        let renamed = self.dir_call(h, &dirs, Some(Errno::NoEnt), |s| {
            let wcc = s.rename(plan.from_dir, &plan.from, plan.to_dir, &plan.to)?;
            published = Some(s.uncommitted_under(plan.source, &unsent));
            Ok(wcc)
        });
        // Audited whether or not the reply came back: the name is visible.
        if let Some(found) = published {
            let at = self.epoch.elapsed();
            self.audit.published((h, &plan.to_path), found, at);
        }
        let (from_wcc, to_wcc) = renamed?;
        self.note_dir_change(h, plan.from_dir, from_wcc);
        if plan.to_dir != plan.from_dir {
            self.note_dir_change(h, plan.to_dir, to_wcc);
        }
        let host = self.host(h);
        host.set_dentry(plan.from_dir, &plan.from, None);
        host.set_dentry(plan.to_dir, &plan.to, Some(plan.source));
        Ok(())
    }

    pub fn read_dir(&mut self, h: u32, path: &str) -> R<Vec<DirEntry>> {
        let dir = self.resolve_dir(h, &split(path), false)?;
        let attr = self.getattr(h, dir)?;
        if attr.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        if let Some(listing) = self.host(h).listings.get(&dir.id) {
            return Ok(listing.clone());
        }
        let listing: Vec<DirEntry> = self
            .call(None, |s| s.readdir(dir))?
            .into_iter()
            .map(|(name, kind)| DirEntry { name, kind })
            .collect();
        self.host(h).listings.insert(dir.id, listing.clone());
        Ok(listing)
    }

    pub fn sync_dir(&mut self, h: u32, path: &str) -> R<()> {
        let dir = self.resolve_dir(h, &split(path), false)?;
        match self.getattr(h, dir)?.kind {
            FileKind::Dir => Ok(()),
            _ => Err(Errno::NotDir),
        }
    }

    // ---- handle operations ----------------------------------------------

    fn live_file(&mut self, h: u32, incarnation: u32, fh: Fh) -> R<()> {
        let host = self.host(h);
        if host.incarnation != incarnation || !host.files.contains_key(&fh.id) {
            return Err(Errno::Dead);
        }
        Ok(())
    }

    /// The size this host believes the file has.
    fn file_size(&mut self, h: u32, fh: Fh) -> R<u64> {
        let attr = self.getattr(h, fh)?;
        let local = self.host(h).files.get(&fh.id).map_or(0, |f| f.local_size);
        Ok(attr.size.max(local))
    }

    /// The current bytes of one page as this host sees them, fetching it
    /// from the server when it is not cached.
    fn page(&mut self, h: u32, fh: Fh, page: u64, size: u64) -> R<Vec<u8>> {
        let valid = size.saturating_sub(page * PAGE as u64).min(PAGE as u64) as usize;
        if valid == 0 {
            return Ok(Vec::new());
        }
        let cf = self.host(h).files.entry(fh.id).or_default();
        if let Some(d) = cf
            .dirty
            .get(&page)
            .or_else(|| cf.unstable.get(&page).map(|u| &u.0))
        {
            return Ok(d.data[..valid].to_vec());
        }
        if let Some(c) = cf.clean.get(&page) {
            if c.len() >= valid {
                return Ok(c[..valid].to_vec());
            }
        }
        let bytes = self.call(None, |s| s.read(fh, page * PAGE as u64, PAGE))?;
        let cf = self.host(h).files.entry(fh.id).or_default();
        cf.clean.insert(page, bytes.clone());
        let mut out = bytes;
        out.resize(valid, 0);
        Ok(out)
    }

    pub fn read(&mut self, h: u32, inc: u32, fh: Fh, offset: u64, len: usize) -> R<Vec<u8>> {
        self.live_file(h, inc, fh)?;
        let size = self.file_size(h, fh)?;
        let end = size.min(offset.saturating_add(len as u64));
        if end <= offset {
            return Ok(Vec::new());
        }
        let mut out = vec![0u8; (end - offset) as usize];
        for (page, at, n, pos) in page_span(offset, out.len()) {
            let bytes = self.page(h, fh, page, size)?;
            let avail = bytes.len().saturating_sub(at).min(n);
            out[pos..pos + avail].copy_from_slice(&bytes[at..at + avail]);
        }
        Ok(out)
    }

    pub fn write(&mut self, h: u32, inc: u32, fh: Fh, offset: u64, data: &[u8]) -> R<()> {
        self.live_file(h, inc, fh)?;
        if let Some(e) = self
            .host(h)
            .files
            .get_mut(&fh.id)
            .and_then(|f| f.wb_error.take())
        {
            return Err(e);
        }
        let size = self.file_size(h, fh)?;
        for (page, at, n, pos) in page_span(offset, data.len()) {
            let piece = &data[pos..pos + n];
            let cf = self.host(h).files.entry(fh.id).or_default();
            if let Some(buf) = cf.dirty.get_mut(&page) {
                if buf.absorb(at, piece) {
                    continue;
                }
                // Not contiguous with what is dirty: send that first.
                self.flush_page(h, fh.id, page);
                let cf = self.host(h).files.entry(fh.id).or_default();
                if cf.dirty.contains_key(&page) {
                    return Err(cf.wb_error.take().unwrap_or(Errno::Io));
                }
            }
            let mut buf = if n == PAGE {
                PageBuf::new(&[])
            } else {
                PageBuf::new(&self.page(h, fh, page, size)?)
            };
            buf.absorb(at, piece);
            self.host(h)
                .files
                .entry(fh.id)
                .or_default()
                .dirty
                .insert(page, buf);
        }
        let cf = self.host(h).files.entry(fh.id).or_default();
        cf.local_size = cf.local_size.max(offset + data.len() as u64);
        Ok(())
    }

    /// Sends one dirty page to the server (unstable until COMMIT).
    fn flush_page(&mut self, h: u32, id: u64, page: u64) {
        let Some(cf) = self.host(h).files.get_mut(&id) else {
            return;
        };
        let (Some(fh), Some(buf)) = (cf.fh, cf.dirty.remove(&page)) else {
            return;
        };
        let at = page * PAGE as u64 + buf.lo as u64;
        let result = if self.chance(self.config.faults.enospc_probability) {
            Err(Errno::NoSpc)
        } else {
            self.call(None, |s| s.write(fh, at, &buf.data[buf.lo..buf.hi]))
        };
        // Injected, or the server's capacity reached: either is the volume's.
        if matches!(result, Err(Errno::NoSpc | Errno::DQuot)) {
            self.stats.enospc += 1;
        }
        let verifier = self.server.verifier;
        let end = at + (buf.hi - buf.lo) as u64;
        let host = self.host(h);
        let cf = host.files.entry(id).or_default();
        let wcc = match result {
            Ok(wcc) => wcc,
            Err(e) => {
                cf.wb_error = Some(e);
                // A stale file can never take the page; anything else is retried.
                if e != Errno::Stale {
                    cf.dirty.insert(page, buf);
                }
                return;
            }
        };
        let only_us = cf.change == wcc.pre;
        if only_us {
            cf.change = wcc.post;
            cf.clean.insert(page, buf.data.clone());
        } else {
            cf.clean.clear();
        }
        // A page sent twice before a COMMIT holds both spans: a server
        // restart must see both re-sent, as Linux keeps every request on
        // the commit list. The newer buffer was built on the older one's
        // bytes (`page` reads unstable pages), so its data covers both.
        let (buf, verifier) = match cf.unstable.remove(&page) {
            Some((older, sent)) => {
                let mut merged = buf;
                merged.lo = merged.lo.min(older.lo);
                merged.hi = merged.hi.max(older.hi);
                // The older send's verifier: if a restart came between
                // the two, the COMMIT sees it and the whole span is re-sent.
                (merged, sent)
            }
            None => (buf, verifier),
        };
        cf.unstable.insert(page, (buf, verifier));
        match host.attrs.get_mut(&id) {
            Some(e) if only_us && e.attr.change == wcc.pre => {
                e.attr.change = wcc.post;
                e.attr.size = e.attr.size.max(end);
            }
            _ => {
                host.attrs.remove(&id);
            }
        }
    }

    /// Whether the server refuses this flush of host `h` (`failing_flushes`).
    fn refuse_flush(&mut self, h: u32) -> bool {
        match self.failing_flushes.get_mut(&h) {
            Some(n) if *n > 0 => {
                *n -= 1;
                self.stats.eio += 1;
                true
            }
            _ => false,
        }
    }

    /// Sends every dirty page of a file and commits; resends pages a server
    /// restart dropped (the verifier changed).
    fn commit_file(&mut self, h: u32, id: u64) -> R<()> {
        let Some(cf) = self.host(h).files.get(&id) else {
            return Ok(());
        };
        let Some(fh) = cf.fh else {
            return Ok(());
        };
        let has_pages = !(cf.dirty.is_empty() && cf.unstable.is_empty());
        let pages: Vec<u64> = cf.dirty.keys().copied().collect();
        if has_pages && self.refuse_flush(h) {
            return Err(Errno::Io);
        }
        for page in pages {
            self.flush_page(h, id, page);
        }
        for _ in 0..3 {
            if self
                .host(h)
                .files
                .get(&id)
                .is_none_or(|f| f.unstable.is_empty())
            {
                break;
            }
            let verifier = self.call(None, |s| s.commit(fh))?;
            let cf = self.host(h).files.entry(id).or_default();
            let resend: Vec<u64> = cf
                .unstable
                .iter()
                .filter(|(_, (_, v))| *v != verifier)
                .map(|(&p, _)| p)
                .collect();
            if resend.is_empty() {
                cf.unstable.clear();
                break;
            }
            for page in resend {
                if let Some((buf, _)) = cf.unstable.remove(&page) {
                    cf.dirty.insert(page, buf);
                }
            }
            let cf = self.host(h).files.entry(id).or_default();
            let again: Vec<u64> = cf.dirty.keys().copied().collect();
            for page in again {
                self.flush_page(h, id, page);
            }
        }
        match self
            .host(h)
            .files
            .get_mut(&id)
            .and_then(|f| f.wb_error.take())
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn fsync(&mut self, h: u32, inc: u32, fh: Fh) -> R<()> {
        self.live_file(h, inc, fh)?;
        self.commit_file(h, fh.id)
    }

    pub(crate) fn fstat(&mut self, h: u32, inc: u32, fh: Fh) -> R<Metadata> {
        self.live_file(h, inc, fh)?;
        let attr = self.getattr(h, fh)?;
        Ok(Metadata {
            kind: attr.kind,
            len: self.file_size(h, fh)?,
        })
    }

    /// Close: flush and commit (close-to-open), then, at the last close on
    /// this host, remove the file's `.nfs` name if it was unlinked while open.
    pub fn close(&mut self, h: u32, inc: u32, fh: Fh) -> R<()> {
        self.live_file(h, inc, fh)?;
        let result = self.commit_file(h, fh.id);
        let host = self.host(h);
        let last = match host.files.get_mut(&fh.id) {
            Some(cf) => {
                cf.opens = cf.opens.saturating_sub(1);
                cf.opens == 0
            }
            None => false,
        };
        self.server.open_state(fh.id, -1);
        if last {
            if let Some((dir, silly)) = self.host(h).silly.remove(&fh.id) {
                let removed =
                    self.dir_call(h, &[dir], Some(Errno::NoEnt), |s| s.remove(dir, &silly));
                match removed {
                    Ok(wcc) => {
                        self.note_dir_change(h, dir, wcc);
                        self.host(h).set_dentry(dir, &silly, None);
                    }
                    // A failed delete leaves the `.nfs` file behind, as on a
                    // real client, which never retries it. Its dentry is
                    // dropped, not made negative: the host did not see it go,
                    // so its next lookup of the name asks the server.
                    Err(_) => {
                        if let Some(d) = self.host(h).dentries.get_mut(&dir.id) {
                            d.remove(&silly);
                        }
                        self.stats.leaked_silly += 1;
                    }
                }
                self.host(h).files.remove(&fh.id);
            }
        }
        result
    }

    // ---- whole-host and server events -------------------------------------

    /// A host crash: unflushed pages are lost (each may have landed anyway),
    /// caches vanish, open state is released, `.nfs` files stay.
    pub fn crash_host(&mut self, h: u32) {
        let Some(host) = self.hosts.remove(&h) else {
            return;
        };
        self.stats.crashes += 1;
        self.delegations
            .lost_power((h, host.incarnation), Instant::now());
        let landed = self.config.faults.crash_landed_probability;
        for (&id, cf) in &host.files {
            if let Some(fh) = cf.fh {
                for (&page, buf) in &cf.dirty {
                    if self.chance(landed) {
                        let at = page * PAGE as u64 + buf.lo as u64;
                        let _ = self.server.write(fh, at, &buf.data[buf.lo..buf.hi]);
                    }
                }
            }
            if cf.opens > 0 {
                self.server.open_state(id, -i64::from(cf.opens));
            }
        }
        self.hosts.insert(h, host.next_incarnation());
    }

    pub fn restart_server(&mut self) {
        self.stats.server_restarts += 1;
        self.server.restart();
        let grace = Duration::from_millis(self.config.grace_ms);
        self.delegations
            .server_restarted((!grace.is_zero()).then(|| Instant::now() + grace));
    }

    /// Until when a call of host `h` must wait before it reaches the
    /// server: behind a recall its host is in (the directory held),
    /// on a recall of its own, or for the grace period after a restart.
    /// `changes` are the files the call changes (open for writing,
    /// rename, removal); a recall that waits holds `dir` on this host.
    pub fn hold_until(
        &mut self,
        h: u32,
        dir: Option<&str>,
        changes: &[&str],
        in_grace: bool,
    ) -> Option<Instant> {
        let now = Instant::now();
        if let Some(t) = dir.and_then(|d| self.delegations.dir_locked_until(h, d, now)) {
            return Some(t);
        }
        if in_grace && self.delegations.in_grace(now) {
            return self.delegations.grace_until;
        }
        let lease = Duration::from_millis(self.config.lease_ms);
        let mut wait = None;
        for path in changes {
            if let Some(fh) = super::delegations::server_file(&self.server, path) {
                wait = wait.max(self.delegations.recall(fh.id, h, now, lease));
            }
        }
        if let (Some(t), Some(d)) = (wait, dir) {
            self.delegations.lock_dir(h, d, t);
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_span_splits_at_page_boundaries() {
        let spans: Vec<_> = page_span(4000, 200).collect();
        assert_eq!(spans, vec![(0, 4000, 96, 0), (1, 0, 104, 96)]);
        assert_eq!(page_span(8192, 0).count(), 0);
        let whole: Vec<_> = page_span(4096, 4096).collect();
        assert_eq!(whole, vec![(1, 0, 4096, 0)]);
    }

    #[test]
    fn page_buffers_merge_touching_writes_only() {
        let mut b = PageBuf::new(b"abc");
        assert!(b.absorb(10, b"xy"));
        assert!(b.absorb(12, b"z"));
        assert_eq!((b.lo, b.hi), (10, 13));
        assert!(!b.absorb(20, b"q"), "a gap must flush first");
        assert_eq!(&b.data[..3], b"abc");
    }
}
