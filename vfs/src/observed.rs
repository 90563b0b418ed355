//! A [`Vfs`] that tells an [`Observer`] about every call: which one, how
//! long it took, how it failed, and how many `.nfs` files a listing
//! showed. It changes nothing about the calls themselves (the broker's
//! metrics hang on it, in production and in the simulator alike).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::time::Instant;

use crate::durable::is_nfs_silly_rename;
use crate::{DirEntry, Metadata, OpenOptions, Vfs, VfsFile};

/// The calls of [`Vfs`] and [`VfsFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Open,
    Stat,
    Rename,
    Unlink,
    Mkdir,
    Rmdir,
    ReadDir,
    SyncDir,
    Read,
    Write,
    Fsync,
    WriteAndSync,
    FileStat,
    Close,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Stat => "stat",
            Op::Rename => "rename",
            Op::Unlink => "unlink",
            Op::Mkdir => "mkdir",
            Op::Rmdir => "rmdir",
            Op::ReadDir => "read_dir",
            Op::SyncDir => "sync_dir",
            Op::Read => "read",
            Op::Write => "write",
            Op::Fsync => "fsync",
            Op::WriteAndSync => "write_and_sync",
            Op::FileStat => "file_stat",
            Op::Close => "close",
        }
    }
}

pub trait Observer: Send + Sync + 'static {
    fn done(&self, op: Op, elapsed: Duration, outcome: Result<(), &io::Error>);
    fn nfs_files_seen(&self, n: usize);
    /// A call of kind `op` whose reply was lost, found to have taken
    /// effect (see [`Vfs::lost_reply`]).
    fn lost_reply(&self, op: Op) {
        let _ = op;
    }
    /// A call that took [`SLOW_CALL`] or longer, and the file it was on: on
    /// NFS, a server recalling a dead host's delegation before it lets
    /// another host change the file waits out that host's lease.
    fn slow(&self, op: Op, path: &Path, elapsed: Duration) {
        let _ = (op, path, elapsed);
    }
}

/// How long a volume call may take before it is reported as slow.
pub const SLOW_CALL: Duration = Duration::from_secs(5);

/// The errno an error stands for, as far as its kind tells (the model NFS
/// reports EIO as an uncategorised error, like std does for a real EIO).
pub fn errno(e: &io::Error) -> &'static str {
    use io::ErrorKind as K;
    if e.raw_os_error() == Some(5) {
        return "EIO";
    }
    match e.kind() {
        K::NotFound => "ENOENT",
        K::AlreadyExists => "EEXIST",
        K::DirectoryNotEmpty => "ENOTEMPTY",
        K::StaleNetworkFileHandle => "ESTALE",
        K::StorageFull => "ENOSPC",
        K::QuotaExceeded => "EDQUOT",
        K::ResourceBusy => "EBUSY",
        K::NotADirectory => "ENOTDIR",
        K::IsADirectory => "EISDIR",
        K::InvalidInput => "EINVAL",
        K::PermissionDenied => "EACCES",
        K::TimedOut => "ETIMEDOUT",
        K::Interrupted => "EINTR",
        _ => "other",
    }
}

pub struct Observed {
    inner: Arc<dyn Vfs>,
    observer: Arc<dyn Observer>,
}

impl Observed {
    pub fn new(inner: Arc<dyn Vfs>, observer: Arc<dyn Observer>) -> Self {
        Self { inner, observer }
    }
}

/// Times `call` on `path` and reports it as `op`.
async fn timed<T>(
    observer: &dyn Observer,
    (op, path): (Op, &Path),
    call: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let start = Instant::now();
    let out = call.await;
    let elapsed = start.elapsed();
    observer.done(op, elapsed, out.as_ref().map(|_| ()));
    if elapsed >= SLOW_CALL {
        observer.slow(op, path, elapsed);
    }
    out
}

#[async_trait]
impl Vfs for Observed {
    async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        let inner = timed(
            &*self.observer,
            (Op::Open, path),
            self.inner.open(path, opts),
        )
        .await?;
        Ok(Box::new(ObservedFile {
            inner,
            observer: self.observer.clone(),
            path: path.to_owned(),
        }))
    }
    async fn stat(&self, path: &Path) -> io::Result<Metadata> {
        timed(&*self.observer, (Op::Stat, path), self.inner.stat(path)).await
    }
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        timed(
            &*self.observer,
            (Op::Rename, to),
            self.inner.rename(from, to),
        )
        .await
    }
    async fn unlink(&self, path: &Path) -> io::Result<()> {
        timed(&*self.observer, (Op::Unlink, path), self.inner.unlink(path)).await
    }
    async fn mkdir(&self, path: &Path) -> io::Result<()> {
        timed(&*self.observer, (Op::Mkdir, path), self.inner.mkdir(path)).await
    }
    async fn rmdir(&self, path: &Path) -> io::Result<()> {
        timed(&*self.observer, (Op::Rmdir, path), self.inner.rmdir(path)).await
    }
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let entries = timed(
            &*self.observer,
            (Op::ReadDir, path),
            self.inner.read_dir(path),
        )
        .await?;
        let silly = entries
            .iter()
            .filter(|e| is_nfs_silly_rename(&e.name))
            .count();
        if silly > 0 {
            self.observer.nfs_files_seen(silly);
        }
        Ok(entries)
    }
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        timed(
            &*self.observer,
            (Op::SyncDir, path),
            self.inner.sync_dir(path),
        )
        .await
    }
    fn fault_host(&self) -> Option<u32> {
        self.inner.fault_host()
    }
    fn lost_reply(&self, op: Op) {
        self.observer.lost_reply(op);
        self.inner.lost_reply(op);
    }
    async fn space(&self) -> io::Result<Option<crate::Space>> {
        self.inner.space().await
    }
}

struct ObservedFile {
    inner: Box<dyn VfsFile>,
    observer: Arc<dyn Observer>,
    path: std::path::PathBuf,
}

#[async_trait]
impl VfsFile for ObservedFile {
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        timed(
            &*self.observer,
            (Op::Read, &self.path),
            self.inner.read_at(offset, len),
        )
        .await
    }
    async fn write_at(&self, offset: u64, data: Bytes) -> io::Result<()> {
        timed(
            &*self.observer,
            (Op::Write, &self.path),
            self.inner.write_at(offset, data),
        )
        .await
    }
    async fn fsync(&self) -> io::Result<()> {
        timed(&*self.observer, (Op::Fsync, &self.path), self.inner.fsync()).await
    }
    async fn write_all_and_sync(&self, offset: u64, chunks: Vec<Bytes>) -> io::Result<()> {
        // The backend's own (one vectored write on POSIX), not the default.
        let call = self.inner.write_all_and_sync(offset, chunks);
        timed(&*self.observer, (Op::WriteAndSync, &self.path), call).await
    }
    async fn stat(&self) -> io::Result<Metadata> {
        timed(
            &*self.observer,
            (Op::FileStat, &self.path),
            self.inner.stat(),
        )
        .await
    }
    async fn close(self: Box<Self>) -> io::Result<()> {
        let (observer, path) = (self.observer.clone(), self.path.clone());
        timed(&*observer, (Op::Close, &path), self.inner.close()).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::MemVfs;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Observer for Log {
        fn done(&self, op: Op, _: Duration, outcome: Result<(), &io::Error>) {
            let what = outcome.err().map_or("ok", errno);
            self.0.lock().unwrap().push(format!("{} {what}", op.name()));
        }
        fn nfs_files_seen(&self, n: usize) {
            self.0.lock().unwrap().push(format!("nfs files {n}"));
        }
    }

    #[tokio::test]
    async fn every_call_is_reported_with_its_errno() {
        let log = Arc::new(Log::default());
        let vfs = Observed::new(Arc::new(MemVfs::new()), log.clone());
        let p = Path::new("a");
        let f = vfs.open(p, OpenOptions::create_new()).await.unwrap();
        f.write_all_and_sync(0, vec![Bytes::from_static(b"xy")])
            .await
            .unwrap();
        f.close().await.unwrap();
        assert!(vfs.open(p, OpenOptions::create_new()).await.is_err());
        vfs.rename(p, Path::new(".nfs0000000000000001"))
            .await
            .unwrap();
        assert_eq!(vfs.read_dir(Path::new("")).await.unwrap().len(), 1);
        assert!(vfs.unlink(p).await.is_err());
        assert_eq!(
            *log.0.lock().unwrap(),
            [
                "open ok",
                "write_and_sync ok",
                "close ok",
                "open EEXIST",
                "rename ok",
                "read_dir ok",
                "nfs files 1",
                "unlink ENOENT",
            ]
        );
    }
}
