//! A client asking for producer ids all the time.

use std::time::Duration;

use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::session::Session;

/// Asks random brokers for producer ids until `until`, quickly enough that
/// brokers claim id blocks all the time and race each other for them
/// (the simulator's blocks are tiny).
pub(crate) async fn id_racer(mut s: Session, until: Duration) {
    while s.now() < until {
        s.init_producer_id().await;
        let pause = madsim::rand::thread_rng().gen_range(20..300);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// A client asking for producer ids all the time.
pub struct IdRacer;
pub static ID_RACER: IdRacer = IdRacer;

impl Actor for IdRacer {
    fn name(&self) -> &'static str {
        "id-racer"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("ids-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(id_racer(s, stage.faults_end))
    }
}
