//! Converge-remove: deleting a tree on a volume where that cannot be atomic.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use crate::{FileKind, Vfs, path};

/// Where a [`converge_remove`] pass left the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Nothing is left at the path.
    Gone,
    /// Entries that could not be removed yet, with why: typically `.nfs*`
    /// files whose handles are still open, or a directory that a stale
    /// listing showed empty. Call again later.
    Pending(Vec<(PathBuf, io::ErrorKind)>),
}

impl Removal {
    pub fn is_gone(&self) -> bool {
        matches!(self, Removal::Gone)
    }
}

/// Removes `root` and everything below it, as far as the volume lets it now.
///
/// Idempotent: a pass interrupted at any step (crash, error) leaves a state a
/// later pass continues from, and a pass over an already removed tree answers
/// `Gone`. `NotFound` (someone else removed it, or a lost reply to our own
/// removal), `DirectoryNotEmpty` and `ResourceBusy` are expected on NFS and
/// only make the result `Pending`; other errors (EIO, ESTALE on the directory,
/// permissions) are returned so the caller can report them, and re-drive too.
pub async fn converge_remove(vfs: &dyn Vfs, root: &Path) -> io::Result<Removal> {
    path::check(root)?;
    path::file_name(root)?; // never the volume root itself
    let mut pending = Vec::new();
    remove_tree(vfs, root.to_path_buf(), &mut pending).await?;
    Ok(if pending.is_empty() {
        Removal::Gone
    } else {
        Removal::Pending(pending)
    })
}

fn is_expected(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::DirectoryNotEmpty | io::ErrorKind::ResourceBusy
    )
}

fn remove_tree<'a>(
    vfs: &'a dyn Vfs,
    dir: PathBuf,
    pending: &'a mut Vec<(PathBuf, io::ErrorKind)>,
) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'a>> {
    Box::pin(async move {
        let entries = match vfs.read_dir(&dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return remove_file(vfs, dir, pending).await;
            }
            Err(e) => return Err(e),
        };
        for entry in entries {
            let child = dir.join(&entry.name);
            match entry.kind {
                FileKind::Dir => remove_tree(vfs, child, pending).await?,
                FileKind::File | FileKind::Other => remove_file(vfs, child, pending).await?,
            }
        }
        crate::fault_point!(vfs, "remove.children-removed");
        match vfs.rmdir(&dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) if is_expected(e.kind()) => {
                pending.push((dir, e.kind()));
                Ok(())
            }
            Err(e) => Err(e),
        }
    })
}

async fn remove_file(
    vfs: &dyn Vfs,
    file: PathBuf,
    pending: &mut Vec<(PathBuf, io::ErrorKind)>,
) -> io::Result<()> {
    match vfs.unlink(&file).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        // A stale listing called a directory a file.
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => remove_tree(vfs, file, pending).await,
        Err(e) if is_expected(e.kind()) => {
            pending.push((file, e.kind()));
            Ok(())
        }
        Err(e) => Err(e),
    }
}
