//! The cluster id recorded on the volume: which cluster a volume belongs to.
//!
//! ```text
//! cluster/identity/id                the cluster id (enveloped), decided once
//! cluster/.identity-<broker>-<hex>/  a broker's proposal, staged
//! cluster/id                         the id as earlier versions wrote it (read only)
//! ```
//!
//! The first broker to start on a volume decides the id: it stages its
//! proposal in a directory of its own (the `id` file written by atomic
//! replace, so it is whole), then renames that directory to
//! `cluster/identity`. A rename onto a non-empty directory fails, so of
//! several brokers starting at once exactly one proposal lands, and it is
//! complete the moment it is visible: no reader ever sees a half-written
//! id, and there is no undecided state (a lost reply to the rename is
//! settled by reading what landed). Losers remove their staging directory
//! and adopt the winner's id. A broker only ever creates and removes its
//! own `.identity-<broker>-*` directories, and sweeps those left by its
//! earlier runs at start-up.

use std::io;
use std::path::Path;

use vfs::Vfs;
use vfs::durable::converge_remove;

use crate::layout::CLUSTER_DIR;
use crate::stored;

const KIND: &str = "cluster-id";

pub(crate) use crate::layout::identity_dir;

use crate::layout::{
    cluster_id as id_file, identity_staging_prefix as staging_prefix,
    legacy_cluster_id as legacy_file, staged_cluster_id,
};

async fn read_id(vfs: &dyn Vfs, path: &Path) -> io::Result<Option<String>> {
    let payload = stored::read_bytes(vfs, path, KIND).await.map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidData {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the volume's cluster id is unreadable: {e}"),
            )
        } else {
            e
        }
    })?;
    Ok(payload.map(|p| String::from_utf8_lossy(&p).into_owned()))
}

/// The cluster id the volume records, if one was decided (fresh read). A
/// volume from before `cluster/identity` existed answers with its
/// `cluster/id`.
pub async fn read(vfs: &dyn Vfs) -> io::Result<Option<String>> {
    match read_id(vfs, &id_file()).await? {
        Some(id) => Ok(Some(id)),
        None => read_id(vfs, &legacy_file()).await,
    }
}

/// Returns the volume's cluster id, deciding it first if no broker has:
/// the proposal is `wanted`, else the id an earlier version recorded in
/// `cluster/id`, else a random one. With `wanted` set, a volume that
/// belongs to another cluster is an `InvalidInput` error naming both ids.
pub async fn settle(vfs: &dyn Vfs, broker: u32, wanted: Option<&str>) -> io::Result<String> {
    let id = match read_id(vfs, &id_file()).await? {
        Some(id) => {
            check(&id, wanted)?;
            id
        }
        None => {
            let proposal = match (read_id(vfs, &legacy_file()).await?, wanted) {
                (Some(legacy), _) => legacy,
                (None, Some(w)) => w.to_owned(),
                (None, None) => format!("{:032x}", madsim::rand::random::<u128>()),
            };
            propose(vfs, broker, &proposal).await?;
            let id = read_id(vfs, &id_file()).await?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} vanished after it was decided", id_file().display()),
                )
            })?;
            check(&id, wanted)?;
            id
        }
    };
    Ok(id)
}

fn check(id: &str, wanted: Option<&str>) -> io::Result<()> {
    match wanted {
        Some(w) if w != id => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "this volume belongs to cluster `{id}`, but this broker was started with \
                 --cluster-id `{w}` (KAAS_CLUSTER_ID): it is another cluster's volume, or \
                 the id is wrong; refusing to join"
            ),
        )),
        _ => Ok(()),
    }
}

/// Stages `proposal` and renames it to `cluster/identity`. Losing the race
/// is success too: the end state is "an identity exists".
async fn propose(vfs: &dyn Vfs, broker: u32, proposal: &str) -> io::Result<()> {
    let staging = crate::layout::identity_staging(broker, madsim::rand::random::<u64>());
    vfs.mkdir(&staging).await?;
    let staged =
        stored::write_bytes(vfs, &staged_cluster_id(&staging), KIND, proposal.as_bytes()).await;
    let placed = match staged {
        Ok(()) => vfs.rename(&staging, &identity_dir()).await,
        Err(e) => Err(e),
    };
    let outcome = match placed {
        Ok(()) => vfs.sync_dir(Path::new(CLUSTER_DIR)).await,
        // Someone else's proposal landed first.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::DirectoryNotEmpty | io::ErrorKind::AlreadyExists
            ) =>
        {
            Ok(())
        }
        // A lost reply to a rename that happened: the caller reads what landed.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    if let Err(e) = converge_remove(vfs, &staging).await {
        tracing::debug!(dir = %staging.display(), error = %e, "staged cluster id left for the next start");
    }
    outcome
}

/// Removes this broker's staging directories of earlier, interrupted runs.
/// Only once the cluster id is settled and this broker id is known not to
/// be live in another process (`id_claim::claim_id`): a second
/// process started with the same id may be proposing right now, and on
/// another cluster's volume a same-numbered broker owns them.
pub(crate) async fn sweep_own_staging(vfs: &dyn Vfs, broker: u32) -> io::Result<()> {
    let prefix = staging_prefix(broker);
    for entry in vfs.read_dir(Path::new(CLUSTER_DIR)).await? {
        if entry.name.starts_with(&prefix) {
            let dir = Path::new(CLUSTER_DIR).join(&entry.name);
            if let Err(e) = converge_remove(vfs, &dir).await {
                tracing::debug!(dir = %dir.display(), error = %e, "staged cluster id left for the next start");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    async fn volume() -> Arc<dyn Vfs> {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        crate::node::prepare_volume(vfs.as_ref()).await.unwrap();
        vfs
    }

    #[tokio::test]
    async fn the_first_broker_records_the_id_and_the_others_adopt_it() {
        let vfs = volume().await;
        assert_eq!(read(vfs.as_ref()).await.unwrap(), None);
        let first = settle(vfs.as_ref(), 0, None).await.unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(settle(vfs.as_ref(), 1, None).await.unwrap(), first);
        assert_eq!(settle(vfs.as_ref(), 2, Some(&first)).await.unwrap(), first);
        assert_eq!(read(vfs.as_ref()).await.unwrap(), Some(first));
        // Nothing staged is left behind.
        let names: Vec<String> = vfs
            .read_dir(Path::new(CLUSTER_DIR))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["identity"]);
    }

    #[tokio::test]
    async fn a_configured_id_is_recorded_and_a_different_one_refused() {
        let vfs = volume().await;
        assert_eq!(settle(vfs.as_ref(), 0, Some("prod")).await.unwrap(), "prod");
        let err = settle(vfs.as_ref(), 1, Some("staging")).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let msg = err.to_string();
        assert!(msg.contains("`prod`") && msg.contains("`staging`"), "{msg}");
        // Without an id of its own, a broker adopts the volume's.
        assert_eq!(settle(vfs.as_ref(), 1, None).await.unwrap(), "prod");
    }

    #[tokio::test]
    async fn racing_first_starts_agree_on_one_id() {
        let vfs = volume().await;
        let mut tasks = Vec::new();
        for b in 0..4u32 {
            let vfs = vfs.clone();
            tasks.push(tokio::spawn(async move {
                settle(vfs.as_ref(), b, None).await.unwrap()
            }));
        }
        let mut ids = std::collections::BTreeSet::new();
        for t in tasks {
            ids.insert(t.await.unwrap());
        }
        assert_eq!(ids.len(), 1, "{ids:?}");
    }

    #[tokio::test]
    async fn a_volume_of_an_earlier_version_keeps_its_id() {
        let vfs = volume().await;
        stored::write_bytes(vfs.as_ref(), &legacy_file(), KIND, b"0123abcd")
            .await
            .unwrap();
        assert_eq!(
            read(vfs.as_ref()).await.unwrap().as_deref(),
            Some("0123abcd")
        );
        let err = settle(vfs.as_ref(), 0, Some("other")).await.unwrap_err();
        assert!(err.to_string().contains("`0123abcd`"), "{err}");
        assert_eq!(settle(vfs.as_ref(), 0, None).await.unwrap(), "0123abcd");
        assert_eq!(
            read_id(vfs.as_ref(), &id_file()).await.unwrap().as_deref(),
            Some("0123abcd")
        );
    }

    #[tokio::test]
    async fn leftovers_of_an_interrupted_proposal_are_swept_by_their_broker() {
        let vfs = volume().await;
        let left = Path::new(CLUSTER_DIR).join(".identity-3-00000000000000aa");
        vfs.mkdir(&left).await.unwrap();
        stored::write_bytes(vfs.as_ref(), &left.join("id"), KIND, b"x")
            .await
            .unwrap();
        let other = Path::new(CLUSTER_DIR).join(".identity-4-00000000000000bb");
        vfs.mkdir(&other).await.unwrap();
        settle(vfs.as_ref(), 3, None).await.unwrap();
        // Settling leaves them: another process with id 3 may be proposing.
        assert!(
            vfs::exists_now(vfs.as_ref(), &left.join("id"))
                .await
                .unwrap()
        );
        sweep_own_staging(vfs.as_ref(), 3).await.unwrap();
        let names: Vec<String> = vfs
            .read_dir(Path::new(CLUSTER_DIR))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            names,
            [".identity-4-00000000000000bb", "identity"],
            "only its own"
        );
    }
}
