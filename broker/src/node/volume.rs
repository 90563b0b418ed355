//! Preparing the volume at start-up, and re-driving start-up steps.

use std::future::Future;
use std::io;
use std::path::Path;
use std::time::Duration;

use vfs::Vfs;

use crate::layout;

/// Retries a start-up step whose end state is safe to re-drive, until it
/// succeeds, a permanent error (wrong layout, permissions, bad input) shows
/// up, or a bounded number of attempts failed.
pub(super) async fn redrive<T, F, Fut>(what: &str, mut step: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = io::Result<T>>,
{
    const ATTEMPTS: u32 = 10;
    let mut attempt = 1;
    loop {
        match step().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < ATTEMPTS && !is_permanent(&e) => {
                tracing::warn!(error = %e, attempt, "{what} failed; retrying");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_permanent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotADirectory
            | io::ErrorKind::IsADirectory
            | io::ErrorKind::PermissionDenied
            | io::ErrorKind::InvalidInput
            | io::ErrorKind::InvalidData
            | io::ErrorKind::ReadOnlyFilesystem
            // Start-up checks that found a misconfiguration.
            | io::ErrorKind::AddrInUse
            | io::ErrorKind::AddrNotAvailable
    )
}

/// Creates the top-level directories. Racing brokers all succeed: `mkdir` is
/// atomic and `AlreadyExists` is the end state we want.
pub async fn prepare_volume(vfs: &dyn Vfs) -> io::Result<()> {
    for dir in layout::TOP_LEVEL {
        match vfs.mkdir(Path::new(dir)).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let meta = vfs.stat(Path::new(dir)).await?;
                if meta.kind != vfs::FileKind::Dir {
                    return Err(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("preparing the volume: `{dir}` exists but is not a directory"),
                    ));
                }
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("preparing the volume: {e}"),
                ));
            }
        }
    }
    Ok(())
}
