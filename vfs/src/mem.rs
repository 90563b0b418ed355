//! An in-memory volume with the semantics of one local POSIX filesystem.
//!
//! It is what a single host sees when nobody else touches the volume: no
//! caches, no `.nfs` files, unlinked files stay readable through open handles.
//! It lets the simulator run broker code without system threads and gives the
//! contract suite a fast second backend; the hostile multi-host behaviour
//! belongs to the model NFS. Deterministic: ordered maps only.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

use crate::{Create, DirEntry, FileKind, Metadata, OpenOptions, Vfs, VfsFile, path};

type Ino = u64;
const ROOT: Ino = 0;

#[derive(Clone, Default)]
pub struct MemVfs {
    state: Arc<Mutex<State>>,
}

#[derive(Clone)]
struct State {
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    used_bytes: u64,
    capacity: u64,
}

#[derive(Clone)]
enum Inode {
    File {
        data: Vec<u8>,
        links: u32,
        opens: u32,
    },
    Dir {
        entries: BTreeMap<String, Ino>,
    },
}

impl Default for State {
    fn default() -> Self {
        let mut inodes = BTreeMap::new();
        inodes.insert(
            ROOT,
            Inode::Dir {
                entries: BTreeMap::new(),
            },
        );
        Self {
            inodes,
            next_ino: ROOT + 1,
            used_bytes: 0,
            capacity: u64::MAX,
        }
    }
}

fn err(kind: io::ErrorKind, op: &str, path: &Path) -> io::Error {
    io::Error::new(kind, format!("{op} {}: {kind}", path.display()))
}

impl MemVfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// A volume that answers `StorageFull` once `bytes` of file data are stored.
    pub fn with_capacity(bytes: u64) -> Self {
        let vfs = Self::default();
        vfs.lock().capacity = bytes;
        vfs
    }

    /// Changes the capacity (an operator grew the volume, or a test filled
    /// it): writes that grow files fail with `StorageFull` past it.
    pub fn set_capacity(&self, bytes: u64) {
        self.lock().capacity = bytes;
    }

    /// Bytes of file data stored now.
    pub fn used_bytes(&self) -> u64 {
        self.lock().used_bytes
    }

    /// An independent copy of the volume as it is now: a fuzz target or
    /// test prepares a volume once and damages a fresh copy per case.
    pub fn snapshot(&self) -> Self {
        Self {
            state: Arc::new(Mutex::new(self.lock().clone())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in
        // a way later calls rely on, so poisoning is not fatal here.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn dir_entries(&self, ino: Ino, op: &str, p: &Path) -> io::Result<&BTreeMap<String, Ino>> {
        match self.inodes.get(&ino) {
            Some(Inode::Dir { entries }) => Ok(entries),
            Some(Inode::File { .. }) => Err(err(io::ErrorKind::NotADirectory, op, p)),
            None => Err(err(io::ErrorKind::NotFound, op, p)),
        }
    }

    fn dir_entries_mut(&mut self, ino: Ino) -> &mut BTreeMap<String, Ino> {
        match self.inodes.get_mut(&ino) {
            Some(Inode::Dir { entries }) => entries,
            _ => unreachable!("caller resolved {ino} as a directory"),
        }
    }

    fn lookup(&self, p: &Path, op: &str) -> io::Result<Ino> {
        path::check(p)?;
        let mut ino = ROOT;
        for c in p.components() {
            let Component::Normal(name) = c else {
                continue;
            };
            let name = name.to_str().unwrap_or_default();
            ino = *self
                .dir_entries(ino, op, p)?
                .get(name)
                .ok_or_else(|| err(io::ErrorKind::NotFound, op, p))?;
        }
        Ok(ino)
    }

    /// The parent directory's inode and the final name.
    fn lookup_parent<'p>(&self, p: &'p Path, op: &str) -> io::Result<(Ino, &'p str)> {
        path::check(p)?;
        let name = path::file_name(p)?;
        let dir = self.lookup(path::parent(p), op)?;
        self.dir_entries(dir, op, p)?;
        Ok((dir, name))
    }

    fn alloc(&mut self, inode: Inode) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, inode);
        ino
    }

    fn metadata(&self, ino: Ino) -> Metadata {
        match &self.inodes[&ino] {
            Inode::File { data, .. } => Metadata {
                kind: FileKind::File,
                len: data.len() as u64,
            },
            Inode::Dir { .. } => Metadata {
                kind: FileKind::Dir,
                len: 0,
            },
        }
    }

    /// Drops a link to `ino`, freeing it once neither a name nor a handle holds it.
    fn drop_link(&mut self, ino: Ino) {
        if let Some(Inode::File { links, opens, .. }) = self.inodes.get_mut(&ino) {
            *links = links.saturating_sub(1);
            if *links == 0 && *opens == 0 {
                self.free(ino);
            }
        } else {
            self.inodes.remove(&ino);
        }
    }

    fn free(&mut self, ino: Ino) {
        if let Some(Inode::File { data, .. }) = self.inodes.remove(&ino) {
            self.used_bytes -= data.len() as u64;
        }
    }
}

#[async_trait]
impl Vfs for MemVfs {
    async fn open(&self, p: &Path, opts: OpenOptions) -> io::Result<Box<dyn VfsFile>> {
        let mut st = self.lock();
        let (dir, name) = st.lookup_parent(p, "open")?;
        let existing = st.dir_entries(dir, "open", p)?.get(name).copied();
        let ino = match (existing, opts.create) {
            (Some(_), Create::Exclusive) => {
                return Err(err(io::ErrorKind::AlreadyExists, "open", p));
            }
            (Some(ino), _) => ino,
            (None, Create::Never) => return Err(err(io::ErrorKind::NotFound, "open", p)),
            (None, _) => {
                let ino = st.alloc(Inode::File {
                    data: Vec::new(),
                    links: 1,
                    opens: 0,
                });
                st.dir_entries_mut(dir).insert(name.to_owned(), ino);
                ino
            }
        };
        let mut freed = 0;
        match st.inodes.get_mut(&ino) {
            Some(Inode::File { data, opens, .. }) => {
                *opens += 1;
                if opts.truncate {
                    freed = data.len() as u64;
                    data.clear();
                }
            }
            _ => return Err(err(io::ErrorKind::IsADirectory, "open", p)),
        }
        st.used_bytes -= freed;
        Ok(Box::new(MemFile {
            vfs: self.clone(),
            ino,
            writable: opts.write,
            path: p.display().to_string(),
            closed: false,
        }))
    }

    async fn stat(&self, p: &Path) -> io::Result<Metadata> {
        let st = self.lock();
        let ino = st.lookup(p, "stat")?;
        Ok(st.metadata(ino))
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let (from_dir, from_name) = st.lookup_parent(from, "rename")?;
        let (to_dir, to_name) = st.lookup_parent(to, "rename")?;
        let ino = *st
            .dir_entries(from_dir, "rename", from)?
            .get(from_name)
            .ok_or_else(|| err(io::ErrorKind::NotFound, "rename", from))?;
        if from_dir == to_dir && from_name == to_name {
            return Ok(());
        }
        let moving_dir = matches!(st.inodes[&ino], Inode::Dir { .. });
        if moving_dir && is_inside(&st, to_dir, ino) {
            return Err(err(io::ErrorKind::InvalidInput, "rename into itself", to));
        }
        if let Some(&old) = st.dir_entries(to_dir, "rename", to)?.get(to_name) {
            match (&st.inodes[&old], moving_dir) {
                (Inode::Dir { entries }, true) if !entries.is_empty() => {
                    return Err(err(io::ErrorKind::DirectoryNotEmpty, "rename", to));
                }
                (Inode::Dir { .. }, false) => {
                    return Err(err(io::ErrorKind::IsADirectory, "rename", to));
                }
                (Inode::File { .. }, true) => {
                    return Err(err(io::ErrorKind::NotADirectory, "rename", to));
                }
                _ => {}
            }
            st.drop_link(old);
        }
        st.dir_entries_mut(from_dir).remove(from_name);
        st.dir_entries_mut(to_dir).insert(to_name.to_owned(), ino);
        Ok(())
    }

    async fn unlink(&self, p: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let (dir, name) = st.lookup_parent(p, "unlink")?;
        let ino = *st
            .dir_entries(dir, "unlink", p)?
            .get(name)
            .ok_or_else(|| err(io::ErrorKind::NotFound, "unlink", p))?;
        if matches!(st.inodes[&ino], Inode::Dir { .. }) {
            return Err(err(io::ErrorKind::IsADirectory, "unlink", p));
        }
        st.dir_entries_mut(dir).remove(name);
        st.drop_link(ino);
        Ok(())
    }

    async fn mkdir(&self, p: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let (dir, name) = st.lookup_parent(p, "mkdir")?;
        if st.dir_entries(dir, "mkdir", p)?.contains_key(name) {
            return Err(err(io::ErrorKind::AlreadyExists, "mkdir", p));
        }
        let ino = st.alloc(Inode::Dir {
            entries: BTreeMap::new(),
        });
        st.dir_entries_mut(dir).insert(name.to_owned(), ino);
        Ok(())
    }

    async fn rmdir(&self, p: &Path) -> io::Result<()> {
        let mut st = self.lock();
        let (dir, name) = st.lookup_parent(p, "rmdir")?;
        let ino = *st
            .dir_entries(dir, "rmdir", p)?
            .get(name)
            .ok_or_else(|| err(io::ErrorKind::NotFound, "rmdir", p))?;
        if !st.dir_entries(ino, "rmdir", p)?.is_empty() {
            return Err(err(io::ErrorKind::DirectoryNotEmpty, "rmdir", p));
        }
        st.dir_entries_mut(dir).remove(name);
        st.inodes.remove(&ino);
        Ok(())
    }

    async fn read_dir(&self, p: &Path) -> io::Result<Vec<DirEntry>> {
        let st = self.lock();
        let ino = st.lookup(p, "read_dir")?;
        Ok(st
            .dir_entries(ino, "read_dir", p)?
            .iter()
            .map(|(name, ino)| DirEntry {
                name: name.clone(),
                kind: st.metadata(*ino).kind,
            })
            .collect())
    }

    async fn sync_dir(&self, p: &Path) -> io::Result<()> {
        let st = self.lock();
        let ino = st.lookup(p, "sync_dir")?;
        st.dir_entries(ino, "sync_dir", p).map(|_| ())
    }

    /// The capacity and what is left of it, once one was set.
    async fn space(&self) -> io::Result<Option<crate::Space>> {
        let st = self.lock();
        Ok((st.capacity != u64::MAX).then(|| crate::Space {
            total_bytes: st.capacity,
            available_bytes: st.capacity.saturating_sub(st.used_bytes),
        }))
    }
}

fn is_inside(st: &State, dir: Ino, ancestor: Ino) -> bool {
    if dir == ancestor {
        return true;
    }
    let Some(Inode::Dir { entries }) = st.inodes.get(&ancestor) else {
        return false;
    };
    entries.values().any(|&child| is_inside(st, dir, child))
}

struct MemFile {
    vfs: MemVfs,
    ino: Ino,
    writable: bool,
    path: String,
    closed: bool,
}

impl MemFile {
    fn release(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        let mut st = self.vfs.lock();
        if let Some(Inode::File { links, opens, .. }) = st.inodes.get_mut(&self.ino) {
            *opens -= 1;
            if *links == 0 && *opens == 0 {
                st.free(self.ino);
            }
        }
    }

    fn error(&self, kind: io::ErrorKind, op: &str) -> io::Error {
        io::Error::new(kind, format!("{op} {}: {kind}", self.path))
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        self.release();
    }
}

#[async_trait]
impl VfsFile for MemFile {
    async fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let st = self.vfs.lock();
        let Some(Inode::File { data, .. }) = st.inodes.get(&self.ino) else {
            return Err(self.error(io::ErrorKind::NotFound, "read"));
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let end = start.saturating_add(len).min(data.len());
        Ok(Bytes::copy_from_slice(&data[start..end]))
    }

    async fn write_at(&self, offset: u64, bytes: Bytes) -> io::Result<()> {
        if !self.writable {
            return Err(self.error(io::ErrorKind::PermissionDenied, "write (read-only handle)"));
        }
        let mut st = self.vfs.lock();
        let (used, capacity) = (st.used_bytes, st.capacity);
        let Some(Inode::File { data, .. }) = st.inodes.get_mut(&self.ino) else {
            return Err(self.error(io::ErrorKind::NotFound, "write"));
        };
        let end = offset
            .checked_add(bytes.len() as u64)
            .and_then(|e| usize::try_from(e).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::FileTooLarge, "write past u64"))?;
        let growth = end.saturating_sub(data.len()) as u64;
        if used + growth > capacity {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("write {}: no space left on the volume", self.path),
            ));
        }
        if data.len() < end {
            data.resize(end, 0);
        }
        data[end - bytes.len()..end].copy_from_slice(&bytes);
        st.used_bytes += growth;
        Ok(())
    }

    async fn fsync(&self) -> io::Result<()> {
        Ok(())
    }

    async fn stat(&self) -> io::Result<Metadata> {
        let st = self.vfs.lock();
        if !st.inodes.contains_key(&self.ino) {
            return Err(self.error(io::ErrorKind::NotFound, "stat"));
        }
        Ok(st.metadata(self.ino))
    }

    async fn close(mut self: Box<Self>) -> io::Result<()> {
        self.release();
        Ok(())
    }
}
