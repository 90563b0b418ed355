//! The NFS server: inodes, directories, unstable data. Every call here is one
//! atomic server operation; what clients see of it is decided in `host.rs`.

use std::collections::BTreeMap;

use super::errno::Errno;
use crate::FileKind;

pub(crate) const PAGE: usize = 4096;
pub(crate) const ROOT: Fh = Fh {
    id: 1,
    generation: 1,
};

/// A file handle: file id plus generation. Stale once the inode is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Fh {
    pub id: u64,
    pub generation: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    pub kind: FileKind,
    pub size: u64,
    /// Change attribute: bumped by every mutation of this inode.
    pub change: u64,
}

/// Weak cache consistency data: the change attribute before and after an
/// operation, so a client can tell whether only it changed the object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wcc {
    pub pre: u64,
    pub post: u64,
}

struct Inode {
    generation: u64,
    nlink: u32,
    change: u64,
    body: Body,
}

enum Body {
    File(FileData),
    Dir(BTreeMap<String, Fh>),
}

#[derive(Default)]
struct FileData {
    data: Vec<u8>,
    /// Length as of the last COMMIT.
    stable_len: u64,
    /// Pre-image of every page written since the last COMMIT (`None`: the
    /// page did not exist then), so a restart can drop unstable data.
    unstable: BTreeMap<u64, Option<Vec<u8>>>,
}

pub(crate) struct Server {
    inodes: BTreeMap<u64, Inode>,
    next_id: u64,
    clock: u64,
    /// Write verifier: changes when the server restarts.
    pub verifier: u64,
    used: u64,
    pub capacity: Option<u64>,
    /// Answer EDQUOT, not ENOSPC, once the capacity is reached (a quota).
    pub capacity_is_quota: bool,
    /// Open state per inode summed over hosts (matters for PRESERVE_UNLINKED).
    open_state: BTreeMap<u64, u32>,
    pub preserve_unlinked: bool,
}

impl Server {
    pub fn new(preserve_unlinked: bool, capacity: Option<u64>) -> Self {
        let mut inodes = BTreeMap::new();
        inodes.insert(
            ROOT.id,
            Inode {
                generation: ROOT.generation,
                nlink: 1,
                change: 1,
                body: Body::Dir(BTreeMap::new()),
            },
        );
        Self {
            inodes,
            next_id: ROOT.id + 1,
            clock: 1,
            verifier: 1,
            used: 0,
            capacity,
            capacity_is_quota: false,
            open_state: BTreeMap::new(),
            preserve_unlinked,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn inode(&self, fh: Fh) -> Result<&Inode, Errno> {
        match self.inodes.get(&fh.id) {
            Some(i) if i.generation == fh.generation => Ok(i),
            _ => Err(Errno::Stale),
        }
    }

    fn inode_mut(&mut self, fh: Fh) -> Result<&mut Inode, Errno> {
        match self.inodes.get_mut(&fh.id) {
            Some(i) if i.generation == fh.generation => Ok(i),
            _ => Err(Errno::Stale),
        }
    }

    fn dir(&self, fh: Fh) -> Result<&BTreeMap<String, Fh>, Errno> {
        match &self.inode(fh)?.body {
            Body::Dir(d) => Ok(d),
            Body::File(_) => Err(Errno::NotDir),
        }
    }

    /// Bumps a directory's change attribute and returns its entries.
    fn dir_mut(&mut self, fh: Fh) -> Result<(Wcc, &mut BTreeMap<String, Fh>), Errno> {
        self.dir(fh)?;
        let post = self.tick();
        let inode = self.inode_mut(fh)?;
        let wcc = Wcc {
            pre: inode.change,
            post,
        };
        inode.change = post;
        match &mut inode.body {
            Body::Dir(d) => Ok((wcc, d)),
            Body::File(_) => Err(Errno::NotDir),
        }
    }

    fn file(&self, fh: Fh) -> Result<&FileData, Errno> {
        match &self.inode(fh)?.body {
            Body::File(f) => Ok(f),
            Body::Dir(_) => Err(Errno::IsDir),
        }
    }

    fn kind_of(&self, fh: Fh) -> FileKind {
        match self.inodes.get(&fh.id).map(|i| &i.body) {
            Some(Body::Dir(_)) => FileKind::Dir,
            _ => FileKind::File,
        }
    }

    pub(crate) fn getattr(&self, fh: Fh) -> Result<Attr, Errno> {
        let inode = self.inode(fh)?;
        let (kind, size) = match &inode.body {
            Body::File(f) => (FileKind::File, f.data.len() as u64),
            Body::Dir(_) => (FileKind::Dir, 0),
        };
        Ok(Attr {
            kind,
            size,
            change: inode.change,
        })
    }

    pub fn lookup(&self, dir: Fh, name: &str) -> Result<Fh, Errno> {
        self.dir(dir)?.get(name).copied().ok_or(Errno::NoEnt)
    }

    pub(crate) fn readdir(&self, dir: Fh) -> Result<Vec<(String, FileKind)>, Errno> {
        Ok(self
            .dir(dir)?
            .iter()
            .map(|(name, fh)| (name.clone(), self.kind_of(*fh)))
            .collect())
    }

    pub fn read(&self, fh: Fh, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let data = &self.file(fh)?.data;
        let start = (offset as usize).min(data.len());
        let end = start.saturating_add(len).min(data.len());
        Ok(data[start..end].to_vec())
    }

    pub fn write(&mut self, fh: Fh, offset: u64, bytes: &[u8]) -> Result<Wcc, Errno> {
        let file = self.file(fh)?;
        let end = offset as usize + bytes.len();
        let growth = end.saturating_sub(file.data.len()) as u64;
        if let Some(cap) = self.capacity {
            if growth > 0 && self.used + growth > cap {
                return Err(if self.capacity_is_quota {
                    Errno::DQuot
                } else {
                    Errno::NoSpc
                });
            }
        }
        self.used += growth;
        let post = self.tick();
        let inode = self.inode_mut(fh)?;
        let pre = inode.change;
        inode.change = post;
        let Body::File(file) = &mut inode.body else {
            return Err(Errno::IsDir);
        };
        let first = offset / PAGE as u64;
        let last = (end.max(1) as u64 - 1) / PAGE as u64;
        for page in first..=last {
            file.unstable.entry(page).or_insert_with(|| {
                let start = page as usize * PAGE;
                let stable_end = (file.stable_len as usize).min(file.data.len());
                (start < stable_end)
                    .then(|| file.data[start..stable_end.min(start + PAGE)].to_vec())
            });
        }
        if file.data.len() < end {
            file.data.resize(end, 0);
        }
        file.data[offset as usize..end].copy_from_slice(bytes);
        Ok(Wcc { pre, post })
    }

    pub fn commit(&mut self, fh: Fh) -> Result<u64, Errno> {
        let inode = self.inode_mut(fh)?;
        if let Body::File(f) = &mut inode.body {
            f.unstable.clear();
            f.stable_len = f.data.len() as u64;
        }
        Ok(self.verifier)
    }

    /// SETATTR size=0: synchronous on the server, so it is stable at once.
    pub fn truncate(&mut self, fh: Fh) -> Result<Wcc, Errno> {
        self.file(fh)?;
        let post = self.tick();
        let inode = self.inode_mut(fh)?;
        let pre = inode.change;
        inode.change = post;
        let mut freed = 0;
        if let Body::File(f) = &mut inode.body {
            freed = f.data.len() as u64;
            *f = FileData::default();
        }
        self.used -= freed;
        Ok(Wcc { pre, post })
    }

    fn alloc(&mut self, body: Body) -> Fh {
        let id = self.next_id;
        self.next_id += 1;
        let change = self.tick();
        self.inodes.insert(
            id,
            Inode {
                generation: id,
                nlink: 1,
                change,
                body,
            },
        );
        Fh { id, generation: id }
    }

    /// CREATE. `Ok((fh, created, wcc))`; an existing file is opened unless
    /// `exclusive`.
    pub fn create(&mut self, dir: Fh, name: &str, exclusive: bool) -> Result<(Fh, Wcc), Errno> {
        if let Some(&existing) = self.dir(dir)?.get(name) {
            if exclusive {
                return Err(Errno::Exist);
            }
            if self.kind_of(existing) == FileKind::Dir {
                return Err(Errno::IsDir);
            }
            let change = self.inode(dir)?.change;
            return Ok((
                existing,
                Wcc {
                    pre: change,
                    post: change,
                },
            ));
        }
        let fh = self.alloc(Body::File(FileData::default()));
        let (wcc, entries) = self.dir_mut(dir)?;
        entries.insert(name.to_owned(), fh);
        Ok((fh, wcc))
    }

    pub fn mkdir(&mut self, dir: Fh, name: &str) -> Result<(Fh, Wcc), Errno> {
        if self.dir(dir)?.contains_key(name) {
            return Err(Errno::Exist);
        }
        let fh = self.alloc(Body::Dir(BTreeMap::new()));
        let (wcc, entries) = self.dir_mut(dir)?;
        entries.insert(name.to_owned(), fh);
        Ok((fh, wcc))
    }

    pub fn remove(&mut self, dir: Fh, name: &str) -> Result<Wcc, Errno> {
        let target = self.lookup(dir, name)?;
        if self.kind_of(target) == FileKind::Dir {
            return Err(Errno::IsDir);
        }
        let (wcc, entries) = self.dir_mut(dir)?;
        entries.remove(name);
        self.unlink_inode(target);
        Ok(wcc)
    }

    pub fn rmdir(&mut self, dir: Fh, name: &str) -> Result<Wcc, Errno> {
        let target = self.lookup(dir, name)?;
        if !self.dir(target)?.is_empty() {
            return Err(Errno::NotEmpty);
        }
        let (wcc, entries) = self.dir_mut(dir)?;
        entries.remove(name);
        self.inodes.remove(&target.id);
        Ok(wcc)
    }

    pub fn rename(
        &mut self,
        from_dir: Fh,
        from: &str,
        to_dir: Fh,
        to: &str,
    ) -> Result<(Wcc, Wcc), Errno> {
        let source = self.lookup(from_dir, from)?;
        self.dir(to_dir)?;
        let source_is_dir = self.kind_of(source) == FileKind::Dir;
        if source_is_dir && self.contains(source, to_dir) {
            return Err(Errno::Inval);
        }
        let replaced = self.dir(to_dir)?.get(to).copied();
        if let Some(old) = replaced {
            if old == source {
                let c = self.inode(from_dir)?.change;
                let same = Wcc { pre: c, post: c };
                return Ok((same, same));
            }
            match (self.kind_of(old) == FileKind::Dir, source_is_dir) {
                (true, true) if !self.dir(old)?.is_empty() => return Err(Errno::NotEmpty),
                (true, false) => return Err(Errno::IsDir),
                (false, true) => return Err(Errno::NotDir),
                _ => {}
            }
        }
        let (from_wcc, entries) = self.dir_mut(from_dir)?;
        entries.remove(from);
        let (to_wcc, entries) = self.dir_mut(to_dir)?;
        entries.insert(to.to_owned(), source);
        if let Some(old) = replaced {
            if self.kind_of(old) == FileKind::Dir {
                self.inodes.remove(&old.id);
            } else {
                self.unlink_inode(old);
            }
        }
        Ok((from_wcc, to_wcc))
    }

    /// True if `dir` is `ancestor` or lies below it.
    fn contains(&self, ancestor: Fh, dir: Fh) -> bool {
        if ancestor == dir {
            return true;
        }
        match self.inode(ancestor).map(|i| &i.body) {
            Ok(Body::Dir(entries)) => entries.values().any(|&child| self.contains(child, dir)),
            _ => false,
        }
    }

    fn unlink_inode(&mut self, fh: Fh) {
        if let Ok(inode) = self.inode_mut(fh) {
            inode.nlink = inode.nlink.saturating_sub(1);
        }
        self.free_if_unreferenced(fh.id);
    }

    fn free_if_unreferenced(&mut self, id: u64) {
        let Some(inode) = self.inodes.get(&id) else {
            return;
        };
        let held = self.preserve_unlinked && self.open_state.get(&id).is_some_and(|&n| n > 0);
        if inode.nlink == 0 && !held {
            if let Some(Inode {
                body: Body::File(f),
                ..
            }) = self.inodes.remove(&id)
            {
                self.used -= f.data.len() as u64;
            }
        }
    }

    pub(crate) fn open_state(&mut self, id: u64, delta: i64) {
        let n = self.open_state.entry(id).or_default();
        *n = (i64::from(*n) + delta).max(0) as u32;
        if *n == 0 {
            self.open_state.remove(&id);
            self.free_if_unreferenced(id);
        }
    }

    /// Server restart: unstable data is gone, the write verifier changes.
    pub fn restart(&mut self) {
        self.verifier += 1;
        let mut dropped = 0u64;
        for inode in self.inodes.values_mut() {
            let Body::File(f) = &mut inode.body else {
                continue;
            };
            if f.unstable.is_empty() {
                continue;
            }
            let before = f.data.len() as u64;
            for (page, old) in std::mem::take(&mut f.unstable) {
                if let Some(old) = old {
                    let start = page as usize * PAGE;
                    f.data[start..start + old.len()].copy_from_slice(&old);
                }
            }
            f.data.truncate(f.stable_len as usize);
            f.data.resize(f.stable_len as usize, 0);
            dropped += before.saturating_sub(f.data.len() as u64);
            self.clock += 1;
            inode.change = self.clock;
        }
        self.used -= dropped;
    }

    /// How much of the file at `path` (slash-separated, from the root) the
    /// server has committed: a restart keeps exactly that prefix. `None`
    /// when there is no file there.
    pub fn stable_len(&self, path: &str) -> Option<u64> {
        let mut fh = ROOT;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            fh = self.lookup(fh, name).ok()?;
        }
        let f = self.file(fh).ok()?;
        Some(f.stable_len.min(f.data.len() as u64))
    }

    /// Every file at or below `fh` (its path relative to `fh`, empty for
    /// `fh` itself) whose bytes are not all committed: written since the
    /// last COMMIT, or held unsent in some host's cache (`unsent`).
    pub(crate) fn uncommitted_under(
        &self,
        fh: Fh,
        unsent: &std::collections::BTreeSet<u64>,
    ) -> Vec<super::audit::Uncommitted> {
        let mut out = Vec::new();
        self.uncommitted_into(fh, String::new(), unsent, &mut out);
        out
    }

    fn uncommitted_into(
        &self,
        fh: Fh,
        rel: String,
        unsent: &std::collections::BTreeSet<u64>,
        out: &mut Vec<super::audit::Uncommitted>,
    ) {
        match self.inode(fh).map(|i| &i.body) {
            Ok(Body::File(f)) => {
                let len = f.data.len() as u64;
                let committed = f.stable_len.min(len);
                let held = unsent.contains(&fh.id);
                if !f.unstable.is_empty() || committed < len || held {
                    let committed = if f.unstable.is_empty() {
                        committed
                    } else {
                        // A restart restores pre-images from the first
                        // page written since the last COMMIT on.
                        let first = f.unstable.keys().next().copied().unwrap_or(0);
                        committed.min(first * PAGE as u64)
                    };
                    out.push((rel, committed, len, held));
                }
            }
            Ok(Body::Dir(entries)) => {
                for (name, &child) in entries {
                    let path = if rel.is_empty() {
                        name.clone()
                    } else {
                        format!("{rel}/{name}")
                    };
                    self.uncommitted_into(child, path, unsent, out);
                }
            }
            Err(_) => {}
        }
    }

    /// Every name on the server, depth first, as `(path, kind, size)`.
    pub fn walk(&self) -> Vec<(String, FileKind, u64)> {
        let mut out = Vec::new();
        self.walk_into(ROOT, "", &mut out);
        out
    }

    fn walk_into(&self, dir: Fh, prefix: &str, out: &mut Vec<(String, FileKind, u64)>) {
        let Ok(entries) = self.dir(dir) else {
            return;
        };
        for (name, &fh) in entries {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let attr = self.getattr(fh).ok();
            let kind = attr.map_or(FileKind::Other, |a| a.kind);
            out.push((path.clone(), kind, attr.map_or(0, |a| a.size)));
            if kind == FileKind::Dir {
                self.walk_into(fh, &path, out);
            }
        }
    }

    pub fn used_bytes(&self) -> u64 {
        self.used
    }

    pub(crate) fn next_inode(&self) -> u64 {
        self.next_id
    }

    /// Every path with its inode number.
    pub(crate) fn walk_ids(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let Ok(entries) = self.dir(dir) else {
                continue;
            };
            for (name, &fh) in entries {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}/{name}")
                };
                out.push((path.clone(), fh.id));
                if self.getattr(fh).is_ok_and(|a| a.kind == FileKind::Dir) {
                    stack.push((fh, path));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn what_is_uncommitted_is_what_a_restart_would_change() {
        let mut s = Server::new(false, None);
        let (fh, _) = s.create(ROOT, "f", true).unwrap();
        s.write(fh, 0, &[1; 10_000]).unwrap();
        let none = BTreeSet::new();
        assert_eq!(
            s.uncommitted_under(fh, &none),
            [(String::new(), 0, 10_000, false)]
        );
        s.commit(fh).unwrap();
        assert!(s.uncommitted_under(ROOT, &none).is_empty());
        s.write(fh, 5_000, b"changed").unwrap();
        assert_eq!(
            s.uncommitted_under(ROOT, &none),
            [("f".to_owned(), PAGE as u64, 10_000, false)],
            "a restart puts back page 1's pre-image"
        );
        s.commit(fh).unwrap();
        assert_eq!(
            s.uncommitted_under(ROOT, &BTreeSet::from([fh.id])),
            [("f".to_owned(), 10_000, 10_000, true)],
            "pages still in a host's cache"
        );
    }
}
