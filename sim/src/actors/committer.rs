//! A client committing its group's offsets all the time.

use std::collections::BTreeMap;
use std::time::Duration;

use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::session::Session;
use crate::workload::{COMMITTER_GROUP, PARTITIONS};

const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Commits offsets for a group of its own every few tens of milliseconds,
/// as a stream processor with a short commit interval does, so that many
/// commits are in flight whenever a coordinator freezes, crashes or moves.
/// Offsets grow with every commit; after a failed one it reads the
/// committed offsets back (the coordinator may have moved). Each commit
/// waits for its answer as long as Kafka clients do (the late answer of a
/// coordinator frozen past its successor's takeover is judged) or, half
/// the time, only the simulator's few seconds, as a client with a short
/// `request.timeout.ms` does: it moves on to the successor and commits
/// there while the frozen coordinator still holds older offsets, which
/// [`lag_reader`] may then be answered from.
pub(crate) async fn committer(mut s: Session, until: Duration) {
    s.group = COMMITTER_GROUP.to_owned();
    let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut read_back = false;
    while s.now() < until {
        s.commit_timeout = if madsim::rand::thread_rng().gen_bool(0.5) {
            COMMIT_TIMEOUT
        } else {
            crate::client::CALL_TIMEOUT
        };
        let partition = madsim::rand::thread_rng().gen_range(0..PARTITIONS);
        let offset = next[&partition] + madsim::rand::thread_rng().gen_range(1..5);
        next.insert(partition, offset);
        let acked = s.commit(partition, offset, -1, "").await;
        if read_back || !acked || madsim::rand::thread_rng().gen_ratio(1, 10) {
            read_back = !acked;
            for p in 0..PARTITIONS {
                read_back |= s.committed(p).await.is_none();
            }
        }
        let pause = madsim::rand::thread_rng().gen_range(20..120);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// A client committing offsets all the time.
pub struct Committer;
pub static COMMITTER: Committer = Committer;

impl Actor for Committer {
    fn name(&self) -> &'static str {
        "committer"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("committer-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(committer(s, stage.faults_end))
    }
}
