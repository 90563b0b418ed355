//! Scenario `staging-sweep`: the controller's sweep of staging directories
//! before they named their creator.

use std::io;
use std::path::Path;

use vfs::Vfs;
use vfs::durable::converge_remove;

use crate::layout::STAGING_PREFIX;
use crate::log::staging::Swept;

/// The historical sweep (scenario `staging-sweep`): every staging
/// directory taken for abandoned, on the belief that topics are created one
/// at a time and never during a sweep, and removed in place, file by file,
/// under a creator that may be writing it.
pub(crate) async fn remove_every_staging_in_place(vfs: &dyn Vfs, dir: &Path) -> io::Result<Swept> {
    let mut swept = Swept::default();
    for entry in vfs.read_dir(dir).await? {
        if entry.name.starts_with(STAGING_PREFIX) {
            if let Err(e) = converge_remove(vfs, &dir.join(&entry.name)).await {
                tracing::debug!(entry = %entry.name, error = %e, "reaping; retrying next tick");
            }
            swept.taken.push(entry.name);
        }
    }
    Ok(swept)
}
