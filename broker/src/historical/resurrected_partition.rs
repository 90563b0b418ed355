//! Scenario `resurrected-partition`: opening a partition used to create
//! what it did not find.

use std::io;
use std::path::{Path, PathBuf};

use vfs::Vfs;

use crate::log::manifest::Manifest;

/// Scenario `resurrected-partition`, before the claim: with the bug on,
/// "mkdir -p" the partition's directory. Returns whether it is on.
pub(crate) async fn make_dirs_if_on(v: &dyn Vfs, dir: &Path) -> io::Result<bool> {
    let on = crate::historical::on("resurrected-partition");
    if on {
        make_dirs(v, dir).await?;
    }
    Ok(on)
}

/// Scenario `resurrected-partition`, after the walk down: with the bug
/// on, a partition without a manifest gets an empty log.
pub(crate) async fn empty_log_if_missing(
    on: bool,
    previous: Option<Manifest>,
    v: &dyn Vfs,
    dir: &Path,
    expected: (&str, u32),
) -> io::Result<Option<Manifest>> {
    if on && previous.is_none() {
        let m = Manifest::initial(expected.0, expected.1);
        m.write(v, dir).await?;
        return Ok(Some(m));
    }
    Ok(previous)
}

/// The historical open (scenario `resurrected-partition`): "mkdir -p"
/// the partition's directory, then open or create its files. A leader
/// that took over a partition of a topic deleted meanwhile made the
/// deleted topic's directory again, with an empty log in it.
async fn make_dirs(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
    let mut at = PathBuf::new();
    for part in dir.components() {
        at.push(part);
        match vfs.mkdir(&at).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
