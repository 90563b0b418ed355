//! A lag exporter reading the committer's offsets.

use std::time::Duration;

use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::session::Session;
use crate::workload::{COMMITTER_GROUP, PARTITIONS};

/// Reads the committer's offsets all the time, as a lag exporter does, and
/// keeps asking the coordinator it knows through a run of failed calls
/// before it looks the coordinator up again (a client whose coordinator
/// cache is slow to notice a move). So a request it sends to a frozen
/// coordinator after the successor acknowledged newer commits is answered
/// when the old coordinator wakes up, before it learns it was deposed:
/// from its memory, unless it confirms its epoch first.
pub(crate) async fn lag_reader(mut s: Session, until: Duration) {
    /// Failed calls in a row before the coordinator is looked up again.
    const STICKY: u32 = 8;
    s.group = COMMITTER_GROUP.to_owned();
    let mut failed = 0;
    while s.now() < until {
        let partition = madsim::rand::thread_rng().gen_range(0..PARTITIONS);
        let known = s.coordinator;
        if s.committed(partition).await.is_some() {
            failed = 0;
        } else {
            failed += 1;
            if failed < STICKY {
                s.coordinator = known;
            } else {
                failed = 0;
            }
        }
        let pause = madsim::rand::thread_rng().gen_range(50..300);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// A lag exporter reading the committer's offsets.
pub struct LagReader;
pub static LAG_READER: LagReader = LagReader;

impl Actor for LagReader {
    fn name(&self) -> &'static str {
        "lag-reader"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("lag-reader-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(lag_reader(s, stage.faults_end))
    }
}
