//! The historical assignment file (scenario `torn-assignment`), compiled
//! only into the simulation build.
//!
//! One file, `cluster/assignment`, rewritten in place by whichever broker
//! believes it is controller: truncate, write, fsync. A reader that opens
//! it between the truncate and the data reaching the server finds an
//! empty or short file, and took that for "no assignment yet": it led
//! nothing, and a controller starting from it placed every partition anew
//! from leader epoch 1. Readers also took whatever the file said, so a
//! deposed controller's late rewrite put an older map back.

use std::io;
use std::path::Path;

use vfs::{Create, OpenOptions, Vfs};

use crate::cluster::assignment::Assignment;
use crate::layout::CLUSTER_DIR;

fn path() -> std::path::PathBuf {
    Path::new(CLUSTER_DIR).join("assignment")
}

pub async fn write(vfs: &dyn Vfs, a: &Assignment) -> io::Result<()> {
    let json = serde_json::to_vec(a).map_err(io::Error::other)?;
    let opts = OpenOptions::write()
        .with_create(Create::IfMissing)
        .with_truncate();
    let file = vfs.open(&path(), opts).await?;
    let written = async {
        file.write_at(0, json.into()).await?;
        file.fsync().await
    }
    .await;
    let closed = file.close().await;
    written.and(closed)
}

/// What the file says now; an empty, short or unparsable file is an empty
/// assignment, as the old reader had it.
pub async fn read(vfs: &dyn Vfs) -> io::Result<Option<Assignment>> {
    let bytes = match vfs::read_file(vfs, &path()).await {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(serde_json::from_slice(&bytes).unwrap_or_default()))
}
