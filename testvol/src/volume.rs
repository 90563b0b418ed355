//! The state several mounts share: the journal, the inode numbers the
//! mounts hand to their kernels, open handles, faults and counters.
//!
//! Every change reaches the backing directory through here, so the table
//! of names is the truth about where each file is; a mount's kernel keeps
//! its own caches of it, which is what makes mounts behave as hosts.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::journal::{CutReport, Journal};

/// The root's inode number, as FUSE fixes it.
pub const ROOT: u64 = 1;

/// How long each kind of operation takes, as on a network volume.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    /// An fsync of a file or a directory (an NFS COMMIT).
    pub commit: Duration,
    /// A create, mkdir, rename, unlink or rmdir (one round trip to a
    /// server that commits metadata before it answers).
    pub metadata: Duration,
}

/// Operations a fault can be set on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Fsync,
    Create,
    Mkdir,
    Rename,
    Unlink,
    Rmdir,
}

impl Op {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "read" => Op::Read,
            "write" => Op::Write,
            "fsync" => Op::Fsync,
            "create" => Op::Create,
            "mkdir" => Op::Mkdir,
            "rename" => Op::Rename,
            "unlink" => Op::Unlink,
            "rmdir" => Op::Rmdir,
            _ => return None,
        })
    }

    /// The changes a full volume refuses with ENOSPC.
    fn needs_space(self) -> bool {
        matches!(self, Op::Write | Op::Create | Op::Mkdir)
    }
}

/// An injected error: the next `left` operations of a kind (all of them
/// when `left` is `None`), on one mount or on all, fail with `errno`.
#[derive(Clone, Debug)]
pub struct Fault {
    pub op: Option<Op>,
    pub errno: i32,
    pub left: Option<u64>,
    pub mount: Option<u32>,
}

/// Counters the control socket reports.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub silly_renames: u64,
    pub silly_removed: u64,
    pub estale: u64,
    pub faults_injected: u64,
    pub cuts: u64,
    pub pages_lost: u64,
    pub changes_undone: u64,
    pub undo_conflicts: u64,
    pub fsyncs: u64,
    pub dir_fsyncs: u64,
}

/// A file or directory the mounts know, by the number they know it by.
#[derive(Clone, Debug)]
struct Node {
    path: PathBuf,
    backing: u64,
}

/// An open file of one mount.
pub struct Handle {
    pub ino: u64,
    pub mount: u32,
    pub file: File,
}

/// A failure with its errno, as FUSE answers it.
pub type Res<T> = Result<T, i32>;

pub fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The shared state of a volume.
pub struct Volume {
    root: PathBuf,
    journal: Journal,
    nodes: HashMap<u64, Node>,
    by_backing: HashMap<u64, u64>,
    next_ino: u64,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    /// Files a mount unlinked while it had them open: renamed to `.nfs…`
    /// until its last close there, as the Linux NFS client does.
    silly: HashMap<u64, u32>,
    silly_seq: u64,
    /// Bumped by a power cut of a mount: an operation that a mount's
    /// process sent before the cut and that is still being delayed must
    /// not land after it.
    generations: Vec<u64>,
    /// Mounts whose power is off: every operation fails with EIO until
    /// `power_on`, so that nothing a dead host's process still had queued
    /// lands after the cut.
    dark: Vec<bool>,
    pub faults: Vec<Fault>,
    pub full: bool,
    pub latency: Latency,
    pub stats: Stats,
    /// Print every change and sync to stderr (`--trace`).
    pub trace: bool,
}

impl Volume {
    /// A volume over `root` for `mounts` mounts; what is there now is
    /// durable.
    pub fn new(root: &Path, mounts: u32) -> io::Result<Self> {
        let journal = Journal::new(root)?;
        let mut v = Self {
            root: root.to_path_buf(),
            journal,
            nodes: HashMap::new(),
            by_backing: HashMap::new(),
            next_ino: ROOT + 1,
            handles: HashMap::new(),
            next_fh: 1,
            silly: HashMap::new(),
            silly_seq: 0,
            generations: vec![0; mounts as usize],
            dark: vec![false; mounts as usize],
            faults: Vec::new(),
            full: false,
            latency: Latency::default(),
            stats: Stats::default(),
            trace: false,
        };
        let backing = fs::metadata(root)?.ino();
        v.nodes.insert(
            ROOT,
            Node {
                path: PathBuf::new(),
                backing,
            },
        );
        v.by_backing.insert(backing, ROOT);
        Ok(v)
    }

    fn trace(&self, mount: u32, what: &str, path: &Path) {
        if self.trace {
            eprintln!("testvol: mount {mount} {what} {}", path.display());
        }
    }

    pub fn is_dark(&self, mount: u32) -> bool {
        self.dark.get(mount as usize).copied().unwrap_or(false)
    }

    /// Power back on (all mounts, or one).
    pub fn power_on(&mut self, mount: Option<u32>) {
        for (m, d) in self.dark.iter_mut().enumerate() {
            if mount.is_none_or(|c| c as usize == m) {
                *d = false;
            }
        }
    }

    pub fn generation(&self, mount: u32) -> u64 {
        self.generations.get(mount as usize).copied().unwrap_or(0)
    }

    fn abs(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    /// Fails when a fault is set on this operation (and uses it up).
    pub fn check(&mut self, mount: u32, op: Op) -> Res<()> {
        if self.is_dark(mount) {
            return Err(libc::EIO);
        }
        if self.full && op.needs_space() {
            self.stats.faults_injected += 1;
            return Err(libc::ENOSPC);
        }
        let hit = self
            .faults
            .iter()
            .position(|f| f.op.is_none_or(|o| o == op) && f.mount.is_none_or(|m| m == mount));
        let Some(i) = hit else { return Ok(()) };
        let errno = self.faults[i].errno;
        if let Some(left) = &mut self.faults[i].left {
            *left -= 1;
            if *left == 0 {
                self.faults.remove(i);
            }
        }
        self.stats.faults_injected += 1;
        Err(errno)
    }

    /// The path of a node; ESTALE when it is gone (another mount removed
    /// or replaced it, or a power cut took it back).
    pub fn path(&mut self, ino: u64) -> Res<PathBuf> {
        match self.nodes.get(&ino) {
            Some(n) => Ok(n.path.clone()),
            None => {
                self.stats.estale += 1;
                Err(libc::ESTALE)
            }
        }
    }

    pub fn child(&mut self, parent: u64, name: &Path) -> Res<PathBuf> {
        let dir = self.path(parent)?;
        Ok(dir.join(name))
    }

    /// The node for what is at `rel` now, made if it is new.
    pub fn node_at(&mut self, rel: &Path) -> Res<(u64, fs::Metadata)> {
        let meta = fs::symlink_metadata(self.abs(rel)).map_err(|e| errno(&e))?;
        let ino = match self.by_backing.get(&meta.ino()) {
            Some(&ino) => {
                if let Some(n) = self.nodes.get_mut(&ino) {
                    n.path = rel.to_path_buf();
                }
                ino
            }
            None => {
                let ino = self.next_ino;
                self.next_ino += 1;
                self.nodes.insert(
                    ino,
                    Node {
                        path: rel.to_path_buf(),
                        backing: meta.ino(),
                    },
                );
                self.by_backing.insert(meta.ino(), ino);
                ino
            }
        };
        Ok((ino, meta))
    }

    fn forget_path(&mut self, rel: &Path) {
        let gone: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.path == rel)
            .map(|(&i, _)| i)
            .collect();
        for ino in gone {
            self.drop_node(ino);
        }
    }

    fn drop_node(&mut self, ino: u64) {
        if let Some(n) = self.nodes.remove(&ino) {
            self.by_backing.remove(&n.backing);
        }
        self.silly.remove(&ino);
    }

    /// Attributes of a node, from its open handle when there is one.
    pub fn getattr(&mut self, ino: u64, fh: Option<u64>) -> Res<fs::Metadata> {
        let path = self.path(ino)?;
        if let Some(h) = fh.and_then(|fh| self.handles.get(&fh)) {
            return h.file.metadata().map_err(|e| errno(&e));
        }
        let meta = fs::symlink_metadata(self.abs(&path)).map_err(|e| errno(&e))?;
        if self
            .nodes
            .get(&ino)
            .is_some_and(|n| n.backing != meta.ino())
        {
            self.stats.estale += 1;
            return Err(libc::ESTALE);
        }
        Ok(meta)
    }

    pub fn open(&mut self, mount: u32, ino: u64, write: bool) -> Res<u64> {
        let path = self.path(ino)?;
        let file = OpenOptions::new()
            .read(true)
            .write(write)
            .open(self.abs(&path))
            .map_err(|e| errno(&e))?;
        Ok(self.add_handle(mount, ino, file))
    }

    fn add_handle(&mut self, mount: u32, ino: u64, file: File) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, Handle { ino, mount, file });
        fh
    }

    fn is_open_on(&self, mount: u32, ino: u64) -> bool {
        self.handles
            .values()
            .any(|h| h.ino == ino && h.mount == mount)
    }

    /// Creates `name` in `parent` and opens it; with `exclusive` unset an
    /// existing file (another mount's create won) is opened instead.
    pub fn create(
        &mut self,
        mount: u32,
        parent: u64,
        name: &Path,
        exclusive: bool,
    ) -> Res<(u64, u64, fs::Metadata)> {
        let rel = self.child(parent, name)?;
        self.check(mount, Op::Create)?;
        let file = match self.journal.create(mount, &rel) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !exclusive => OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.abs(&rel))
                .map_err(|e| errno(&e))?,
            Err(e) => return Err(errno(&e)),
        };
        self.trace(mount, "create", &rel);
        let (ino, meta) = self.node_at(&rel)?;
        let fh = self.add_handle(mount, ino, file);
        Ok((ino, fh, meta))
    }

    pub fn read(&mut self, mount: u32, fh: u64, offset: u64, size: u32) -> Res<Vec<u8>> {
        self.check(mount, Op::Read)?;
        let ino = self.handle_ino(fh)?;
        self.path(ino)?;
        let h = self.handles.get(&fh).ok_or(libc::EBADF)?;
        let mut buf = vec![0; size as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match h.file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(errno(&e)),
            }
        }
        buf.truncate(filled);
        Ok(buf)
    }

    fn handle_ino(&self, fh: u64) -> Res<u64> {
        self.handles.get(&fh).map(|h| h.ino).ok_or(libc::EBADF)
    }

    pub fn write(&mut self, mount: u32, fh: u64, offset: u64, data: &[u8]) -> Res<u32> {
        self.check(mount, Op::Write)?;
        let ino = self.handle_ino(fh)?;
        let path = self.path(ino)?;
        let Volume {
            journal, handles, ..
        } = self;
        let h = handles.get(&fh).ok_or(libc::EBADF)?;
        journal
            .write_via(mount, &h.file, &path, offset, data)
            .map_err(|e| errno(&e))?;
        Ok(data.len() as u32)
    }

    pub fn truncate(&mut self, mount: u32, ino: u64, len: u64) -> Res<()> {
        let path = self.path(ino)?;
        let current = fs::symlink_metadata(self.abs(&path))
            .map_err(|e| errno(&e))?
            .len();
        if len > current {
            self.check(mount, Op::Write)?;
        } else if self.is_dark(mount) {
            return Err(libc::EIO);
        }
        self.journal
            .truncate(mount, &path, len)
            .map_err(|e| errno(&e))
    }

    pub fn fsync(&mut self, mount: u32, ino: u64) -> Res<()> {
        self.check(mount, Op::Fsync)?;
        let path = self.path(ino)?;
        self.journal.fsync_file(&path);
        self.trace(mount, "fsync", &path);
        self.stats.fsyncs += 1;
        Ok(())
    }

    pub fn fsync_dir(&mut self, mount: u32, ino: u64) -> Res<()> {
        self.check(mount, Op::Fsync)?;
        let path = self.path(ino)?;
        self.journal.fsync_dir(&path);
        self.trace(mount, "fsync dir", &path);
        self.stats.dir_fsyncs += 1;
        Ok(())
    }

    /// Closes a handle; the last close on a mount of a file it unlinked
    /// while open removes the `.nfs…` name.
    pub fn release(&mut self, fh: u64) {
        let Some(h) = self.handles.remove(&fh) else {
            return;
        };
        // A host that lost power leaves its `.nfs` names behind.
        if self.silly.get(&h.ino) == Some(&h.mount)
            && !self.is_open_on(h.mount, h.ino)
            && !self.is_dark(h.mount)
        {
            if let Some(path) = self.nodes.get(&h.ino).map(|n| n.path.clone()) {
                if self.journal.unlink(h.mount, &path).is_ok() {
                    self.stats.silly_removed += 1;
                }
            }
            self.drop_node(h.ino);
        }
    }

    /// Renames an open file out of the way, as NFS clients do instead of
    /// unlinking a file they have open: `.nfs` + the file id + a counter.
    fn silly_rename(&mut self, mount: u32, ino: u64, rel: &Path) -> Res<()> {
        self.silly_seq += 1;
        let backing = self.nodes.get(&ino).map(|n| n.backing).unwrap_or(0);
        let name = format!(".nfs{backing:016x}{:08x}", self.silly_seq);
        let to = rel.parent().unwrap_or(Path::new("")).join(name);
        self.journal
            .rename(mount, rel, &to)
            .map_err(|e| errno(&e))?;
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.path = to;
        }
        self.silly.insert(ino, mount);
        self.stats.silly_renames += 1;
        Ok(())
    }

    /// The node at `rel`, if the volume knows one there.
    fn known_at(&self, rel: &Path) -> Option<u64> {
        let backing = fs::symlink_metadata(self.abs(rel)).ok()?.ino();
        self.by_backing.get(&backing).copied()
    }

    pub fn unlink(&mut self, mount: u32, parent: u64, name: &Path) -> Res<()> {
        let rel = self.child(parent, name)?;
        self.check(mount, Op::Unlink)?;
        if let Some(ino) = self.known_at(&rel) {
            if self.is_open_on(mount, ino) {
                return self.silly_rename(mount, ino, &rel);
            }
        }
        self.journal.unlink(mount, &rel).map_err(|e| errno(&e))?;
        self.trace(mount, "unlink", &rel);
        self.forget_path(&rel);
        Ok(())
    }

    pub fn mkdir(&mut self, mount: u32, parent: u64, name: &Path) -> Res<(u64, fs::Metadata)> {
        let rel = self.child(parent, name)?;
        self.check(mount, Op::Mkdir)?;
        self.journal.mkdir(mount, &rel).map_err(|e| errno(&e))?;
        self.node_at(&rel)
    }

    pub fn rmdir(&mut self, mount: u32, parent: u64, name: &Path) -> Res<()> {
        let rel = self.child(parent, name)?;
        self.check(mount, Op::Rmdir)?;
        self.journal.rmdir(mount, &rel).map_err(|e| errno(&e))?;
        self.forget_path(&rel);
        Ok(())
    }

    pub fn rename(
        &mut self,
        mount: u32,
        parent: u64,
        name: &Path,
        new_parent: u64,
        new_name: &Path,
    ) -> Res<()> {
        let from = self.child(parent, name)?;
        let to = self.child(new_parent, new_name)?;
        self.check(mount, Op::Rename)?;
        if from == to {
            return Ok(());
        }
        // A target this mount has open is renamed out of the way first.
        if let Some(target) = self.known_at(&to) {
            if self.is_open_on(mount, target)
                && fs::metadata(self.abs(&to)).is_ok_and(|m| m.is_file())
            {
                self.silly_rename(mount, target, &to)?;
            }
        }
        let replaced = self.known_at(&to);
        self.journal
            .rename(mount, &from, &to)
            .map_err(|e| errno(&e))?;
        self.trace(mount, "rename", &from);
        self.trace(mount, "  to", &to);
        if let Some(ino) = replaced {
            self.drop_node(ino);
        }
        // The moved node and, for a directory, everything under it.
        for n in self.nodes.values_mut() {
            if let Ok(rest) = n.path.strip_prefix(&from) {
                n.path = if rest.as_os_str().is_empty() {
                    to.clone()
                } else {
                    to.join(rest)
                };
            }
        }
        Ok(())
    }

    /// The entries of a directory, sorted, without the journal's graveyard.
    pub fn read_dir(&mut self, ino: u64) -> Res<Vec<(u64, String, bool)>> {
        let path = self.path(ino)?;
        let mut out = Vec::new();
        for entry in fs::read_dir(self.abs(&path)).map_err(|e| errno(&e))? {
            let entry = entry.map_err(|e| errno(&e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.as_os_str().is_empty() && name == crate::journal::GRAVEYARD {
                continue;
            }
            let rel = path.join(&name);
            let Ok((child, meta)) = self.node_at(&rel) else {
                continue; // gone meanwhile
            };
            out.push((child, name, meta.is_dir()));
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
        Ok(out)
    }

    /// Loses power: all mounts (`None`) or one.
    pub fn power_cut(&mut self, mount: Option<u32>, seed: u64, keep: f64) -> io::Result<CutReport> {
        let report = match mount {
            None => self.journal.power_cut(seed, keep)?,
            Some(m) => self.journal.power_cut_of(m, seed, keep)?,
        };
        for (m, g) in self.generations.iter_mut().enumerate() {
            if mount.is_none_or(|c| c as usize == m) {
                *g += 1;
                self.dark[m] = true;
            }
        }
        self.stats.cuts += 1;
        self.stats.pages_lost += report.pages_lost as u64;
        self.stats.changes_undone += report.changes_undone as u64;
        self.stats.undo_conflicts += report.undo_conflicts as u64;
        self.rescan(mount.is_none(), &report.touched)?;
        Ok(report)
    }

    /// Rebuilds the table of names from the backing directory after a cut
    /// moved files back. A node keeps its number only where the cut did
    /// not touch its file: every kernel that cached a touched one (its
    /// name, attributes or pages) then gets ESTALE and looks it up again,
    /// as a host that rebooted would. After a cut of all mounts, no node
    /// keeps its number.
    fn rescan(&mut self, all: bool, touched: &[PathBuf]) -> io::Result<()> {
        if all {
            self.nodes.retain(|&ino, _| ino == ROOT);
            self.by_backing.retain(|_, &mut ino| ino == ROOT);
            self.silly.clear();
            return Ok(());
        }
        let mut found: BTreeMap<u64, PathBuf> = BTreeMap::new();
        let mut dirs = vec![PathBuf::new()];
        while let Some(dir) = dirs.pop() {
            for entry in fs::read_dir(self.abs(&dir))? {
                let entry = entry?;
                let name = entry.file_name();
                if dir.as_os_str().is_empty() && name == crate::journal::GRAVEYARD {
                    continue;
                }
                let rel = dir.join(&name);
                let meta = entry.metadata()?;
                if meta.is_dir() {
                    dirs.push(rel.clone());
                }
                found.insert(meta.ino(), rel);
            }
        }
        let gone: Vec<u64> = self
            .nodes
            .iter()
            .filter(|&(&ino, n)| ino != ROOT && !found.contains_key(&n.backing))
            .map(|(&ino, _)| ino)
            .collect();
        for ino in gone {
            self.drop_node(ino);
        }
        let stale: Vec<u64> = self
            .nodes
            .iter()
            .filter(|&(&ino, n)| {
                ino != ROOT
                    && (found.get(&n.backing) != Some(&n.path)
                        || touched.iter().any(|t| n.path.starts_with(t)))
            })
            .map(|(&ino, _)| ino)
            .collect();
        for ino in stale {
            self.drop_node(ino);
        }
        // A silly-renamed file whose rename was taken back is plain again.
        let nodes = &self.nodes;
        self.silly.retain(|ino, _| {
            nodes.get(ino).is_some_and(|n| {
                n.path
                    .file_name()
                    .is_some_and(|f| f.to_string_lossy().starts_with(".nfs"))
            })
        });
        Ok(())
    }

    pub fn pending(&self) -> (usize, usize) {
        self.journal.pending()
    }

    pub fn statfs(&self) -> Res<libc::statvfs> {
        let c = std::ffi::CString::new(self.root.as_os_str().as_encoded_bytes())
            .map_err(|_| libc::EINVAL)?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid C string and `st` a valid out-pointer.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return Err(errno(&io::Error::last_os_error()));
        }
        if self.full {
            st.f_bavail = 0;
            st.f_bfree = 0;
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn volume(mounts: u32) -> (tempfile::TempDir, Volume) {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path(), mounts).unwrap();
        (dir, v)
    }

    fn names(v: &mut Volume) -> Vec<String> {
        v.read_dir(ROOT)
            .unwrap()
            .into_iter()
            .map(|(_, n, _)| n)
            .collect()
    }

    #[test]
    fn unlinking_a_file_open_on_the_same_mount_renames_it_to_nfs_until_the_last_close() {
        let (_d, mut v) = volume(2);
        let (ino, fh, _) = v.create(0, ROOT, Path::new("seg"), true).unwrap();
        v.write(0, fh, 0, b"records").unwrap();
        v.unlink(0, ROOT, Path::new("seg")).unwrap();
        let listed = names(&mut v);
        assert_eq!(listed.len(), 1);
        assert!(listed[0].starts_with(".nfs"), "{listed:?}");
        assert_eq!(v.read(0, fh, 0, 100).unwrap(), b"records", "still readable");
        assert_eq!(
            v.rmdir(0, ROOT, Path::new("x")),
            Err(libc::ENOENT),
            "a plain error, not a panic"
        );
        v.release(fh);
        assert!(names(&mut v).is_empty(), "gone at the last close");
        assert_eq!(v.path(ino), Err(libc::ESTALE));
        assert_eq!((v.stats.silly_renames, v.stats.silly_removed), (1, 1));
    }

    #[test]
    fn a_handle_whose_file_another_mount_removed_or_replaced_is_stale() {
        let (_d, mut v) = volume(2);
        let (ino, fh0, _) = v.create(0, ROOT, Path::new("m"), true).unwrap();
        v.release(fh0);
        let on1 = v.open(1, ino, false).unwrap();
        // Mount 0 replaces it: mount 1's handle answers ESTALE.
        let (_, tmp, _) = v.create(0, ROOT, Path::new("m.tmp"), true).unwrap();
        v.release(tmp);
        v.rename(0, ROOT, Path::new("m.tmp"), ROOT, Path::new("m"))
            .unwrap();
        assert_eq!(v.read(1, on1, 0, 10), Err(libc::ESTALE));
        assert_eq!(names(&mut v), vec!["m"], "no .nfs name on another mount");
        // A fresh lookup finds the new file.
        let (fresh, _) = v.node_at(Path::new("m")).unwrap();
        assert_ne!(fresh, ino);
    }

    #[test]
    fn a_cut_of_one_mount_stales_its_unsynced_creates_and_fences_its_delayed_operations() {
        let (_d, mut v) = volume(2);
        let (ino, fh, _) = v.create(1, ROOT, Path::new("claim"), true).unwrap();
        let before = v.generation(1);
        v.power_cut(Some(1), 1, 0.0).unwrap();
        assert_eq!(v.generation(1), before + 1);
        assert_eq!(v.generation(0), 0, "the other mount kept power");
        assert_eq!(v.read(1, fh, 0, 1), Err(libc::EIO), "dark until power on");
        v.power_on(None);
        assert_eq!(v.read(1, fh, 0, 1), Err(libc::ESTALE));
        assert_eq!(v.path(ino), Err(libc::ESTALE));
        assert!(names(&mut v).is_empty());
    }

    #[test]
    fn faults_fail_the_next_operations_of_their_kind_and_a_full_volume_refuses_writes() {
        let (_d, mut v) = volume(1);
        let (_, fh, _) = v.create(0, ROOT, Path::new("f"), true).unwrap();
        v.faults.push(Fault {
            op: Some(Op::Fsync),
            errno: libc::EIO,
            left: Some(1),
            mount: None,
        });
        let ino = v.handle_ino(fh).unwrap();
        assert_eq!(v.fsync(0, ino), Err(libc::EIO));
        assert_eq!(v.fsync(0, ino), Ok(()), "used up");
        v.full = true;
        assert_eq!(v.write(0, fh, 0, b"x"), Err(libc::ENOSPC));
        assert_eq!(v.read(0, fh, 0, 1), Ok(vec![]), "reads still work");
    }

    #[test]
    fn a_cut_mount_stays_dark_until_power_on_and_touched_files_get_new_numbers() {
        let (_d, mut v) = volume(2);
        let (kept, fh, _) = v.create(0, ROOT, Path::new("kept"), true).unwrap();
        v.write(0, fh, 0, b"synced").unwrap();
        v.fsync(0, kept).unwrap();
        v.fsync_dir(0, ROOT).unwrap();
        v.write(0, fh, 0, b"SYNCED-NOT").unwrap();
        v.release(fh);
        let (other, _) = v.mkdir(1, ROOT, Path::new("other")).unwrap();
        v.power_cut(Some(0), 3, 0.0).unwrap();
        assert_eq!(v.check(0, Op::Read), Err(libc::EIO), "dark");
        assert_eq!(v.check(1, Op::Read), Ok(()), "mount 1 kept power");
        assert_eq!(v.path(kept), Err(libc::ESTALE), "its pages were taken back");
        assert!(v.path(other).is_ok(), "mount 1's directory untouched");
        v.power_on(Some(0));
        assert_eq!(v.check(0, Op::Read), Ok(()));
        let (renumbered, meta) = v.node_at(Path::new("kept")).unwrap();
        assert_ne!(renumbered, kept);
        assert_eq!(meta.len(), 6, "the synced content");
    }
}
