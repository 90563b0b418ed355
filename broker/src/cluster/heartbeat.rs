//! Broker heartbeats: each broker rewrites its own file; others only read it.
//!
//! Single writer: the file of broker N is written only by broker N. Two
//! processes started with the same id by mistake would both write; the
//! `incarnation` (random per start) lets readers see that happening.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use vfs::Vfs;
use vfs::durable::sweep_temps;

use super::announced::Announced;
use super::id_claim::{self, IdClaim};
use crate::layout;

const KIND: &str = "broker-heartbeat";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub broker_id: u32,
    /// Random per process start, so a restart is told apart from a stall.
    pub incarnation: u64,
    /// Grows by one with every heartbeat of this incarnation.
    pub sequence: u64,
    pub advertised: String,
    /// Every listener's advertised address, when there are several.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub endpoints: std::collections::BTreeMap<String, String>,
    /// Set by a broker shutting down: count it gone now and move its
    /// partitions, instead of waiting for its heartbeat to go stale.
    #[serde(default)]
    pub leaving: bool,
    /// Leaderships this broker was given but can never hold in their
    /// epoch (the claim is lost, undecided, or a takeover or flush failed
    /// half-way): `(topic id or coordinator key, partition or slot, epoch)`.
    /// The controller answers with the next epoch.
    #[serde(default)]
    pub stuck: Vec<(String, u32, u32)>,
    /// For stuck partitions whose epochs were claimed past theirs (by
    /// takeovers whose replies were lost, or an operator's repair):
    /// `(topic id, partition, newest claimed epoch)`. The controller's next
    /// epoch is past it. A separate field, so that a controller of an
    /// older version still reads `stuck`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claimed_past: Vec<(String, u32, u32)>,
    /// Partitions assigned here, held offline in their epoch because
    /// their files are damaged: `(topic id, partition, epoch)`. The
    /// controller marks them offline in the assignment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline: Vec<(String, u32, u32)>,
    /// Ids of topics this broker created that the assignment does not name
    /// yet: the controller's listing of `topics/` may not show them for a
    /// minute on NFS (see `cluster::announced`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<String>,
}

/// Publishes `hb` as this broker's heartbeat (atomic replace).
pub async fn write(vfs: &dyn Vfs, hb: &Heartbeat) -> io::Result<()> {
    crate::stored::write_json(vfs, &layout::heartbeat(hb.broker_id), KIND, hb).await
}

/// `(topic id or coordinator key, partition or slot, epoch)` rows.
pub(crate) type Leaderships = Vec<(String, u32, u32)>;
/// Leaderships this broker cannot hold, for its next heartbeat: `stuck`
/// and `claimed_past`.
pub(crate) type StuckReport = Box<dyn Fn() -> (Leaderships, Leaderships) + Send + Sync>;
/// Partitions held offline here, for its next heartbeat.
pub(crate) type OfflineReport = Box<dyn Fn() -> Leaderships + Send + Sync>;

/// Publishes this broker's heartbeat every interval from a task of its own,
/// and at once when it has new topics to announce.
/// The broker's follow loop can be busy for long (taking over hundreds of
/// partitions on a volume with milliseconds per call); a heartbeat that
/// waited for it would make a live broker look dead to the controller and
/// move its partitions away, which makes the next broker busier still.
pub(crate) struct Beater {
    state: Arc<Mutex<Heartbeat>>,
    task: tokio::task::JoinHandle<()>,
    superseded: tokio::sync::watch::Receiver<Option<String>>,
}

impl Beater {
    /// Writes the first heartbeat now (so the controller can see this
    /// broker before its first follow), then one every `interval`.
    pub async fn start(
        vfs: Arc<dyn Vfs>,
        mut first: Heartbeat,
        interval: Duration,
        stuck: StuckReport,
        offline: OfflineReport,
        announced: Arc<Announced>,
        claimed: IdClaim,
    ) -> Self {
        let mut temps_left = false;
        (first.stuck, first.claimed_past) = stuck();
        first.offline = offline();
        first.created = announced.pending();
        match write(vfs.as_ref(), &first).await {
            Ok(()) => first.sequence += 1,
            Err(e) => {
                temps_left = true;
                tracing::warn!(error = %e, "heartbeat not published; retrying next tick");
            }
        }
        let broker_id = first.broker_id;
        let state = Arc::new(Mutex::new(first));
        let shared = state.clone();
        let (supersede, superseded) = tokio::sync::watch::channel(None);
        let task = tokio::spawn(async move {
            loop {
                // `biased`: see the follow loop in `node`.
                tokio::select! {
                    biased;
                    () = tokio::time::sleep(interval) => {}
                    () = announced.changed() => {}
                }
                // A failed replace may leave its temp file; this broker is
                // the only writer of its heartbeat, so it sweeps its own.
                if temps_left {
                    temps_left = sweep(vfs.as_ref(), broker_id).await.is_err();
                }
                // Before writing: a newer process of this id must not
                // have its heartbeat overwritten by this one.
                match id_claim::superseded_by(vfs.as_ref(), &claimed).await {
                    Ok(Some(by)) => {
                        tracing::error!(
                            broker_id,
                            newer = by,
                            "a newer process claimed this broker id: stopping"
                        );
                        let _ = supersede.send(Some(by));
                        return;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "newer claims of this broker id not read")
                    }
                }
                let mut hb = lock(&shared).clone();
                (hb.stuck, hb.claimed_past) = stuck();
                hb.offline = offline();
                hb.created = announced.pending();
                match write(vfs.as_ref(), &hb).await {
                    Ok(()) => lock(&shared).sequence = hb.sequence + 1,
                    Err(e) => {
                        temps_left = true;
                        tracing::warn!(error = %e, "heartbeat not published; retrying next tick");
                    }
                }
            }
        });
        Self {
            state,
            task,
            superseded,
        }
    }

    /// The newer process's claim of this id, once one is seen.
    pub fn superseded(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.superseded.clone()
    }

    /// Stops the task and hands back the heartbeat, for the writes of a
    /// controlled shutdown (same incarnation, next sequence).
    pub fn stop(self) -> Heartbeat {
        self.task.abort();
        lock(&self.state).clone()
    }
}

fn lock(m: &Mutex<Heartbeat>) -> std::sync::MutexGuard<'_, Heartbeat> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes temp files a previous incarnation of this broker left behind.
pub async fn sweep(vfs: &dyn Vfs, broker_id: u32) -> io::Result<usize> {
    sweep_temps(vfs, &layout::heartbeat(broker_id)).await
}

/// Reads broker `id`'s latest heartbeat (fresh open by path).
pub async fn read(vfs: &dyn Vfs, id: u32) -> io::Result<Heartbeat> {
    let path = layout::heartbeat(id);
    crate::stored::read_json(vfs, &path, KIND)
        .await?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no heartbeat", path.display()),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfs::durable::seal;

    #[tokio::test]
    async fn round_trips_and_rejects_garbage() {
        let vfs = vfs::MemVfs::new();
        vfs.mkdir(std::path::Path::new(layout::BROKERS_DIR))
            .await
            .unwrap();
        let hb = Heartbeat {
            broker_id: 2,
            incarnation: 9,
            sequence: 4,
            advertised: "h:1".into(),
            endpoints: Default::default(),
            leaving: false,
            stuck: vec![("t".into(), 0, 3)],
            claimed_past: vec![("t".into(), 0, 7)],
            offline: Vec::new(),
            created: vec!["t".into()],
        };
        write(&vfs, &hb).await.unwrap();
        assert_eq!(read(&vfs, 2).await.unwrap(), hb);
        assert_eq!(
            read(&vfs, 3).await.unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        for garbage in [
            &b""[..],
            &seal(KIND, b"{")[..],
            &seal("other-kind", b"{}")[..],
        ] {
            vfs::durable::atomic_replace(
                &vfs,
                &layout::heartbeat(2),
                bytes::Bytes::copy_from_slice(garbage),
            )
            .await
            .unwrap();
            let e = read(&vfs, 2).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        }
    }
}
