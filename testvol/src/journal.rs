//! What is not durable yet, and how to take it back.
//!
//! This module is the filesystem under a test volume, not a user of one:
//! it reaches the backing directory with `std::fs`, as `vfs::PosixVfs` does.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The unit in which written data is kept or lost at a power cut.
pub const PAGE: u64 = 4096;

/// Where unlinked and replaced files wait until their removal is durable.
pub(crate) const GRAVEYARD: &str = ".testvol-graveyard";

/// The durable state of one file's data: its length and the durable bytes
/// of every page written since its last fsync (`None`: the page lay past
/// the durable end).
#[derive(Debug, Default)]
struct FileUndo {
    /// The mount (client host) that wrote first since the last fsync: a
    /// power cut of that mount alone takes the pages back.
    owner: u32,
    durable_len: u64,
    pages: BTreeMap<u64, Option<Vec<u8>>>,
}

/// A metadata change that its directory's fsync has not made durable, with
/// what it takes to undo it. Paths are relative to the root.
#[derive(Debug)]
enum MetaOp {
    Created {
        path: PathBuf,
    },
    Removed {
        path: PathBuf,
        kept_at: PathBuf,
    },
    Renamed {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<PathBuf>,
    },
    MadeDir {
        path: PathBuf,
    },
    RemovedDir {
        path: PathBuf,
    },
}

/// A metadata change waiting for its directories' fsyncs.
#[derive(Debug)]
struct Pending {
    /// The mount that made it.
    owner: u32,
    op: MetaOp,
    /// The directories not synced since (a rename between directories
    /// waits for both).
    waiting: Vec<PathBuf>,
}

impl Pending {
    fn new(owner: u32, op: MetaOp) -> Self {
        let mut waiting = op.dirs();
        waiting.dedup();
        Self { owner, op, waiting }
    }

    /// Follows a rename of directory `from` to `to` (see `MetaOp::follow`);
    /// a directory it waits for may be the renamed one itself.
    fn follow(&mut self, from: &Path, to: &Path) {
        self.op.follow(from, to);
        for d in &mut self.waiting {
            if d == from {
                *d = to.to_path_buf();
            } else if let Some(moved) = inside_moved(d, from, to) {
                *d = moved;
            }
        }
    }
}

/// `p` after a move of directory `from` to `to`, if `p` lies inside it.
fn inside_moved(p: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let rest = p.strip_prefix(from).ok()?;
    (!rest.as_os_str().is_empty()).then(|| to.join(rest))
}

impl MetaOp {
    /// The names this change made or removed.
    fn paths(&self) -> Vec<PathBuf> {
        match self {
            MetaOp::Created { path }
            | MetaOp::Removed { path, .. }
            | MetaOp::MadeDir { path }
            | MetaOp::RemovedDir { path } => vec![path.clone()],
            MetaOp::Renamed { from, to, .. } => vec![from.clone(), to.clone()],
        }
    }

    /// Follows a rename of directory `from` to `to`: a pending change of
    /// an entry inside it now names the entry where it is (and its
    /// directory's fsync, under the new name, makes it durable).
    fn follow(&mut self, from: &Path, to: &Path) {
        let paths: Vec<&mut PathBuf> = match self {
            MetaOp::Created { path }
            | MetaOp::Removed { path, .. }
            | MetaOp::MadeDir { path }
            | MetaOp::RemovedDir { path } => vec![path],
            MetaOp::Renamed { from, to, .. } => vec![from, to],
        };
        for p in paths {
            if let Some(moved) = inside_moved(p, from, to) {
                *p = moved;
            }
        }
    }

    /// The directories whose fsync makes this change durable.
    fn dirs(&self) -> Vec<PathBuf> {
        let parent = |p: &Path| p.parent().map(Path::to_path_buf).unwrap_or_default();
        match self {
            MetaOp::Created { path }
            | MetaOp::Removed { path, .. }
            | MetaOp::MadeDir { path }
            | MetaOp::RemovedDir { path } => vec![parent(path)],
            MetaOp::Renamed { from, to, .. } => vec![parent(from), parent(to)],
        }
    }
}

/// What a power cut did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    pub pages_lost: usize,
    pub pages_kept: usize,
    pub changes_undone: usize,
    pub changes_kept: usize,
    /// Changes that could not be taken back because what they touched
    /// was changed since (by another mount, for the cut of one mount).
    pub undo_conflicts: usize,
    /// The paths whose name or content the cut changed.
    pub touched: Vec<PathBuf>,
}

/// A backing directory with its pending changes.
pub struct Journal {
    root: PathBuf,
    files: BTreeMap<PathBuf, FileUndo>,
    /// Pending metadata changes, oldest first, with the mount that made them.
    ops: Vec<Pending>,
    /// Makes graveyard names unique.
    buried: u64,
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", p.display()),
    )
}

impl Journal {
    /// Takes `root` as it is now as durable.
    pub fn new(root: &Path) -> io::Result<Self> {
        let graveyard = root.join(GRAVEYARD);
        if graveyard.exists() {
            fs::remove_dir_all(&graveyard)?;
        }
        fs::create_dir(&graveyard)?;
        Ok(Self {
            root: root.to_path_buf(),
            files: BTreeMap::new(),
            ops: Vec::new(),
            buried: 0,
        })
    }

    fn abs(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    /// A fresh name in the graveyard, relative to the root.
    fn grave(&mut self) -> PathBuf {
        self.buried += 1;
        Path::new(GRAVEYARD).join(self.buried.to_string())
    }

    /// The undo record of `rel`, made from its current (durable) length
    /// the first time it is written since its last fsync.
    fn undo_of(&mut self, owner: u32, rel: &Path, file: &File) -> io::Result<&mut FileUndo> {
        if !self.files.contains_key(rel) {
            let len = file.metadata()?.len();
            self.files.insert(
                rel.to_path_buf(),
                FileUndo {
                    owner,
                    durable_len: len,
                    pages: BTreeMap::new(),
                },
            );
        }
        self.files.get_mut(rel).ok_or_else(|| not_found(rel))
    }

    /// Writes `data` at `offset` of `rel`, pending until `fsync_file`.
    pub fn write(&mut self, owner: u32, rel: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
        let file = self.open_rw(rel)?;
        self.write_via(owner, &file, rel, offset, data)
    }

    fn open_rw(&self, rel: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.abs(rel))
    }

    /// [`Journal::write`] through a handle already open (read and write)
    /// on the file that is `rel` now.
    pub fn write_via(
        &mut self,
        owner: u32,
        file: &File,
        rel: &Path,
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        let undo = self.undo_of(owner, rel, file)?;
        let end = offset + data.len() as u64;
        if !data.is_empty() {
            for page in offset / PAGE..=(end - 1) / PAGE {
                if undo.pages.contains_key(&page) {
                    continue;
                }
                let start = page * PAGE;
                let before = if start < undo.durable_len {
                    let len = (undo.durable_len - start).min(PAGE) as usize;
                    let mut buf = vec![0; len];
                    file.read_exact_at(&mut buf, start)?;
                    Some(buf)
                } else {
                    None
                };
                undo.pages.insert(page, before);
            }
        }
        file.write_all_at(data, offset)
    }

    /// Sets the length of `rel`, pending until `fsync_file`. The bytes a
    /// shrink cuts off are kept as the pages' durable content.
    pub fn truncate(&mut self, owner: u32, rel: &Path, len: u64) -> io::Result<()> {
        let file = self.open_rw(rel)?;
        let current = file.metadata()?.len();
        if len < current {
            // Remember the pages the shrink removes, as a write would.
            let undo = self.undo_of(owner, rel, &file)?;
            for page in len / PAGE..=current.saturating_sub(1) / PAGE {
                if undo.pages.contains_key(&page) || page * PAGE >= undo.durable_len {
                    undo.pages.entry(page).or_insert(None);
                    continue;
                }
                let start = page * PAGE;
                let n = (undo.durable_len - start).min(PAGE) as usize;
                let mut buf = vec![0; n];
                file.read_exact_at(&mut buf, start)?;
                undo.pages.insert(page, Some(buf));
            }
        } else {
            self.undo_of(owner, rel, &file)?;
        }
        file.set_len(len)
    }

    /// Makes the data of `rel` durable (what fsync of a file does; its
    /// name in its directory needs the directory's fsync). The volume
    /// models durability: the backing directory itself is not synced, a
    /// crash of the machine that runs the tests is not what is tested.
    pub fn fsync_file(&mut self, rel: &Path) {
        self.files.remove(rel);
    }

    /// Creates an empty file `rel` (exclusively) and opens it for reading
    /// and writing.
    pub fn create(&mut self, owner: u32, rel: &Path) -> io::Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(self.abs(rel))?;
        self.files.insert(
            rel.to_path_buf(),
            FileUndo {
                owner,
                ..FileUndo::default()
            },
        );
        self.ops.push(Pending::new(
            owner,
            MetaOp::Created {
                path: rel.to_path_buf(),
            },
        ));
        Ok(file)
    }

    /// Unlinks `rel`: it waits in the graveyard until the unlink is durable.
    pub fn unlink(&mut self, owner: u32, rel: &Path) -> io::Result<()> {
        if fs::symlink_metadata(self.abs(rel))?.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        let kept_at = self.grave();
        fs::rename(self.abs(rel), self.abs(&kept_at))?;
        if let Some(undo) = self.files.remove(rel) {
            self.files.insert(kept_at.clone(), undo);
        }
        self.ops.push(Pending::new(
            owner,
            MetaOp::Removed {
                path: rel.to_path_buf(),
                kept_at,
            },
        ));
        Ok(())
    }

    /// Renames `from` to `to`, replacing a file there (kept in the
    /// graveyard until the rename is durable).
    pub fn rename(&mut self, owner: u32, from: &Path, to: &Path) -> io::Result<()> {
        // Checked first: the target goes to the graveyard before the rename,
        // and must come back if the rename cannot happen.
        let source = fs::symlink_metadata(self.abs(from))?;
        if source.is_dir() && self.abs(to).is_file() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let replaced = if self.abs(to).is_file() {
            let grave = self.grave();
            fs::rename(self.abs(to), self.abs(&grave))?;
            if let Some(undo) = self.files.remove(to) {
                self.files.insert(grave.clone(), undo);
            }
            Some(grave)
        } else {
            None
        };
        if let Err(e) = fs::rename(self.abs(from), self.abs(to)) {
            if let Some(grave) = &replaced {
                fs::rename(self.abs(grave), self.abs(to))?;
                self.move_undo(grave, to);
            }
            return Err(e);
        }
        self.move_undo(from, to);
        if source.is_dir() {
            for p in &mut self.ops {
                p.follow(from, to);
            }
        }
        self.ops.push(Pending::new(
            owner,
            MetaOp::Renamed {
                from: from.to_path_buf(),
                to: to.to_path_buf(),
                replaced,
            },
        ));
        Ok(())
    }

    /// Undo records follow a file (or a directory's files) to its new name.
    fn move_undo(&mut self, from: &Path, to: &Path) {
        let moved: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|k| k.starts_with(from))
            .cloned()
            .collect();
        for k in moved {
            if let (Some(undo), Ok(rest)) = (self.files.remove(&k), k.strip_prefix(from)) {
                let new = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
                self.files.insert(new, undo);
            }
        }
    }

    pub fn mkdir(&mut self, owner: u32, rel: &Path) -> io::Result<()> {
        fs::create_dir(self.abs(rel))?;
        self.ops.push(Pending::new(
            owner,
            MetaOp::MadeDir {
                path: rel.to_path_buf(),
            },
        ));
        Ok(())
    }

    pub fn rmdir(&mut self, owner: u32, rel: &Path) -> io::Result<()> {
        fs::remove_dir(self.abs(rel))?;
        self.ops.push(Pending::new(
            owner,
            MetaOp::RemovedDir {
                path: rel.to_path_buf(),
            },
        ));
        Ok(())
    }

    /// Makes the pending changes of entries of directory `rel` durable
    /// (a rename needs both its directories synced).
    pub fn fsync_dir(&mut self, rel: &Path) {
        let mut synced: Vec<PathBuf> = Vec::new();
        let mut kept = Vec::new();
        for mut p in std::mem::take(&mut self.ops) {
            p.waiting.retain(|d| d != rel);
            if !p.waiting.is_empty() {
                kept.push(p);
                continue;
            }
            match p.op {
                MetaOp::Removed { kept_at, .. } => synced.push(kept_at),
                MetaOp::Renamed {
                    replaced: Some(grave),
                    ..
                } => synced.push(grave),
                _ => {}
            }
        }
        self.ops = kept;
        for grave in synced {
            self.files.remove(&grave);
            // A file still open elsewhere lives on in the backing
            // filesystem until its last close, as on any POSIX filesystem.
            let _ = fs::remove_file(self.abs(&grave));
        }
    }

    /// How many changes wait for an fsync: (files with pending pages,
    /// metadata changes).
    pub fn pending(&self) -> (usize, usize) {
        (self.files.len(), self.ops.len())
    }

    /// Loses power: takes back every pending change, except a seeded random
    /// part of them when `keep` is above 0 (each pending page is kept with
    /// probability `keep`; a random prefix of the metadata changes, longer
    /// the higher `keep`). Afterwards everything on the volume is durable.
    pub fn power_cut(&mut self, seed: u64, keep: f64) -> io::Result<CutReport> {
        self.cut(seed, keep, None)
    }

    /// Loses the power of one mount (a client host): takes back what that
    /// mount changed and nobody synced since, as [`Journal::power_cut`]
    /// does for all.
    pub fn power_cut_of(&mut self, owner: u32, seed: u64, keep: f64) -> io::Result<CutReport> {
        self.cut(seed, keep, Some(owner))
    }

    fn cut(&mut self, seed: u64, keep: f64, only: Option<u32>) -> io::Result<CutReport> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut report = CutReport::default();
        let hit = |owner: u32| only.is_none_or(|o| o == owner);
        // Metadata first, newest first: a file whose create is taken back
        // takes its data with it.
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.ops)
            .into_iter()
            .partition(|p| hit(p.owner));
        self.ops = others;
        let keep_ops = (0..mine.len())
            .take_while(|_| keep > 0.0 && rng.gen_bool(keep))
            .count();
        report.changes_kept = keep_ops;
        let mut mine: Vec<Pending> = mine.into_iter().skip(keep_ops).collect();
        // One mount's cut must not undo over what other mounts did since.
        let careful = only.is_some();
        while let Some(p) = mine.pop() {
            report.changes_undone += 1;
            report.touched.extend(p.op.paths());
            // A directory moved back takes the older changes inside it back
            // to its old name.
            let dir_back = match &p.op {
                MetaOp::Renamed { from, to, .. } if self.abs(to).is_dir() => {
                    Some((to.clone(), from.clone()))
                }
                _ => None,
            };
            match self.undo(p.op, careful) {
                Ok(()) => {
                    if let Some((now, then)) = dir_back {
                        for p in mine.iter_mut().chain(self.ops.iter_mut()) {
                            p.follow(&now, &then);
                        }
                    }
                }
                // What the change touched was moved on from (by another
                // mount): take back what can be, count the rest.
                Err(_) => report.undo_conflicts += 1,
            }
        }
        let files = std::mem::take(&mut self.files);
        let (lose, stay): (BTreeMap<_, _>, BTreeMap<_, _>) =
            files.into_iter().partition(|(_, undo)| hit(undo.owner));
        self.files = stay;
        for (rel, undo) in lose {
            let Ok(file) = self.open_rw(&rel) else {
                continue; // taken back with its create
            };
            report.touched.push(rel.clone());
            let current = file.metadata()?.len();
            let mut end = undo.durable_len;
            for (page, before) in undo.pages {
                let start = page * PAGE;
                if keep > 0.0 && rng.gen_bool(keep) {
                    report.pages_kept += 1;
                    end = end.max((start + PAGE).min(current));
                    continue;
                }
                report.pages_lost += 1;
                match before {
                    Some(bytes) => {
                        if start + bytes.len() as u64 > current {
                            file.set_len(start + bytes.len() as u64)?;
                        }
                        file.write_all_at(&bytes, start)?;
                    }
                    // Never durable: a hole if a later page stays.
                    None if start < current => {
                        let n = (current - start).min(PAGE) as usize;
                        file.write_all_at(&vec![0; n], start)?;
                    }
                    None => {}
                }
            }
            file.set_len(end)?;
        }
        if self.ops.is_empty() {
            let graveyard = self.root.join(GRAVEYARD);
            fs::remove_dir_all(&graveyard)?;
            fs::create_dir(&graveyard)?;
        }
        Ok(report)
    }

    fn undo(&mut self, op: MetaOp, careful: bool) -> io::Result<()> {
        // Careful: never replace what is at a name now, never remove a
        // directory with entries (another mount made them).
        let free = |j: &Self, p: &Path| -> io::Result<()> {
            if careful && fs::symlink_metadata(j.abs(p)).is_ok() {
                return Err(io::Error::from_raw_os_error(libc::EEXIST));
            }
            Ok(())
        };
        match op {
            MetaOp::Created { path } => {
                self.files.remove(&path);
                ignore_missing(fs::remove_file(self.abs(&path)))
            }
            MetaOp::Removed { path, kept_at } => {
                free(self, &path)?;
                fs::rename(self.abs(&kept_at), self.abs(&path))?;
                self.move_undo(&kept_at, &path);
                Ok(())
            }
            MetaOp::Renamed { from, to, replaced } => {
                free(self, &from)?;
                fs::rename(self.abs(&to), self.abs(&from))?;
                self.move_undo(&to, &from);
                if let Some(grave) = replaced {
                    free(self, &to)?;
                    fs::rename(self.abs(&grave), self.abs(&to))?;
                    self.move_undo(&grave, &to);
                }
                Ok(())
            }
            MetaOp::MadeDir { path } if careful => fs::remove_dir(self.abs(&path)),
            MetaOp::MadeDir { path } => {
                // Nothing made inside a directory whose own entry is lost
                // can be reached after the cut.
                self.files.retain(|k, _| !k.starts_with(&path));
                ignore_missing(fs::remove_dir_all(self.abs(&path)))
            }
            MetaOp::RemovedDir { path } => fs::create_dir(self.abs(&path)),
        }
    }
}

fn ignore_missing(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn volume() -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path()).unwrap();
        (dir, j)
    }

    fn read(j: &Journal, rel: &str) -> Option<Vec<u8>> {
        fs::read(j.abs(Path::new(rel))).ok()
    }

    /// A file made durable: data synced, its name synced in its directory.
    fn durable(j: &mut Journal, rel: &str, data: &[u8]) {
        let p = Path::new(rel);
        j.create(0, p).unwrap();
        j.write(0, p, 0, data).unwrap();
        j.fsync_file(p);
        j.fsync_dir(p.parent().unwrap());
    }

    #[test]
    fn unsynced_writes_are_lost_and_synced_ones_stay() {
        let (_d, mut j) = volume();
        durable(&mut j, "a", b"durable");
        j.write(0, Path::new("a"), 0, b"DUR").unwrap();
        j.write(0, Path::new("a"), 7, b" and more").unwrap();
        assert_eq!(read(&j, "a").unwrap(), b"DURable and more");
        let r = j.power_cut(1, 0.0).unwrap();
        assert_eq!(read(&j, "a").unwrap(), b"durable");
        assert_eq!(r.pages_lost, 1);
    }

    #[test]
    fn a_create_without_a_directory_sync_is_lost_with_its_data() {
        let (_d, mut j) = volume();
        let p = Path::new("new");
        j.create(0, p).unwrap();
        j.write(0, p, 0, b"data").unwrap();
        j.fsync_file(p); // data synced, name not
        j.power_cut(2, 0.0).unwrap();
        assert_eq!(read(&j, "new"), None);
    }

    #[test]
    fn an_atomic_replace_is_all_or_nothing_at_each_step() {
        // temp written, fsynced, renamed over the target, directory synced.
        let (_d, mut j) = volume();
        durable(&mut j, "target", b"old");
        let (tmp, target) = (Path::new("tmp"), Path::new("target"));
        j.create(0, tmp).unwrap();
        j.write(0, tmp, 0, b"new").unwrap();
        j.fsync_file(tmp);
        j.rename(0, tmp, target).unwrap();
        assert_eq!(read(&j, "target").unwrap(), b"new");
        j.power_cut(3, 0.0).unwrap();
        assert_eq!(
            read(&j, "target").unwrap(),
            b"old",
            "the rename was not durable"
        );
        assert_eq!(read(&j, "tmp"), None, "nor the temp's create");
        // With the directory synced, the new content stays.
        j.create(0, tmp).unwrap();
        j.write(0, tmp, 0, b"new").unwrap();
        j.fsync_file(tmp);
        j.rename(0, tmp, target).unwrap();
        j.fsync_dir(Path::new(""));
        j.power_cut(4, 0.0).unwrap();
        assert_eq!(read(&j, "target").unwrap(), b"new");
    }

    #[test]
    fn a_rename_of_an_unsynced_file_loses_its_data() {
        // The bug the fsync before the rename prevents.
        let (_d, mut j) = volume();
        durable(&mut j, "target", b"old");
        let (tmp, target) = (Path::new("tmp"), Path::new("target"));
        j.create(0, tmp).unwrap();
        j.write(0, tmp, 0, b"new").unwrap();
        j.rename(0, tmp, target).unwrap();
        j.fsync_dir(Path::new(""));
        j.power_cut(5, 0.0).unwrap();
        assert_eq!(
            read(&j, "target").unwrap(),
            b"",
            "the name moved, the data did not"
        );
    }

    #[test]
    fn unlinks_mkdirs_and_rmdirs_come_back_undone() {
        let (_d, mut j) = volume();
        durable(&mut j, "keep", b"k");
        j.unlink(0, Path::new("keep")).unwrap();
        j.mkdir(0, Path::new("d")).unwrap();
        durable(&mut j, "d/f", b"inside");
        assert_eq!(read(&j, "keep"), None);
        j.power_cut(6, 0.0).unwrap();
        assert_eq!(read(&j, "keep").unwrap(), b"k");
        assert!(
            !j.abs(Path::new("d")).exists(),
            "its mkdir was never synced"
        );
    }

    #[test]
    fn a_partial_cut_keeps_some_pages_and_a_prefix_of_changes() {
        let (_d, mut j) = volume();
        durable(&mut j, "big", &vec![1u8; 4 * PAGE as usize]);
        let p = Path::new("big");
        j.write(0, p, 0, &vec![2u8; 4 * PAGE as usize]).unwrap();
        let r = j.power_cut(7, 0.5).unwrap();
        assert_eq!(r.pages_kept + r.pages_lost, 4);
        let after = read(&j, "big").unwrap();
        for page in after.chunks(PAGE as usize) {
            assert!(
                page.iter().all(|&b| b == page[0]),
                "a page is old or new, whole"
            );
        }
        // The same seed cuts the same way.
        let (_d2, mut j2) = volume();
        durable(&mut j2, "big", &vec![1u8; 4 * PAGE as usize]);
        j2.write(0, p, 0, &vec![2u8; 4 * PAGE as usize]).unwrap();
        assert_eq!(j2.power_cut(7, 0.5).unwrap(), r);
        assert_eq!(read(&j2, "big").unwrap(), after);
    }

    #[test]
    fn a_cut_of_one_mount_takes_back_only_what_that_mount_left_pending() {
        let (_d, mut j) = volume();
        durable(&mut j, "a", b"aaaa");
        durable(&mut j, "b", b"bbbb");
        j.write(1, Path::new("a"), 0, b"AA").unwrap();
        j.write(2, Path::new("b"), 0, b"BB").unwrap();
        j.create(1, Path::new("from-1")).unwrap();
        j.create(2, Path::new("from-2")).unwrap();
        let r = j.power_cut_of(1, 8, 0.0).unwrap();
        assert_eq!((r.pages_lost, r.changes_undone), (1, 1));
        assert_eq!(read(&j, "a").unwrap(), b"aaaa");
        assert_eq!(read(&j, "b").unwrap(), b"BBbb", "mount 2 kept power");
        assert_eq!(read(&j, "from-1"), None);
        assert!(read(&j, "from-2").is_some());
        assert_eq!(j.pending(), (2, 1), "b and from-2 still wait for a sync");
    }

    #[test]
    fn changes_inside_a_directory_follow_its_rename_and_come_back_with_it() {
        // A directory built under a staging name, renamed into place; the
        // renames inside it were never synced.
        let (_d, mut j) = volume();
        j.mkdir(0, Path::new("stage")).unwrap();
        j.fsync_dir(Path::new(""));
        durable(&mut j, "stage/m", b"old");
        let (tmp, m) = (Path::new("stage/m.tmp"), Path::new("stage/m"));
        j.create(0, tmp).unwrap();
        j.write(0, tmp, 0, b"new").unwrap();
        j.fsync_file(tmp);
        j.rename(0, tmp, m).unwrap(); // pending: "stage" not synced
        j.rename(0, Path::new("stage"), Path::new("topic")).unwrap();
        j.fsync_dir(Path::new(""));
        assert_eq!(
            j.pending().1,
            2,
            "create and rename inside, now under topic/"
        );
        j.power_cut(9, 0.0).unwrap();
        assert_eq!(read(&j, "topic/m").unwrap(), b"old");
        assert_eq!(read(&j, "topic/m.tmp"), None);
        // Undone the other way round: the directory rename too.
        let mut j2 = Journal::new(_d.path()).unwrap();
        j2.create(0, Path::new("topic/x")).unwrap();
        j2.rename(0, Path::new("topic"), Path::new("moved"))
            .unwrap();
        let r = j2.power_cut(10, 0.0).unwrap();
        assert_eq!(r.changes_undone, 2);
        assert!(read(&j2, "topic/m").is_some());
        assert_eq!(read(&j2, "topic/x"), None);
    }

    #[test]
    fn a_rename_between_directories_is_durable_once_both_are_synced() {
        let (_d, mut j) = volume();
        j.mkdir(0, Path::new("a")).unwrap();
        j.mkdir(0, Path::new("b")).unwrap();
        j.fsync_dir(Path::new(""));
        durable(&mut j, "a/x", b"x");
        j.rename(0, Path::new("a/x"), Path::new("b/x")).unwrap();
        j.fsync_dir(Path::new("b"));
        assert_eq!(j.pending().1, 1, "a is not synced yet");
        j.fsync_dir(Path::new("a"));
        assert_eq!(j.pending().1, 0);
        j.power_cut(11, 0.0).unwrap();
        assert_eq!(read(&j, "b/x").unwrap(), b"x");
    }

    #[test]
    fn a_rename_that_fails_leaves_its_target_in_place() {
        let (_d, mut j) = volume();
        durable(&mut j, "target", b"t");
        assert!(
            j.rename(0, Path::new("missing"), Path::new("target"))
                .is_err()
        );
        assert_eq!(read(&j, "target").unwrap(), b"t");
        assert_eq!(j.pending().1, 0);
    }
}
