//! Atomic replace: the one way a metadata file changes.

use std::io;
use std::path::Path;

use bytes::Bytes;

use super::names::{nonce, temp_name, temp_prefix};
use crate::{OpenOptions, Vfs, path, read_file};

/// Replaces `target` with `data` so that any reader opening it sees either the
/// previous complete file or this one.
///
/// Steps: exclusive create of a unique temp name in the target's directory,
/// write, fsync, close, rename over the target, sync the directory. A rename
/// that reports `NotFound` may be a lost reply to a rename that happened; the
/// target is then read back, and equal content counts as success.
pub async fn atomic_replace(vfs: &dyn Vfs, target: &Path, data: Bytes) -> io::Result<()> {
    path::check(target)?;
    let dir = path::parent(target);
    let name = path::file_name(target)?;
    let (temp, file) = create_temp(vfs, dir, name).await?;

    let written = async {
        file.write_at(0, data.clone()).await?;
        crate::fault_point!(vfs, "replace.temp-written");
        file.fsync().await
    }
    .await;
    let closed = file.close().await;
    if let Err(e) = written.and(closed) {
        return Err(discard_temp(vfs, &temp, e).await);
    }
    crate::fault_point!(vfs, "replace.temp-durable");

    match vfs.rename(&temp, target).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if read_file(vfs, target).await.ok().as_deref() != Some(&data[..]) {
                return Err(e);
            }
            vfs.lost_reply(crate::observed::Op::Rename);
        }
        Err(e) => return Err(discard_temp(vfs, &temp, e).await),
    }
    crate::fault_point!(vfs, "replace.renamed");
    vfs.sync_dir(dir).await
}

async fn create_temp(
    vfs: &dyn Vfs,
    dir: &Path,
    name: &str,
) -> io::Result<(std::path::PathBuf, Box<dyn crate::VfsFile>)> {
    // A collision of 64-bit nonces is vanishingly rare; a few tries cover it.
    let mut last = None;
    for _ in 0..4 {
        let temp = dir.join(temp_name(name, nonce()));
        match vfs.open(&temp, OpenOptions::create_new()).await {
            Ok(file) => return Ok((temp, file)),
            // Nobody else uses this fresh nonce: "already exists" is our own
            // create whose reply was lost (NFS answers the retransmission
            // EEXIST), so the file is ours to write. Found by a swarm world
            // with only lost replies (seed 145): four in a row failed a write.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let ours = OpenOptions {
                    truncate: true,
                    ..OpenOptions::write()
                };
                match vfs.open(&temp, ours).await {
                    Ok(file) => {
                        vfs.lost_reply(crate::observed::Op::Open);
                        return Ok((temp, file));
                    }
                    Err(_) => last = Some(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temp name available")))
}

/// Removes a temp file after a failed replace. If that fails too, the temp is
/// left for [`sweep_temps`], which the file's single writer runs when it takes
/// ownership; the caller gets the original error either way.
async fn discard_temp(vfs: &dyn Vfs, temp: &Path, cause: io::Error) -> io::Error {
    if let Err(e) = vfs.unlink(temp).await {
        tracing::debug!(temp = %temp.display(), error = %e, "temp file left for the sweeper");
    }
    cause
}

/// Removes every temp file left by interrupted replaces of `target`.
///
/// Only `target`'s single writer may call this (for example on takeover,
/// before its first replace): a temp it removes from a fenced-off zombie makes
/// that zombie's rename fail, which is the outcome fencing wants.
/// Returns how many temps were removed.
pub async fn sweep_temps(vfs: &dyn Vfs, target: &Path) -> io::Result<usize> {
    path::check(target)?;
    let dir = path::parent(target);
    let prefix = temp_prefix(path::file_name(target)?);
    let mut removed = 0;
    for entry in vfs.read_dir(dir).await? {
        if !entry.name.starts_with(&prefix) {
            continue;
        }
        match vfs.unlink(&dir.join(&entry.name)).await {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}
