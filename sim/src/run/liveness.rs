//! Once the faults end: the workload stops, the volume heals, and the
//! cluster must converge within [`LIVENESS`]: every partition read to its
//! end, the actors' final reads answered, deletions finished, and the
//! volume clean as `kaas fsck` reads it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use madsim::runtime::NodeHandle;
use tokio::task::JoinHandle;
use vfs::model::ModelNfs;

use crate::actors::{Cast, Play, Stage};
use crate::checker::Invariant;
use crate::history::{Event, History};

use super::OBSERVER_HOST;
use super::brokers::Cluster;

/// Longer than any freeze a fault point starts lasts.
const FREEZE_MAX: Duration = Duration::from_secs(30);

/// Latency of every call of the healed volume, in microseconds.
const HEALED_LATENCY_US: (u64, u64) = (50, 500);

/// Simulated time the cluster gets to converge once faults healed.
const LIVENESS: Duration = Duration::from_secs(60);

/// The final log of each partition of the workload topic that converged:
/// `(offset, value, leader epoch)`.
pub(crate) type Logs = BTreeMap<i32, Vec<(i64, String, i32)>>;

/// The workload ends (the clients' last retries included), then the
/// volume and the brokers heal.
pub(crate) async fn heal(cluster: &Cluster, faults_end: Duration, tasks: Vec<JoinHandle<()>>) {
    let start = cluster.start;
    tokio::time::sleep(faults_end.saturating_sub(start.elapsed())).await;
    for t in tasks {
        let _ = t.await;
    }
    cluster
        .trace
        .record(format!("{} workload done", super::stamp(start)()));
    // The volume heals too: its caches stay, its injected faults stop, and
    // it answers as a healthy server on the same network does, in 0.05 to
    // 0.5 ms a call (never at once: a broker's futures wait on it, and a
    // future that holds what others need while nobody polls it shows only
    // then).
    cluster.nfs.set_faults(vfs::model::Faults {
        latency_min_us: HEALED_LATENCY_US.0,
        latency_max_us: HEALED_LATENCY_US.1,
        ..vfs::model::Faults::default()
    });
    // A broker a fault point froze (8 to 20 s) may still be asleep: the
    // faults heal once it wakes up, not before (seed 211: a request sent
    // to a broker frozen 6 s past the workload's end went unanswered).
    while cluster.frozen.any_held() && start.elapsed() < faults_end + FREEZE_MAX {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After the final reads: the reader's node (for the reads of the volume
/// still to come), the workload topic's final logs, and the deadline.
pub(crate) struct Converged {
    pub reader: NodeHandle,
    pub logs: Logs,
    pub deadline: Duration,
}

/// The final reader reads every partition of the workload topic (and
/// what actors ask it to read after it) while each actor's final nodes
/// run alongside.
pub(crate) async fn final_reads(cluster: &Cluster, cast: &Cast, stage: &Stage) -> Converged {
    let reader = cluster
        .handle
        .create_node()
        .name("final-reader")
        .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1)))
        .build();
    let session = stage.session("final-reader");
    let deadline = cluster.start.elapsed() + LIVENESS;
    let after: Vec<Play> = cast
        .iter()
        .filter_map(|a| a.after_converge(stage, deadline))
        .collect();
    let finales: Vec<JoinHandle<()>> = cast
        .iter()
        .flat_map(|a| a.finale(stage, deadline))
        .map(|f| {
            let node = cluster
                .handle
                .create_node()
                .name(f.name)
                .ip(IpAddr::V4(f.ip));
            node.build().spawn(f.play)
        })
        .collect();
    let logs = reader
        .spawn(async move {
            let logs = crate::actors::final_reader::converge(session, deadline).await;
            for read in after {
                read.await;
            }
            logs
        })
        .await
        .unwrap_or_default();
    for f in finales {
        let _ = f.await;
    }
    Converged {
        reader,
        logs,
        deadline,
    }
}

/// What each actor finds on the volume once the cluster converged, read
/// on the final reader's node, into the history.
pub(crate) async fn final_states(converged: &Converged, cast: &Cast, stage: &Stage) {
    for read in cast
        .iter()
        .flat_map(|a| a.final_state(stage, converged.deadline))
    {
        if let Ok(event) = converged.reader.spawn(read).await {
            stage.history.record(stage.start.elapsed(), event);
        }
    }
}

/// A deletion the admin asked for: topic id, the volume's creation mark
/// before the request, and whether it was acknowledged.
pub(crate) type Deletion = (String, u64, bool);

/// Every deletion the history holds.
pub(crate) fn deletions(history: &History) -> Vec<Deletion> {
    history
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::Deleted {
                topic_id,
                mark,
                acknowledged,
            } => Some((topic_id, mark, acknowledged)),
            _ => None,
        })
        .collect()
}

/// Waits until the deletions left nothing behind, or the deadline.
pub(crate) async fn deletions_done(cluster: &Cluster, deleted: &[Deletion], deadline: Duration) {
    while !leftovers(&cluster.nfs, deleted).is_empty() && cluster.start.elapsed() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The volume as `kaas fsck` reads it, now that the cluster converged.
/// Errors are damage; warnings and notices are states a live cluster may
/// be in, such as a segment being rolled.
pub(crate) async fn fsck(cluster: &Cluster, reader: &NodeHandle) -> Vec<String> {
    let volume = cluster.nfs.host(OBSERVER_HOST);
    let fsck = reader
        .spawn(async move { broker::fsck::check(&volume).await })
        .await;
    match fsck {
        Ok(Ok(report)) => report
            .findings
            .into_iter()
            .filter(|f| f.severity == broker::fsck::Severity::Error)
            .map(|f| Invariant::FsckClean.says(format!("{}: {}", f.path, f.what)))
            .collect(),
        Ok(Err(e)) => vec![Invariant::FsckClean.says(format!("volume unreadable: {e}"))],
        Err(e) => vec![Invariant::FsckClean.says(format!("fsck did not finish: {e}"))],
    }
}

/// Deletions must have converged once the cluster did: no tombstone of a
/// deleted topic is left on the server (read from the server's own tree,
/// so no client cache and no injected fault stands in the way).
pub(crate) fn leftovers(nfs: &ModelNfs, deleted: &[Deletion]) -> Vec<String> {
    let tree = nfs.dump();
    let paths: Vec<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    let inside = |dir: &str| -> Vec<&str> {
        paths
            .iter()
            .filter_map(|q| q.strip_prefix(dir).and_then(|r| r.strip_prefix('/')))
            .collect()
    };
    let tombstones = paths.iter().filter(|p| {
        p.strip_prefix("topics/")
            .is_some_and(|rest| rest.starts_with(".tombstone-") && !rest.contains('/'))
    });
    // A deleted topic's own directory must be gone too (renamed away at
    // once, then reaped), not linger under its id, and nothing may create
    // it again.
    let mut recreated = Vec::new();
    let undeleted = deleted.iter().filter_map(|(id, mark, acknowledged)| {
        let dir = format!("topics/{id}");
        if !paths.contains(&dir.as_str()) {
            return None;
        }
        // The topic's own directory predates the request to delete it; one
        // made since was made again.
        if nfs.created_since(&dir, *mark).contains(&dir) {
            recreated.push(Invariant::DeletedPartitionRecreated.says(format!(
                "{dir} of a deleted topic was made again after its deletion was asked for; it holds {:?}",
                inside(&dir)
            )));
            None
        } else {
            // Only an acknowledged deletion must have happened.
            acknowledged.then_some(dir)
        }
    });
    tombstones
        .map(|p| {
            Invariant::DeletionLeftover.says(format!(
                "{p} was never reaped; it still holds {:?}",
                inside(p)
            ))
        })
        .chain(undeleted.map(|d| {
            Invariant::DeletionLeftover.says(format!(
                "{d} of a deleted topic is still there; it holds {:?}",
                inside(&d)
            ))
        }))
        .collect::<Vec<_>>()
        .into_iter()
        .chain(recreated)
        .collect()
}
