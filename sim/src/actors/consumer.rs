//! The workload topic's consumer: reads in order, commits its positions,
//! and now and then resumes from them.

use std::collections::BTreeMap;
use std::time::Duration;

use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;
use crate::workload::{PARTITIONS, TOPIC};

/// A consumer reading every partition in order, committing its positions,
/// and now and then "restarting": resuming from the committed offsets.
pub async fn consumer(mut s: Session, until: Duration) {
    let mut pos: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut polls = 0u64;
    let mut restart = false;
    while s.now() < until {
        for partition in 0..PARTITIONS {
            let from = pos[&partition];
            if let Some((got, _)) = s.fetch(TOPIC, partition, from).await {
                if let Some(last) = got.last() {
                    pos.insert(partition, last.0 + 1);
                }
                s.history.record(
                    s.now(),
                    Event::Poll {
                        client: s.name.clone(),
                        partition,
                        from,
                        got: got.into_iter().map(|(o, v, _)| (o, v)).collect(),
                    },
                );
            }
            polls += 1;
            if polls % 4 == 0 {
                let offset = pos[&partition];
                restart |= !s.commit(partition, offset, -1, "").await;
            }
        }
        // Now and then, and whenever a commit failed (the coordinator may
        // have moved), it restarts from the committed offsets.
        if restart || madsim::rand::thread_rng().gen_ratio(1, 15) {
            restart = false;
            for partition in 0..PARTITIONS {
                if let Some(offset) = s.committed(partition).await {
                    pos.insert(partition, offset.max(0));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The workload topic's consumer.
pub struct Consumer;
pub static CONSUMER: Consumer = Consumer;

impl Actor for Consumer {
    fn name(&self) -> &'static str {
        "consumer"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("consumer-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(consumer(s, stage.faults_end))
    }
}
