//! The run's clients, each kind in a file of its own behind [`Actor`]:
//! the nodes it runs on, what each does while the faults run, what it
//! reads once they healed, and what it finds on the volume at the end. A
//! run's [`Cast`] lists the actors it starts, in the order their nodes are
//! made (a seed's digest depends on that order).

use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use vfs::Vfs;
use vfs::model::ModelNfs;

use crate::history::{Event, History};
use crate::session::Session;

pub mod admin;
pub mod committer;
pub mod compactor;
pub mod consumer;
pub mod creators;
pub mod final_reader;
pub mod guard;
pub mod id_racer;
pub mod lag_reader;
pub mod logins;
pub mod markers;
pub mod members;
pub mod movers;
pub mod next_members;
pub mod pipeliner;
pub mod producer;
pub mod quota_setters;
pub mod repairer;
pub mod transactor;
pub mod trimmer;

/// What an actor does on one node.
pub type Play = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A read of the volume once the cluster converged, and the event it
/// leaves in the history.
pub type FinalRead = Pin<Box<dyn Future<Output = Event> + Send + 'static>>;

/// What the run gives its actors.
pub struct Stage {
    pub brokers: u32,
    pub start: Instant,
    pub history: History,
    pub nfs: ModelNfs,
    /// When the faults end: the actors' work stops by then.
    pub faults_end: Duration,
    /// Producers wait for a produce answer as long as Kafka's do
    /// (`Options::patient_producers`).
    pub patient: bool,
}

impl Stage {
    /// A client session named `name` on this run's cluster and history.
    pub fn session(&self, name: &str) -> Session {
        Session::new(name, self.brokers, self.start, self.history.clone())
    }

    /// The volume as NFS host `host` sees it.
    pub fn volume(&self, host: u32) -> Arc<dyn Vfs> {
        Arc::new(self.nfs.host(host))
    }
}

/// One of an actor's nodes while the faults run.
pub struct Role {
    pub name: &'static str,
    /// Its address: `None` for the next one of the clients' range
    /// (10.0.1.x); an actor whose address a broker rule names (ACLs,
    /// quotas) has one of its own.
    pub ip: Option<Ipv4Addr>,
    /// Creates the workload topic before it starts (retrying until the
    /// faults end at most).
    pub creates_topic: bool,
    /// Its session sees the volume's creation mark and I/O error count.
    pub sees_volume: bool,
}

impl Role {
    /// A workload client: the next address, the workload topic first, the
    /// volume's marks in its session.
    pub const fn client(name: &'static str) -> Self {
        Self {
            name,
            ip: None,
            creates_topic: true,
            sees_volume: true,
        }
    }

    /// An operator's node at an address of its own.
    pub const fn operator(name: &'static str, ip: Ipv4Addr) -> Self {
        Self {
            name,
            ip: Some(ip),
            creates_topic: false,
            sees_volume: false,
        }
    }
}

/// A node an actor starts once the faults healed, alongside the final
/// reader.
pub struct Finale {
    pub name: &'static str,
    pub ip: Ipv4Addr,
    pub play: Play,
}

/// One kind of client of the run.
pub trait Actor: Send + Sync {
    /// Its name (`Cast::without`).
    fn name(&self) -> &'static str;

    /// Its nodes while the faults run, in the order they are made.
    fn roles(&self) -> Vec<Role> {
        Vec::new()
    }

    /// What `role` does with `session` until the faults end.
    fn play(&self, role: &'static str, session: Session, stage: &Stage) -> Play;

    /// Whether the brokers must enforce ACLs and take SASL logins for it.
    fn needs_authorizer(&self) -> bool {
        false
    }

    /// Whether it moves leadership on purpose (then failover time is not
    /// judged: `Options::failover_is_judged`).
    fn moves_leaders(&self) -> bool {
        false
    }

    /// Its nodes once the faults healed, until `deadline`.
    fn finale(&self, _stage: &Stage, _deadline: Duration) -> Vec<Finale> {
        Vec::new()
    }

    /// What the final reader reads for it once the workload topic
    /// converged, on the final reader's node.
    fn after_converge(&self, _stage: &Stage, _deadline: Duration) -> Option<Play> {
        None
    }

    /// What it reads from the volume once the cluster converged.
    fn final_state(&self, _stage: &Stage, _deadline: Duration) -> Vec<FinalRead> {
        Vec::new()
    }
}

/// The actors of a run, in the order their nodes are made.
#[derive(Clone)]
pub struct Cast(Vec<&'static dyn Actor>);

impl Cast {
    /// Every actor: the default run.
    pub fn everyone() -> Self {
        Self(vec![
            &producer::PRODUCERS,
            &consumer::CONSUMER,
            &admin::ADMIN,
            &members::MEMBERS,
            &creators::CREATORS,
            &trimmer::TRIMMER,
            &compactor::COMPACTOR,
            &id_racer::ID_RACER,
            &committer::COMMITTER,
            &lag_reader::LAG_READER,
            &next_members::NEXT_MEMBERS,
            &transactor::TRANSACTORS,
            &transactor::TXN_READER,
            &pipeliner::PIPELINER,
            &guard::GUARD,
            &logins::LOGINS,
            &markers::MARKERS,
            &movers::MOVERS,
            &quota_setters::QUOTA_SETTERS,
            &repairer::REPAIRER,
        ])
    }

    /// The same cast without the actors named.
    pub fn without(mut self, names: &[&str]) -> Self {
        self.0.retain(|a| !names.contains(&a.name()));
        self
    }

    /// Only the actors named, in the cast's order.
    pub fn only(mut self, names: &[&str]) -> Self {
        self.0.retain(|a| names.contains(&a.name()));
        self
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|a| a.name() == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &'static dyn Actor> + '_ {
        self.0.iter().copied()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|a| a.name()).collect()
    }
}

impl std::fmt::Debug for Cast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_actor_and_node_has_a_name_and_an_address_of_its_own() {
        let cast = Cast::everyone();
        let names: BTreeSet<_> = cast.names().into_iter().collect();
        assert_eq!(names.len(), cast.names().len(), "{:?}", cast.names());
        let roles: Vec<Role> = cast.iter().flat_map(|a| a.roles()).collect();
        let role_names: BTreeSet<_> = roles.iter().map(|r| r.name).collect();
        assert_eq!(role_names.len(), roles.len());
        // The clients' range (10.0.1.x) is handed out in order; an actor's
        // own address must be outside it, and its own.
        let own: Vec<Ipv4Addr> = roles.iter().filter_map(|r| r.ip).collect();
        assert!(own.iter().all(|ip| ip.octets()[2] != 1), "{own:?}");
        assert_eq!(own.iter().collect::<BTreeSet<_>>().len(), own.len());
    }

    #[test]
    fn a_cast_keeps_its_order_whatever_is_left_out() {
        let cast = Cast::everyone().without(&["creators", "movers"]);
        assert!(!cast.has("creators") && !cast.has("movers") && cast.has("trimmer"));
        let order = Cast::everyone().names();
        let kept = cast.names();
        let positions: Vec<usize> = kept
            .iter()
            .map(|n| order.iter().position(|o| o == n).unwrap_or(usize::MAX))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{kept:?}");
        assert_eq!(
            Cast::everyone().only(&["pipeliner", "producers"]).names(),
            ["producers", "pipeliner"]
        );
    }
}
