//! A `Vfs` that counts what goes through it, for tests that bound work
//! (fsyncs per flush cycle, bytes read by a recovery) instead of timing it.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::{DirEntry, Metadata, OpenOptions, Vfs, VfsFile};

#[derive(Default, Debug)]
pub struct Counts {
    pub opens: AtomicU64,
    pub fsyncs: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
}

impl Counts {
    pub fn get(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::SeqCst)
    }

    pub fn reset(&self) {
        for c in [
            &self.opens,
            &self.fsyncs,
            &self.bytes_read,
            &self.bytes_written,
        ] {
            c.store(0, Ordering::SeqCst);
        }
    }
}

pub struct Counting {
    inner: Arc<dyn Vfs>,
    pub counts: Arc<Counts>,
}

impl Counting {
    pub fn new(inner: Arc<dyn Vfs>) -> Self {
        Self {
            inner,
            counts: Arc::new(Counts::default()),
        }
    }
}

#[async_trait]
impl Vfs for Counting {
    async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        self.counts.opens.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.open(path, opts).await?;
        Ok(Box::new(CountingFile {
            inner,
            counts: self.counts.clone(),
        }))
    }
    async fn stat(&self, path: &Path) -> io::Result<Metadata> {
        self.inner.stat(path).await
    }
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to).await
    }
    async fn unlink(&self, path: &Path) -> io::Result<()> {
        self.inner.unlink(path).await
    }
    async fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.inner.mkdir(path).await
    }
    async fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.inner.rmdir(path).await
    }
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.read_dir(path).await
    }
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path).await
    }
}

struct CountingFile {
    inner: Box<dyn VfsFile>,
    counts: Arc<Counts>,
}

#[async_trait]
impl VfsFile for CountingFile {
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let data = self.inner.read_at(offset, len).await?;
        self.counts
            .bytes_read
            .fetch_add(data.len() as u64, Ordering::SeqCst);
        Ok(data)
    }
    async fn write_at(&self, offset: u64, data: Bytes) -> io::Result<()> {
        self.counts
            .bytes_written
            .fetch_add(data.len() as u64, Ordering::SeqCst);
        self.inner.write_at(offset, data).await
    }
    async fn fsync(&self) -> io::Result<()> {
        self.counts.fsyncs.fetch_add(1, Ordering::SeqCst);
        self.inner.fsync().await
    }
    async fn stat(&self) -> io::Result<Metadata> {
        self.inner.stat().await
    }
    async fn close(self: Box<Self>) -> io::Result<()> {
        self.inner.close().await
    }
}
