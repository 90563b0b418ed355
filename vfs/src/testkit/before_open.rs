//! A `Vfs` that runs something else first, just before the first open of
//! one path: how a test puts a rival's whole step into the window between
//! two steps of the code under test (a read that races a writer, a release
//! that races a claim).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::{Create, DirEntry, Metadata, OpenOptions, Vfs, VfsFile};

type Hook =
    Box<dyn FnOnce(Arc<dyn Vfs>) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>> + Send>;

pub struct BeforeOpen {
    inner: Arc<dyn Vfs>,
    path: PathBuf,
    creating_only: bool,
    /// Matching opens still to pass before the hook runs.
    skip: Mutex<usize>,
    hook: Mutex<Option<Hook>>,
}

impl BeforeOpen {
    /// Runs `hook` on `inner` once, before the first open of `path`.
    pub fn new<F, Fut>(inner: Arc<dyn Vfs>, path: impl Into<PathBuf>, hook: F) -> Self
    where
        F: FnOnce(Arc<dyn Vfs>) -> Fut + Send + 'static,
        Fut: Future<Output = io::Result<()>> + Send + 'static,
    {
        Self {
            inner,
            path: path.into(),
            creating_only: false,
            skip: Mutex::new(0),
            hook: Mutex::new(Some(Box::new(move |v| Box::pin(hook(v))))),
        }
    }

    /// Fires only at an open that may create the file (a claim, a write),
    /// not at the reads and existence probes before it.
    pub fn creating(mut self) -> Self {
        self.creating_only = true;
        self
    }

    /// Runs the hook before the `n`-th matching open (from 1), not the
    /// first: a window later in the same step (a claim's read-back after
    /// its create).
    pub fn at_open(self, n: usize) -> Self {
        *self.skip.lock().unwrap_or_else(|p| p.into_inner()) = n.saturating_sub(1);
        self
    }

    /// Whether the hook has run.
    pub fn fired(&self) -> bool {
        self.hook
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

#[async_trait]
impl Vfs for BeforeOpen {
    async fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        if path == self.path && !(self.creating_only && opts.create == Create::Never) {
            let early = {
                let mut skip = self.skip.lock().unwrap_or_else(|p| p.into_inner());
                let early = *skip > 0;
                *skip = skip.saturating_sub(1);
                early
            };
            let hook = if early {
                None
            } else {
                self.hook.lock().unwrap_or_else(|p| p.into_inner()).take()
            };
            if let Some(hook) = hook {
                hook(self.inner.clone()).await?;
            }
        }
        self.inner.open(path, opts).await
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
