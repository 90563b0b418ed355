//! The filesystem boundary of kaas.
//!
//! Every byte the broker reads from or writes to the shared volume goes through
//! [`Vfs`]. Production uses [`PosixVfs`] on the NFS mount; the simulator uses a
//! model NFS (or [`MemVfs`] for single-host harnesses). The trait deliberately
//! offers only what NFS really provides: there is no "create if missing", no
//! append mode, no recursive delete and no existence check that could be
//! mistaken for a guarantee. Multi-step state changes live in [`durable`],
//! built on the trait alone so every backend gets the same discipline.
//!
//! All paths are relative to the volume root; see [`path`].
//!
//! # Layout
//!
//! | module | what it is |
//! |---|---|
//! | this file | the [`Vfs`] and [`VfsFile`] traits, open options, fresh-read helpers |
//! | [`path`] | volume-relative path checks every backend applies |
//! | `posix` | [`PosixVfs`], the production backend (not in the simulation build) |
//! | `mem` | [`MemVfs`], a single-host in-memory volume for tests |
//! | [`model`] | the model NFS: one server, per-host caches, every NFS fault |
//! | [`durable`] | the multi-step primitives: atomic replace, claims, converge-remove, envelopes |
//! | [`observed`] | a wrapper that reports every call, its time and its errno (the broker's metrics) |
//! | [`fault_point`](mod@fault_point) | `fault_point!`: the step boundaries where the simulator may hold, crash or fail a task |
//! | `testkit` (feature `testkit`) | the contract suite every backend passes, interrupting and counting wrappers, disk bounds |

pub mod durable;
pub mod fault_point;
mod mem;
pub mod model;
pub mod observed;
pub mod path;
#[cfg(not(madsim))]
mod posix;
#[cfg(feature = "testkit")]
pub mod testkit;

use std::io;
use std::path::Path;

use async_trait::async_trait;
use bytes::Bytes;

pub use mem::MemVfs;
#[cfg(not(madsim))]
pub use posix::PosixVfs;

/// A shared volume as seen from one host.
///
/// Answers from `stat` and `read_dir` may be stale on NFS (attribute and
/// lookup caches); only `open` by path is guaranteed fresh (close-to-open).
/// Code that needs a decision must base it on `open`, an exclusive create or
/// a rename, never on a `stat` answer.
#[async_trait]
pub trait Vfs: Send + Sync + 'static {
    /// Opens (and, as `opts` says, creates) a regular file.
    async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>>;

    /// Attributes of a path. May be stale on NFS.
    async fn stat(&self, path: &Path) -> io::Result<Metadata>;

    /// Renames within the volume, replacing `to` if it exists. Atomic on NFS
    /// only when both paths share a directory.
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes a file name (not a directory).
    async fn unlink(&self, path: &Path) -> io::Result<()>;

    /// Creates one directory; `AlreadyExists` if the name is taken. Atomic:
    /// exactly one of several racers succeeds.
    async fn mkdir(&self, path: &Path) -> io::Result<()>;

    /// Removes an empty directory; `DirectoryNotEmpty` otherwise (on NFS this
    /// includes `.nfs*` files left by handles still open somewhere).
    async fn rmdir(&self, path: &Path) -> io::Result<()>;

    /// The entries of a directory, sorted by name, without `.` and `..`.
    /// May be stale on NFS.
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;

    /// Makes the directory's entries (creates, renames, unlinks) durable.
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;

    /// Which simulated host this volume is seen from, for fault points
    /// (`fault_point!`); `None` outside the model NFS.
    fn fault_host(&self) -> Option<u32> {
        None
    }

    /// Notes that a call of kind `op` failed with an answer that was a
    /// retransmission's (NFS answers a retried create EEXIST and a retried
    /// rename ENOENT when the first attempt took effect and its reply was
    /// lost), and that the caller found the call had done its work. Only
    /// counted (the broker's metrics); a backend has nothing to do.
    fn lost_reply(&self, op: observed::Op) {
        let _ = op;
    }

    /// The volume's size and the bytes still available to this broker,
    /// for reports (DescribeLogDirs); `None` where the backend cannot tell.
    /// Never a basis for a decision: a full volume shows as ENOSPC.
    async fn space(&self) -> io::Result<Option<Space>> {
        Ok(None)
    }
}

/// What [`Vfs::space`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    pub total_bytes: u64,
    pub available_bytes: u64,
}

/// An open regular file. Reads through a handle opened earlier may be stale on
/// NFS; open the path again to see another host's closed writes.
#[async_trait]
pub trait VfsFile: Send + Sync {
    /// Reads up to `len` bytes at `offset`; fewer only at end of file.
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes>;

    /// Writes all of `data` at `offset`. Not durable until [`VfsFile::fsync`].
    async fn write_at(&self, offset: u64, data: Bytes) -> io::Result<()>;

    /// Makes every write through this handle durable.
    async fn fsync(&self) -> io::Result<()>;

    /// Writes `chunks` back to back from `offset`, then makes every write
    /// through this handle durable: a log's flush cycle. Backends may do it
    /// in one round trip; the result is the same as the calls one by one.
    async fn write_all_and_sync(&self, mut offset: u64, chunks: Vec<Bytes>) -> io::Result<()> {
        for chunk in chunks {
            let len = chunk.len() as u64;
            self.write_at(offset, chunk).await?;
            offset += len;
        }
        self.fsync().await
    }

    /// Attributes through the handle (size may be stale on NFS).
    async fn stat(&self) -> io::Result<Metadata>;

    /// Closes the handle, reporting write-back errors that NFS defers to close.
    /// Dropping a handle without closing it releases it too, but loses that
    /// report.
    async fn close(self: Box<Self>) -> io::Result<()>;
}

/// How to open a file. There is no append mode: NFS offers no atomic append
/// across hosts, so writers track their own offsets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    pub write: bool,
    pub create: Create,
    /// Truncate to zero on open. Rewriting a shared file in place is how the
    /// torn-assignment bug happened; use `durable::atomic_replace` instead.
    pub truncate: bool,
}

/// Whether `open` may create the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Create {
    /// The file must exist (`NotFound` otherwise).
    #[default]
    Never,
    /// `O_CREAT`: open it, creating it if missing. Not a decision primitive:
    /// two hosts can both believe they created it.
    IfMissing,
    /// `O_CREAT|O_EXCL`: atomic, exactly one racer wins, the rest get
    /// `AlreadyExists`. Beware that a lost reply can answer `AlreadyExists` to
    /// the winner; `durable::claim` handles that.
    Exclusive,
}

impl OpenOptions {
    pub const fn read() -> Self {
        Self {
            write: false,
            create: Create::Never,
            truncate: false,
        }
    }

    /// Read and write an existing file.
    pub const fn write() -> Self {
        Self {
            write: true,
            create: Create::Never,
            truncate: false,
        }
    }

    /// Read and write a file that must not exist yet.
    pub const fn create_new() -> Self {
        Self {
            write: true,
            create: Create::Exclusive,
            truncate: false,
        }
    }

    pub const fn with_create(mut self, create: Create) -> Self {
        self.create = create;
        if !matches!(create, Create::Never) {
            self.write = true;
        }
        self
    }

    pub const fn with_truncate(mut self) -> Self {
        self.truncate = true;
        self.write = true;
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    File,
    Dir,
    /// Symlinks, sockets and the like: kaas never creates them.
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub kind: FileKind,
    pub len: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    pub name: String,
    pub kind: FileKind,
}

/// Reads a whole file through an open handle.
pub async fn read_to_end(file: &dyn VfsFile) -> io::Result<Vec<u8>> {
    const CHUNK: usize = 64 * 1024;
    let mut out = Vec::new();
    loop {
        let chunk = file.read_at(out.len() as u64, CHUNK).await?;
        if chunk.is_empty() {
            return Ok(out);
        }
        out.extend_from_slice(&chunk);
    }
}

/// Whether `path` exists at this moment, by an open (fresh under
/// close-to-open), never by a cached `stat`. Fit for one-way facts that
/// never revert (a newer epoch's claim, a partition that was created); a
/// "missing" answer can be outdated the moment it returns.
pub async fn exists_now(vfs: &dyn Vfs, path: &Path) -> io::Result<bool> {
    let mut tries = 1;
    loop {
        match vfs.open(path, OpenOptions::read()).await {
            Ok(f) => {
                let _ = f.close().await;
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            // What was opened is gone already; ask the name again.
            Err(e) if is_stale(&e) && tries < STALE_RETRIES => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// How many times a read by name looks the name up again after ESTALE.
/// Each try loses only if another host replaced the file between this
/// host's open and its next call on the handle: on real NFS under a busy
/// writer about one open in three (`ci/realnfs/run stale`), so eight
/// losses in a row do not happen while the writer still writes at all.
const STALE_RETRIES: u32 = 8;

fn is_stale(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StaleNetworkFileHandle
}

/// Opens `path` fresh (close-to-open) and reads all of it. ESTALE means
/// the file opened was replaced or removed a moment later, so the name is
/// looked up again: the caller asked for what the name holds now.
pub async fn read_file(vfs: &dyn Vfs, path: &Path) -> io::Result<Vec<u8>> {
    let mut tries = 1;
    loop {
        match read_file_once(vfs, path).await {
            Err(e) if is_stale(&e) && tries < STALE_RETRIES => tries += 1,
            done => return done,
        }
    }
}

async fn read_file_once(vfs: &dyn Vfs, path: &Path) -> io::Result<Vec<u8>> {
    let file = vfs.open(path, OpenOptions::read()).await?;
    let data = read_to_end(file.as_ref()).await;
    let closed = file.close().await;
    let data = data?;
    closed?;
    Ok(data)
}
