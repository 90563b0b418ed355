//! The production backend: POSIX calls on the mounted volume.
//!
//! Every call runs on tokio's blocking pool because an NFS call can block for
//! as long as the server takes (hard mounts never time out). Directory-changing
//! calls fsync the parent directory afterwards, so a created, renamed or
//! removed name is durable when the call returns, as it is on an NFS server
//! (where metadata operations are synchronous).

// This is the one place where the volume is reached with POSIX calls; it is
// never compiled into the simulator (madsim forbids its blocking threads).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::{Create, DirEntry, FileKind, Metadata, OpenOptions, Vfs, VfsFile, path};

#[derive(Clone, Debug)]
pub struct PosixVfs {
    root: Arc<PathBuf>,
    /// Open every file with O_DIRECT (see [`PosixVfs::direct_io`]).
    direct: bool,
}

impl PosixVfs {
    /// Uses an existing, writable directory as the volume root.
    pub fn open_volume(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref();
        let meta = fs::metadata(root).map_err(|e| {
            io::Error::new(e.kind(), format!("data directory {}: {e}", root.display()))
        })?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("data directory {} is not a directory", root.display()),
            ));
        }
        let root = fs::canonicalize(root)?;
        check_writable(&root)?;
        let direct = on_nfs(&root)?;
        Ok(Self {
            root: Arc::new(root),
            direct,
        })
    }

    /// Whether files are opened with O_DIRECT; by default exactly when the
    /// volume is NFS. A Linux NFSv4.1+ client then asks the server for no
    /// delegation (OPEN's WANT_NO_DELEG), and that is the point: a server
    /// that delegated a file to a host must recall it before another host
    /// may rename over, remove or write the file, and when the holder has
    /// lost power nobody answers, so the server waits out its lease (90 s
    /// by default) and every broker renaming a heartbeat or taking over a
    /// partition waits with it. Local filesystems hand out no delegations
    /// and would refuse unaligned direct I/O, which NFS allows.
    pub fn direct_io(&self) -> bool {
        self.direct
    }

    /// Overrides [`PosixVfs::direct_io`] (an operator's choice; the
    /// real-NFS trials measure both).
    pub fn with_direct_io(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }

    /// Like [`PosixVfs::open_volume`], but first creates `root` (one level)
    /// if it is missing. Only for the laptop default: a missing explicit data
    /// directory usually means a volume that is not mounted, and writing to
    /// the container's own disk instead would lose data silently.
    pub fn open_or_create_local(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref();
        match fs::create_dir(root) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("creating data directory {}: {e}", root.display()),
                ));
            }
        }
        Self::open_volume(root)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn resolve(&self, rel: &Path) -> io::Result<PathBuf> {
        path::check(rel)?;
        Ok(self.root.join(rel))
    }

    async fn blocking<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        run_blocking(f).await
    }
}

async fn run_blocking<T, F>(f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("blocking filesystem task failed: {e}")))?
}

/// `root` as the C string the libc calls below take.
fn c_path(root: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "data directory path has a NUL"))
}

fn check_writable(root: &Path) -> io::Result<()> {
    let c_path = c_path(root)?;
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::access(c_path.as_ptr(), libc::W_OK | libc::X_OK) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("data directory {} is not writable: {e}", root.display()),
        ));
    }
    Ok(())
}

/// Whether `root` is on an NFS mount (of any version), by statfs's type.
fn on_nfs(root: &Path) -> io::Result<bool> {
    const NFS_SUPER_MAGIC: i64 = 0x6969;
    let c_path = c_path(root)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `st` is
    // written by statfs before it is read, and only when it returns 0.
    let st = unsafe {
        if libc::statfs(c_path.as_ptr(), st.as_mut_ptr()) != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("statfs of data directory {}: {e}", root.display()),
            ));
        }
        st.assume_init()
    };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target
    Ok(st.f_type as i64 == NFS_SUPER_MAGIC)
}

fn statvfs(root: &Path) -> io::Result<crate::Space> {
    let c_path = c_path(root)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `st` is
    // written by statvfs before it is read, and only when it returns 0.
    let st = unsafe {
        if libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        st.assume_init()
    };
    let block = st.f_frsize as u64;
    Ok(crate::Space {
        total_bytes: (st.f_blocks as u64).saturating_mul(block),
        available_bytes: (st.f_bavail as u64).saturating_mul(block),
    })
}

/// Keeps the error kind (callers branch on it) and adds what was being done.
fn ctx<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{op} {}: {e}", path.display()))
}

fn sync_dir_blocking(dir: &Path) -> io::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(ctx("sync directory", dir))
}

fn parent_of(full: &Path) -> &Path {
    full.parent().unwrap_or(full)
}

fn kind_of(ft: fs::FileType) -> FileKind {
    if ft.is_file() {
        FileKind::File
    } else if ft.is_dir() {
        FileKind::Dir
    } else {
        FileKind::Other
    }
}

#[async_trait]
impl Vfs for PosixVfs {
    async fn open(&self, rel: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        let full = self.resolve(rel)?;
        let direct = if self.direct { libc::O_DIRECT } else { 0 };
        let file = self
            .blocking(move || {
                let mut o = fs::OpenOptions::new();
                o.read(true).write(opts.write).truncate(opts.truncate);
                match opts.create {
                    Create::Never => {}
                    Create::IfMissing => {
                        o.create(true);
                    }
                    Create::Exclusive => {
                        o.create_new(true);
                    }
                }
                // Never hand a directory or a FIFO out as a file.
                o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | direct);
                let file = o.open(&full).map_err(ctx("open", &full))?;
                let meta = match file.metadata() {
                    Ok(m) => m,
                    // NFS: the file opened was replaced or removed by another
                    // host before this fstat (the campaign saw it for up to
                    // 29 s in a row). A stat by path makes the kernel look
                    // the name up again, so the caller's next open by name
                    // finds what it names now; this handle still reads the
                    // version it opened, or answers ESTALE itself.
                    Err(e) if e.raw_os_error() == Some(libc::ESTALE) => {
                        let looked_up = fs::symlink_metadata(&full);
                        // Logged so a real-NFS run can count these and see
                        // whether the stat by path healed the name.
                        tracing::warn!(path = %full.display(), healed = looked_up.is_ok(),
                            "fstat after open: Stale file handle (ESTALE); looked the name up again");
                        looked_up.map_err(ctx("stat", &full))?
                    }
                    Err(e) => return Err(ctx("stat", &full)(e)),
                };
                if !meta.is_file() {
                    return Err(io::Error::new(
                        if meta.is_dir() {
                            io::ErrorKind::IsADirectory
                        } else {
                            io::ErrorKind::InvalidInput
                        },
                        format!("open {}: not a regular file", full.display()),
                    ));
                }
                if opts.create != Create::Never {
                    sync_dir_blocking(parent_of(&full))?;
                }
                Ok(PosixFile {
                    file: Arc::new(file),
                    path: Arc::new(full),
                })
            })
            .await?;
        Ok(Box::new(file))
    }

    async fn stat(&self, rel: &Path) -> io::Result<Metadata> {
        let full = self.resolve(rel)?;
        self.blocking(move || {
            let m = fs::symlink_metadata(&full).map_err(ctx("stat", &full))?;
            Ok(Metadata {
                kind: kind_of(m.file_type()),
                len: m.len(),
            })
        })
        .await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (self.resolve(from)?, self.resolve(to)?);
        self.blocking(move || {
            fs::rename(&from, &to).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("rename {} -> {}: {e}", from.display(), to.display()),
                )
            })?;
            sync_dir_blocking(parent_of(&to))?;
            if parent_of(&from) != parent_of(&to) {
                sync_dir_blocking(parent_of(&from))?;
            }
            Ok(())
        })
        .await
    }

    async fn unlink(&self, rel: &Path) -> io::Result<()> {
        let full = self.resolve(rel)?;
        self.blocking(move || {
            fs::remove_file(&full).map_err(ctx("unlink", &full))?;
            sync_dir_blocking(parent_of(&full))
        })
        .await
    }

    async fn mkdir(&self, rel: &Path) -> io::Result<()> {
        let full = self.resolve(rel)?;
        self.blocking(move || {
            fs::create_dir(&full).map_err(ctx("mkdir", &full))?;
            sync_dir_blocking(parent_of(&full))
        })
        .await
    }

    async fn rmdir(&self, rel: &Path) -> io::Result<()> {
        let full = self.resolve(rel)?;
        self.blocking(move || {
            fs::remove_dir(&full).map_err(ctx("rmdir", &full))?;
            sync_dir_blocking(parent_of(&full))
        })
        .await
    }

    async fn read_dir(&self, rel: &Path) -> io::Result<Vec<DirEntry>> {
        let full = self.resolve(rel)?;
        self.blocking(move || {
            let mut out = Vec::new();
            for entry in fs::read_dir(&full).map_err(ctx("read_dir", &full))? {
                let entry = entry.map_err(ctx("read_dir", &full))?;
                let name = entry.file_name().into_string().map_err(|raw| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "read_dir {}: entry {raw:?} is not UTF-8; kaas never writes such names",
                            full.display()
                        ),
                    )
                })?;
                let kind = entry
                    .file_type()
                    .map(kind_of)
                    .map_err(ctx("read_dir", &full))?;
                out.push(DirEntry { name, kind });
            }
            out.sort();
            Ok(out)
        })
        .await
    }

    async fn sync_dir(&self, rel: &Path) -> io::Result<()> {
        let full = self.resolve(rel)?;
        self.blocking(move || sync_dir_blocking(&full)).await
    }

    async fn space(&self) -> io::Result<Option<crate::Space>> {
        let root = self.root.clone();
        self.blocking(move || statvfs(&root).map(Some)).await
    }
}

struct PosixFile {
    file: Arc<File>,
    path: Arc<PathBuf>,
}

#[async_trait]
impl VfsFile for PosixFile {
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let (file, path) = (self.file.clone(), self.path.clone());
        run_blocking(move || {
            // Read into spare capacity: zeroing a buffer that pread then
            // fills costs a pass over every byte a fetch reads.
            let mut buf: Vec<u8> = Vec::with_capacity(len);
            while buf.len() < len {
                let (filled, at) = (buf.len(), offset + buf.len() as u64);
                let spare = &mut buf.spare_capacity_mut()[..len - filled];
                let at = libc::off_t::try_from(at).map_err(|_| {
                    ctx("read", &path)(io::Error::from(io::ErrorKind::InvalidInput))
                })?;
                // SAFETY: pread writes at most `spare.len()` bytes to
                // `spare`, memory this Vec owns and does not read meanwhile.
                let n = unsafe {
                    libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), at)
                };
                match n {
                    0 => break,
                    n if n > 0 => {
                        // SAFETY: the kernel initialised the `n` bytes
                        // after the filled ones (n <= spare.len()).
                        unsafe { buf.set_len(filled + n as usize) }
                    }
                    _ => {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted {
                            return Err(ctx("read", &path)(e));
                        }
                    }
                }
            }
            Ok(Bytes::from(buf))
        })
        .await
    }

    async fn write_at(&self, offset: u64, data: Bytes) -> io::Result<()> {
        let (file, path) = (self.file.clone(), self.path.clone());
        run_blocking(move || {
            file.write_all_at(&data, offset)
                .map_err(ctx("write", &path))
        })
        .await
    }

    async fn fsync(&self) -> io::Result<()> {
        let (file, path) = (self.file.clone(), self.path.clone());
        // fdatasync: the data and what is needed to read it back (the size),
        // not timestamps nobody reads. On NFS both become one COMMIT.
        run_blocking(move || file.sync_data().map_err(ctx("fsync", &path))).await
    }

    async fn write_all_and_sync(&self, offset: u64, chunks: Vec<Bytes>) -> io::Result<()> {
        let (file, path) = (self.file.clone(), self.path.clone());
        // One trip to the blocking pool for the whole flush cycle.
        run_blocking(move || {
            write_all_vectored_at(&file, offset, &chunks).map_err(ctx("write", &path))?;
            file.sync_data().map_err(ctx("fsync", &path))
        })
        .await
    }

    async fn stat(&self) -> io::Result<Metadata> {
        let (file, path) = (self.file.clone(), self.path.clone());
        run_blocking(move || {
            let m = file.metadata().map_err(ctx("stat", &path))?;
            Ok(Metadata {
                kind: kind_of(m.file_type()),
                len: m.len(),
            })
        })
        .await
    }

    async fn close(self: Box<Self>) -> io::Result<()> {
        let PosixFile { file, path } = *self;
        run_blocking(move || {
            // Every operation awaited its blocking task, so no clone is left.
            let Ok(file) = Arc::try_unwrap(file) else {
                return Ok(());
            };
            let fd = file.into_raw_fd();
            // SAFETY: `fd` came from `into_raw_fd`, so we own it and close it once.
            // std's Drop would ignore the result; NFS reports deferred write errors here.
            if unsafe { libc::close(fd) } != 0 {
                return Err(ctx("close", &path)(io::Error::last_os_error()));
            }
            Ok(())
        })
        .await
    }
}

/// Writes `chunks` one after another from `offset`, as few `pwritev` calls
/// as the kernel allows: a flush cycle is many batches, each a stamped
/// header and its records as received.
fn write_all_vectored_at(file: &File, mut offset: u64, chunks: &[Bytes]) -> io::Result<()> {
    // Linux's IOV_MAX.
    const MAX_SLICES: usize = 1024;
    let mut slices: Vec<io::IoSlice<'_>> = chunks
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| io::IoSlice::new(c))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = rest.len().min(MAX_SLICES);
        let at = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset past off_t"))?;
        // SAFETY: IoSlice is ABI-compatible with iovec on Unix, and the n
        // slices borrow live buffers for the duration of the call.
        let written = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                rest.as_ptr().cast::<libc::iovec>(),
                n as libc::c_int,
                at,
            )
        };
        if written < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if written == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        offset += written as u64;
        io::IoSlice::advance_slices(&mut rest, written as usize);
    }
    Ok(())
}
