//! A `Vfs` that stops working after a given number of mutating operations,
//! the way a broker crash stops a multi-step change half-way.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::{Create, DirEntry, Metadata, OpenOptions, Vfs, VfsFile};

/// Lets the first `budget` mutating operations through to `inner`, then fails
/// every operation (reads included, as after a crash) with `Interrupted`.
pub struct Interrupting {
    inner: Arc<dyn Vfs>,
    budget: usize,
    used: Arc<AtomicUsize>,
}

impl Interrupting {
    pub fn new(inner: Arc<dyn Vfs>, budget: usize) -> Self {
        Self {
            inner,
            budget,
            used: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// True once an operation was refused, i.e. the run was really cut short.
    pub fn tripped(&self) -> bool {
        self.used.load(Ordering::SeqCst) > self.budget
    }
}

fn spend(used: &AtomicUsize, budget: usize) -> io::Result<()> {
    if used.fetch_add(1, Ordering::SeqCst) < budget {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "interrupted by test",
        ))
    }
}

fn alive(used: &AtomicUsize, budget: usize) -> io::Result<()> {
    if used.load(Ordering::SeqCst) <= budget {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "interrupted by test",
        ))
    }
}

#[async_trait]
impl Vfs for Interrupting {
    async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        if opts.create != Create::Never || opts.truncate {
            spend(&self.used, self.budget)?;
        } else {
            alive(&self.used, self.budget)?;
        }
        let file = self.inner.open(path, opts).await?;
        Ok(Box::new(InterruptingFile {
            inner: file,
            budget: self.budget,
            used: self.used.clone(),
        }))
    }
    async fn stat(&self, path: &Path) -> io::Result<Metadata> {
        alive(&self.used, self.budget)?;
        self.inner.stat(path).await
    }
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.rename(from, to).await
    }
    async fn unlink(&self, path: &Path) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.unlink(path).await
    }
    async fn mkdir(&self, path: &Path) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.mkdir(path).await
    }
    async fn rmdir(&self, path: &Path) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.rmdir(path).await
    }
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        alive(&self.used, self.budget)?;
        self.inner.read_dir(path).await
    }
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.sync_dir(path).await
    }
}

struct InterruptingFile {
    inner: Box<dyn VfsFile>,
    budget: usize,
    used: Arc<AtomicUsize>,
}

#[async_trait]
impl VfsFile for InterruptingFile {
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        alive(&self.used, self.budget)?;
        self.inner.read_at(offset, len).await
    }
    async fn write_at(&self, offset: u64, data: Bytes) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.write_at(offset, data).await
    }
    async fn fsync(&self) -> io::Result<()> {
        spend(&self.used, self.budget)?;
        self.inner.fsync().await
    }
    async fn stat(&self) -> io::Result<Metadata> {
        alive(&self.used, self.budget)?;
        self.inner.stat().await
    }
    async fn close(self: Box<Self>) -> io::Result<()> {
        // Closing releases the handle even after a crash, as the kernel would.
        self.inner.close().await
    }
}
