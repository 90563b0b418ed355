//! An operator running `kaas fsck --repair` against the live cluster from
//! a host of its own, every few seconds or back to back, while the faults
//! fall. Its repairs must be safe on a running cluster: one that removed
//! anything a leader still needs shows as lost-write, missing-segment or
//! fsck-clean.

use std::sync::Arc;
use std::time::Duration;

use madsim::rand::Rng;
use tokio::time::Instant;
use vfs::Vfs;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::{Event, History};
use crate::session::Session;

/// The operator's host of the volume.
pub const HOST: u32 = 1_001;

pub async fn repairer(volume: Arc<dyn Vfs>, history: History, start: Instant, until: Duration) {
    // Half the seeds, a periodic job; the other half, an operator running
    // it in a loop, so that repairs land inside the short windows of the
    // cluster's own steps (it caught an earlier repair removing segments a
    // takeover in progress was about to name: seeds 124, 275).
    let every = if madsim::rand::thread_rng().gen_bool(0.5) {
        3_000..8_000
    } else {
        50..500
    };
    while start.elapsed() < until {
        let pause = madsim::rand::thread_rng().gen_range(every.clone());
        tokio::time::sleep(Duration::from_millis(pause)).await;
        // A quarter of the rounds also give up the damage of one of the
        // workload's partitions: a takeover by a party the assignment
        // does not name, which the cluster must survive without losing an
        // acknowledged record, and which must find no damage here.
        if madsim::rand::thread_rng().gen_bool(0.25) {
            truncate(&volume, &history, start).await;
        }
        if let Ok(r) = broker::fsck::repair(volume.as_ref()).await {
            history.record(
                start.elapsed(),
                Event::Repaired {
                    removed: r.done.iter().map(|a| a.path.clone()).collect(),
                    pending: r.pending.len(),
                },
            );
        }
    }
}

async fn truncate(volume: &Arc<dyn Vfs>, history: &History, start: Instant) {
    let p = madsim::rand::thread_rng().gen_range(0..crate::workload::PARTITIONS);
    let spec = format!("{}-{p}", crate::workload::TOPIC);
    match broker::fsck::truncate_damaged(volume.clone(), &spec).await {
        Ok(t) => history.record(
            start.elapsed(),
            Event::Truncated {
                partition: spec,
                epoch: t.epoch,
                given_up: t.given_up.iter().map(|g| (g.from, g.to)).collect(),
            },
        ),
        Err(e) => tracing::debug!(partition = spec, error = %e, "truncate-damaged failed"),
    }
}

/// An operator running `kaas fsck --repair` against the live cluster.
pub struct Repairer;
pub static REPAIRER: Repairer = Repairer;

impl Actor for Repairer {
    fn name(&self) -> &'static str {
        "repairer"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::operator(
            "repairer-0",
            std::net::Ipv4Addr::new(10, 0, 3, 9),
        )]
    }

    fn play(&self, _role: &'static str, _s: Session, stage: &Stage) -> Play {
        let volume = stage.volume(HOST);
        Box::pin(repairer(
            volume,
            stage.history.clone(),
            stage.start,
            stage.faults_end,
        ))
    }

    fn moves_leaders(&self) -> bool {
        true
    }
}
