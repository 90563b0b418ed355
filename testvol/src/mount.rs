//! One mount of the volume: the FUSE side, a client host of the shared
//! volume. Its kernel keeps this mount's own entry, attribute and
//! negative-lookup caches (the TTLs below), as an NFS client does.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};

use crate::volume::Volume;

/// Which latency an operation pays.
#[derive(Clone, Copy)]
enum Cost {
    Commit,
    Metadata,
}

/// The kernel caches of a mount.
#[derive(Clone, Copy, Debug)]
pub struct Caches {
    pub entry: Duration,
    pub attr: Duration,
    /// How long a failed lookup is remembered (NFS `lookupcache=all`);
    /// zero answers every lookup afresh (`lookupcache=positive`).
    pub negative: Duration,
}

pub type Shared = Arc<Mutex<Volume>>;

pub fn lock(v: &Shared) -> MutexGuard<'_, Volume> {
    // A panic in one handler must not take the volume down with it.
    v.lock().unwrap_or_else(|p| p.into_inner())
}

type Job = Box<dyn FnOnce() + Send>;

/// Threads that wait out an operation's latency and then do it, so that a
/// slow commit holds up its caller only, as on a real network volume.
#[derive(Clone)]
pub struct Delayer {
    tx: Arc<Mutex<Sender<Job>>>,
}

impl Delayer {
    pub fn new(threads: usize) -> Self {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..threads {
            let rx: Arc<Mutex<Receiver<Job>>> = rx.clone();
            thread::spawn(move || {
                loop {
                    let job = match rx.lock() {
                        Ok(r) => r.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
        }
        Self {
            tx: Arc::new(Mutex::new(tx)),
        }
    }

    fn run(&self, job: Job) {
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send(job);
        }
    }
}

pub struct Mount {
    pub id: u32,
    pub volume: Shared,
    pub caches: Caches,
    pub delayer: Delayer,
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

fn attr(ino: u64, m: &Metadata) -> FileAttr {
    let kind = if m.is_dir() {
        FileType::Directory
    } else if m.file_type().is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        ino,
        size: m.len(),
        blocks: m.blocks(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind,
        perm: (m.permissions().mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// An entry that tells the kernel "no such name" for the negative TTL.
fn negative() -> FileAttr {
    FileAttr {
        ino: 0,
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Mount {
    /// Runs `op` after `delay`, unless this mount lost power meanwhile:
    /// an operation its process sent before the cut fails with EIO then.
    fn later<F>(&self, cost: Cost, op: F)
    where
        F: FnOnce(Option<&mut Volume>) + Send + 'static,
    {
        let (volume, id) = (self.volume.clone(), self.id);
        let mut v = lock(&volume);
        let delay = match cost {
            Cost::Commit => v.latency.commit,
            Cost::Metadata => v.latency.metadata,
        };
        if v.is_dark(id) {
            drop(v);
            op(None);
            return;
        }
        if delay.is_zero() {
            op(Some(&mut *v));
            return;
        }
        let generation = v.generation(id);
        drop(v);
        self.delayer.run(Box::new(move || {
            thread::sleep(delay);
            let mut v = lock(&volume);
            if v.generation(id) == generation && !v.is_dark(id) {
                op(Some(&mut v));
            } else {
                op(None);
            }
        }));
    }
}

impl Mount {
    /// [`Mount::later`] for an operation that answers nothing but success.
    fn later_empty<F>(&self, cost: Cost, reply: ReplyEmpty, op: F)
    where
        F: FnOnce(&mut Volume) -> crate::volume::Res<()> + Send + 'static,
    {
        self.later(cost, move |v| match v.map(op) {
            None => reply.error(libc::EIO),
            Some(Ok(())) => reply.ok(),
            Some(Err(e)) => reply.error(e),
        });
    }
}

impl Filesystem for Mount {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        // Cached pages are dropped when the attributes show another mount
        // changed the file, as NFS does with its change attribute.
        let _ = config.add_capabilities(fuser::consts::FUSE_AUTO_INVAL_DATA);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let mut v = lock(&self.volume);
        if v.is_dark(self.id) {
            return reply.error(libc::EIO);
        }
        let found = v
            .child(parent, Path::new(name))
            .and_then(|rel| v.node_at(&rel));
        match found {
            Ok((ino, meta)) => reply.entry(&self.caches.entry, &attr(ino, &meta), 0),
            Err(libc::ENOENT) if !self.caches.negative.is_zero() => {
                reply.entry(&self.caches.negative, &negative(), 0)
            }
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        let mut v = lock(&self.volume);
        if v.is_dark(self.id) {
            return reply.error(libc::EIO);
        }
        match v.getattr(ino, fh) {
            Ok(meta) => reply.attr(&self.caches.attr, &attr(ino, &meta)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        // Only the size matters to what the volume models; modes and
        // times are answered as they are.
        let mut v = lock(&self.volume);
        if let Some(len) = size {
            if let Err(e) = v.truncate(self.id, ino, len) {
                return reply.error(e);
            }
        }
        match v.getattr(ino, fh) {
            Ok(meta) => reply.attr(&self.caches.attr, &attr(ino, &meta)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let (id, ttl, name) = (self.id, self.caches.entry, name.to_owned());
        self.later(Cost::Metadata, move |v| match v {
            None => reply.error(libc::EIO),
            Some(v) => match v.mkdir(id, parent, Path::new(&name)) {
                Ok((ino, meta)) => reply.entry(&ttl, &attr(ino, &meta), 0),
                Err(e) => reply.error(e),
            },
        });
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let (id, name) = (self.id, name.to_owned());
        self.later_empty(Cost::Metadata, reply, move |v| {
            v.unlink(id, parent, Path::new(&name))
        });
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let (id, name) = (self.id, name.to_owned());
        self.later_empty(Cost::Metadata, reply, move |v| {
            v.rmdir(id, parent, Path::new(&name))
        });
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags != 0 {
            // RENAME_NOREPLACE / RENAME_EXCHANGE: NFS has neither.
            return reply.error(libc::EINVAL);
        }
        let (id, name, newname) = (self.id, name.to_owned(), newname.to_owned());
        self.later_empty(Cost::Metadata, reply, move |v| {
            v.rename(id, parent, Path::new(&name), newparent, Path::new(&newname))
        });
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let mut v = lock(&self.volume);
        if v.is_dark(self.id) {
            return reply.error(libc::EIO);
        }
        // O_TRUNC arrives as a setattr of the size: fuser does not ask
        // the kernel for atomic O_TRUNC.
        let opened = v.open(self.id, ino, write);
        match opened {
            Ok(fh) => reply.opened(fh, 0),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        match lock(&self.volume).read(self.id, fh, offset.max(0) as u64, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        match lock(&self.volume).write(self.id, fh, offset.max(0) as u64, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lo: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.volume).release(fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        let id = self.id;
        self.later_empty(Cost::Commit, reply, move |v| v.fsync(id, ino));
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        let mut v = lock(&self.volume);
        if v.is_dark(self.id) {
            return reply.error(libc::EIO);
        }
        match v.path(ino) {
            Ok(_) => reply.opened(0, 0),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let mut v = lock(&self.volume);
        if v.is_dark(self.id) {
            return reply.error(libc::EIO);
        }
        let entries = match v.read_dir(ino) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let dots = [(ino, ".".to_string(), true), (ino, "..".to_string(), true)];
        for (i, (child, name, dir)) in dots.into_iter().chain(entries).enumerate() {
            if (i as i64) < offset {
                continue;
            }
            let kind = if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(child, i as i64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        let id = self.id;
        self.later_empty(Cost::Commit, reply, move |v| v.fsync_dir(id, ino));
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        match lock(&self.volume).statfs() {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn access(&mut self, _req: &Request<'_>, _ino: u64, _mask: i32, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (id, ttl, name) = (self.id, self.caches.entry, name.to_owned());
        let exclusive = flags & libc::O_EXCL != 0;
        self.later(Cost::Metadata, move |v| match v {
            None => reply.error(libc::EIO),
            Some(v) => match v.create(id, parent, Path::new(&name), exclusive) {
                Ok((ino, fh, meta)) => reply.created(&ttl, &attr(ino, &meta), 0, fh, 0),
                Err(e) => reply.error(e),
            },
        });
    }
}
