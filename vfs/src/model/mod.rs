//! A model of NFS for the simulator: one server shared by many client hosts.
//!
//! Each host ([`ModelHost`], a [`Vfs`]) has its own attribute cache, lookup
//! cache (negative entries too), directory-listing cache, page cache and
//! dirty pages, with the behaviour of the Linux NFS client: `open` resolves
//! names at the server and revalidates (close-to-open), while `stat`,
//! existence answers, `read_dir` and reads through an older handle may be
//! stale until the cache timeouts; a file unlinked while open on the same
//! host is silly-renamed to `.nfs…`; other hosts get ESTALE. Faults (partial
//! write-back, crashes, lost replies, EIO, ENOSPC, latency, stalls, server
//! restarts, interrupted two-step operations) are switched on by
//! [`NfsConfig`] and driven only by the seed and the simulation clock.
//!
//! Everything lives in one [`ModelNfs`] value: two simulations never share
//! anything.

mod audit;
mod config;
mod delegations;
mod errno;
mod host;
mod server;
mod stats;
mod world;

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

pub use audit::Publication;
pub use config::{Faults, NfsConfig};
pub use stats::FaultStats;

use errno::Errno;
use server::Fh;
use world::World;

use crate::{DirEntry, FileKind, Metadata, OpenOptions, Vfs, VfsFile, path};

/// One NFS server and the clients of every host that mounts it.
#[derive(Clone)]
pub struct ModelNfs {
    world: Arc<Mutex<World>>,
}

impl ModelNfs {
    pub fn new(config: NfsConfig, seed: u64) -> Self {
        Self {
            world: Arc::new(Mutex::new(World::new(config, seed))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The view of host `id` (created on first use).
    pub fn host(&self, id: u32) -> ModelHost {
        self.lock().host(id);
        ModelHost {
            nfs: self.clone(),
            id,
        }
    }

    /// Host `id` starts (again). If its previous incarnation did anything
    /// and was not crashed explicitly, that incarnation crashed now: a
    /// process never leaves a host any other way in the simulator.
    pub fn boot_host(&self, id: u32) -> ModelHost {
        let mut w = self.lock();
        if w.hosts.get(&id).is_some_and(|h| h.used) {
            w.crash_host(id);
        }
        w.host(id);
        drop(w);
        self.host(id)
    }

    /// Crash semantics for host `id`: unflushed writes lost (some may have
    /// landed), caches gone, its `.nfs` files left on the server for good.
    pub fn crash_host(&self, id: u32) {
        self.lock().crash_host(id);
    }

    /// Replaces the injected faults (not the caching behaviour), e.g. to let
    /// a simulation heal before its liveness checks.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().config.faults = faults;
    }

    /// Arms a watch: the first successful call (`"<op> <path>"`, a rename
    /// as `"rename <from> -> <to>"`) containing `pattern` (`*` stands for
    /// any text) from now on
    /// records its host, for [`Self::watch_fired`]. Lets a scenario put a
    /// fault at an exact point of a broker's work ("while it rewrites the
    /// assignment") rather than at a time.
    pub fn watch(&self, pattern: &str) -> usize {
        let mut w = self.lock();
        w.watches.push((pattern.to_owned(), None));
        w.watches.len() - 1
    }

    /// The next call of host `id` (not a close) fails with EIO before it
    /// reaches the server: a fault point's way to send the step after it
    /// down its error path (the simulator's `Act::FailNext`).
    pub fn fail_next_call(&self, id: u32) {
        self.lock().failing.insert(id);
    }

    /// The next `n` flushes of host `id` that have pages to send (an
    /// fsync, or the write-back a close does) fail with EIO and leave those
    /// pages dirty in its cache: the server refusing that client's writes
    /// for a moment. A step that goes on after such a failure publishes
    /// bytes the server does not have.
    pub fn fail_next_flushes(&self, id: u32, n: u32) {
        *self.lock().failing_flushes.entry(id).or_default() += n;
    }

    /// The host whose call matched watch `id`, once one did.
    pub fn watch_fired(&self, id: usize) -> Option<u32> {
        self.lock().watches.get(id).and_then(|(_, h)| *h)
    }

    /// Grows with every file or directory the server creates: an inode
    /// numbered at or above a mark was created after the mark was taken.
    pub fn mark(&self) -> u64 {
        self.lock().server.next_inode()
    }

    /// Paths under `prefix` (itself included) whose inode was created at
    /// or after `mark`.
    pub fn created_since(&self, prefix: &str, mark: u64) -> Vec<String> {
        let under = format!("{prefix}/");
        self.lock()
            .server
            .walk_ids()
            .into_iter()
            .filter(|(p, id)| *id >= mark && (p == prefix || p.starts_with(&under)))
            .map(|(p, _)| p)
            .collect()
    }

    /// Whether hosts open files with O_DIRECT (true, what kaas does on NFS)
    /// and so ask for no delegation; false is the historical
    /// `delegation-stall` (buffered opens, delegations a power-lost host
    /// keeps for its lease).
    pub fn set_direct_io(&self, direct: bool) {
        self.lock().direct_io = direct;
    }

    /// The injected stall time host `id`'s calls have sat through so far
    /// (a checker excuses a broker's silence by it).
    pub fn stalled(&self, id: u32) -> std::time::Duration {
        self.lock().stalled.get(&id).copied().unwrap_or_default()
    }

    /// How many delegations the server holds now.
    pub fn delegations_held(&self) -> usize {
        self.lock().delegations.count()
    }

    /// The server restarts: data written but not committed is dropped.
    pub fn restart_server(&self) {
        self.lock().restart_server();
    }

    /// How much of the file at `path` the server has committed (what a
    /// server restart keeps); `None` when there is no file there. For
    /// checkers: no host sees this.
    pub fn stable_len(&self, path: &str) -> Option<u64> {
        self.lock().server.stable_len(path)
    }

    /// The durability audit (`audit.rs`): every rename that made a file
    /// visible while some of its bytes were not committed at the server,
    /// and how many renames were audited. For checkers: no host sees this.
    pub fn publications(&self) -> (u64, Vec<Publication>) {
        let w = self.lock();
        (w.audit.audited, w.audit.undurable.clone())
    }

    pub fn stats(&self) -> FaultStats {
        self.lock().stats
    }

    pub fn used_bytes(&self) -> u64 {
        self.lock().server.used_bytes()
    }

    /// Sets how many bytes the server stores before a write that grows a
    /// file fails (`None`: no limit), and whether it fails with EDQUOT (a
    /// quota) rather than ENOSPC: a volume that fills up, then is grown or
    /// freed by an operator.
    pub fn set_capacity(&self, bytes: Option<u64>, quota: bool) {
        let mut w = self.lock();
        w.server.capacity = bytes;
        w.server.capacity_is_quota = quota;
    }

    /// The server's tree, one line per name (`path kind size`), depth first
    /// in name order: the same state always prints the same text.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for (path, kind, size) in self.lock().server.walk() {
            let kind = match kind {
                FileKind::Dir => "dir",
                FileKind::File => "file",
                FileKind::Other => "other",
            };
            out.push_str(&format!("{path} {kind} {size}\n"));
        }
        out
    }

    /// Every `.nfs` file on the server.
    pub fn nfs_leftovers(&self) -> Vec<String> {
        self.lock()
            .server
            .walk()
            .into_iter()
            .map(|(p, _, _)| p)
            .filter(|p| {
                p.rsplit('/')
                    .next()
                    .is_some_and(crate::durable::is_nfs_silly_rename)
            })
            .collect()
    }

    /// The operations recorded so far (`NfsConfig::trace`).
    pub fn trace(&self) -> Vec<String> {
        self.lock().trace.clone()
    }

    /// A digest of the trace (FNV-1a over its lines): equal traces, equal digests.
    pub fn trace_digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for line in &self.lock().trace {
            for b in line.bytes().chain(std::iter::once(b'\n')) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

/// One host's client view of the model NFS.
#[derive(Clone)]
pub struct ModelHost {
    nfs: ModelNfs,
    id: u32,
}

impl ModelHost {
    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn nfs(&self) -> &ModelNfs {
        &self.nfs
    }

    /// Waits until the server would take a call (see `delegations.rs`):
    /// `dir` is the directory the call holds on this host, `changes` the
    /// files it changes, `in_grace` whether a grace period refuses it.
    async fn hold(&self, dir: Option<&str>, changes: &[&str], in_grace: bool) {
        loop {
            let until = self.nfs.lock().hold_until(self.id, dir, changes, in_grace);
            match until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => return,
            }
        }
    }

    async fn delay(&self) {
        let d = self.nfs.lock().latency(self.id);
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }

    /// Runs one operation under the lock, after its latency, and traces it.
    async fn op<T>(
        &self,
        name: &'static str,
        path: &Path,
        f: impl FnOnce(&mut World, u32, &str) -> Result<T, Errno>,
    ) -> io::Result<T> {
        path::check(path)?;
        let p = path.to_str().unwrap_or_default();
        // Taken before the latency, while the task that reached the fault
        // point is still the one running on this host.
        let fail = self.take_failure();
        self.delay().await;
        let mut w = self.nfs.lock();
        let result = if fail {
            Err(Errno::Io)
        } else {
            f(&mut w, self.id, p)
        };
        finish(&mut w, self.id, name, p, result)
    }

    fn take_failure(&self) -> bool {
        let mut w = self.nfs.lock();
        let failing = w.failing.remove(&self.id);
        if failing {
            w.stats.eio += 1;
        }
        failing
    }
}

/// Whether the `*`-separated parts of `pattern` occur in `text` in order.
fn contains_in_order(text: &str, pattern: &str) -> bool {
    let mut rest = text;
    for part in pattern.split('*') {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

fn finish<T>(
    w: &mut World,
    host: u32,
    op: &str,
    path: &str,
    result: Result<T, Errno>,
) -> io::Result<T> {
    w.after_op();
    if result.is_ok() && !w.watches.is_empty() {
        let call = format!("{op} {path}");
        for (pattern, fired) in &mut w.watches {
            if fired.is_none() && contains_in_order(&call, pattern) {
                *fired = Some(host);
            }
        }
    }
    if w.config.trace {
        let at = tokio::time::Instant::now().duration_since(w.epoch);
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.name(),
        };
        w.trace.push(format!(
            "{:.6} h{host} {op} {path} -> {outcome}",
            at.as_secs_f64()
        ));
    }
    result.map_err(|e| e.to_io(host, op, path))
}

#[async_trait]
impl Vfs for ModelHost {
    async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        let p = path.to_str().unwrap_or_default();
        let creates = opts.create != crate::Create::Never;
        let changes: &[&str] = if opts.write || opts.truncate {
            &[p]
        } else {
            &[]
        };
        self.hold(creates.then(|| delegations::parent(p)), changes, true)
            .await;
        let fh = self.op("open", path, |w, h, p| w.open(h, p, opts)).await?;
        let incarnation = self.nfs.lock().host(self.id).incarnation;
        Ok(Box::new(ModelFile {
            host: self.clone(),
            incarnation,
            fh,
            writable: opts.write,
            path: path.to_string_lossy().into(),
            closed: false,
        }))
    }

    async fn stat(&self, path: &Path) -> io::Result<Metadata> {
        self.op("stat", path, |w, h, p| w.stat(h, p)).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        path::check(to)?;
        let to_str = to.to_str().unwrap_or_default().to_owned();
        let from_p = from.to_str().unwrap_or_default();
        self.hold(Some(delegations::parent(from_p)), &[from_p, &to_str], true)
            .await;
        let plan = self
            .op("rename-begin", from, |w, h, p| {
                w.rename_begin(h, p, &to_str)
            })
            .await?;
        let from_str = from.to_str().unwrap_or_default();
        if plan.two_step {
            // Between the two requests the target name is missing for others.
            self.delay().await;
            tokio::task::yield_now().await;
            let mut w = self.nfs.lock();
            if w.interrupted() {
                return finish::<()>(&mut w, self.id, "rename-step2", from_str, Err(Errno::Io));
            }
            drop(w);
        }
        let mut w = self.nfs.lock();
        let result = w.rename_finish(self.id, &plan);
        // Watches see both names of a rename.
        let both = format!("{from_str} -> {to_str}");
        finish(&mut w, self.id, "rename", &both, result)
    }

    async fn unlink(&self, path: &Path) -> io::Result<()> {
        let p = path.to_str().unwrap_or_default();
        self.hold(Some(delegations::parent(p)), &[p], true).await;
        self.op("unlink", path, |w, h, p| w.unlink(h, p)).await
    }

    async fn mkdir(&self, path: &Path) -> io::Result<()> {
        let p = path.to_str().unwrap_or_default();
        self.hold(Some(delegations::parent(p)), &[], false).await;
        self.op("mkdir", path, |w, h, p| w.mkdir(h, p)).await
    }

    async fn rmdir(&self, path: &Path) -> io::Result<()> {
        let p = path.to_str().unwrap_or_default();
        self.hold(Some(delegations::parent(p)), &[], false).await;
        self.op("rmdir", path, |w, h, p| w.rmdir(h, p)).await
    }

    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let p = path.to_str().unwrap_or_default();
        self.hold(Some(p.trim_end_matches('/')), &[], false).await;
        self.op("read_dir", path, |w, h, p| w.read_dir(h, p)).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.op("sync_dir", path, |w, h, p| w.sync_dir(h, p)).await
    }

    /// The server's capacity and what is left of it (statfs asks the
    /// server, so no cache stands between); `None` without a capacity.
    async fn space(&self) -> io::Result<Option<crate::Space>> {
        let w = self.nfs.lock();
        Ok(w.server.capacity.map(|cap| crate::Space {
            total_bytes: cap,
            available_bytes: cap.saturating_sub(w.server.used_bytes()),
        }))
    }

    fn fault_host(&self) -> Option<u32> {
        Some(self.id)
    }
}

struct ModelFile {
    host: ModelHost,
    incarnation: u32,
    fh: Fh,
    writable: bool,
    path: Arc<str>,
    closed: bool,
}

impl ModelFile {
    async fn op<T>(
        &self,
        name: &'static str,
        f: impl FnOnce(&mut World, u32, u32, Fh) -> Result<T, Errno>,
    ) -> io::Result<T> {
        // A close never fails this way: the handle would stay open.
        let fail = name != "close" && self.host.take_failure();
        self.host.delay().await;
        let mut w = self.host.nfs.lock();
        let result = if fail {
            Err(Errno::Io)
        } else {
            f(&mut w, self.host.id, self.incarnation, self.fh)
        };
        finish(&mut w, self.host.id, name, &self.path, result)
    }
}

impl Drop for ModelFile {
    fn drop(&mut self) {
        if !self.closed {
            let mut w = self.host.nfs.lock();
            let _ = w.close(self.host.id, self.incarnation, self.fh);
        }
    }
}

#[async_trait]
impl VfsFile for ModelFile {
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        self.op("read", |w, h, inc, fh| w.read(h, inc, fh, offset, len))
            .await
            .map(Bytes::from)
    }

    async fn write_at(&self, offset: u64, data: Bytes) -> io::Result<()> {
        if !self.writable {
            let mut w = self.host.nfs.lock();
            return finish(&mut w, self.host.id, "write", &self.path, Err(Errno::BadF));
        }
        self.op("write", |w, h, inc, fh| w.write(h, inc, fh, offset, &data))
            .await
    }

    async fn fsync(&self) -> io::Result<()> {
        self.op("fsync", |w, h, inc, fh| w.fsync(h, inc, fh)).await
    }

    async fn stat(&self) -> io::Result<Metadata> {
        self.op("fstat", |w, h, inc, fh| w.fstat(h, inc, fh)).await
    }

    async fn close(mut self: Box<Self>) -> io::Result<()> {
        self.closed = true;
        self.op("close", |w, h, inc, fh| w.close(h, inc, fh)).await
    }
}
