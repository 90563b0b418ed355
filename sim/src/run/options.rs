//! What a run is asked to do, and what it reports.

use std::collections::BTreeMap;
use std::time::Duration;

use vfs::model::{FaultStats, NfsConfig};

use crate::actors::Cast;
use crate::checker::Invariant;
use crate::fault_points::Stats;
use crate::swarm::{self, Pace, PointRates};
use crate::swarm::{FAULT_KINDS, FaultSet};

use super::Fault;

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub brokers: u32,
    pub duration: Duration,
    /// The shared volume's behaviour and faults.
    pub nfs: NfsConfig,
    /// Fault kinds the timeline may use (see `swarm::FAULT_KINDS`).
    pub faults: FaultSet,
    /// Scripted faults (a scenario's timeline), on top of the seeded ones.
    pub scripted: Vec<Fault>,
    /// Historical bugs switched back on (`broker::historical`).
    pub reintroduce: Vec<String>,
    /// The clients the run starts (see `actors`).
    pub cast: Cast,
    /// Whether the idempotent producer and the trimmer wait for a produce
    /// answer as long as Kafka's producers do (`request.timeout.ms`, 30 s)
    /// rather than the simulator's 4 s: the answer of a leader frozen past
    /// its successor's takeover then still arrives, and is judged.
    pub patient_producers: bool,
    /// Producer ids per block a broker claims (`--producer-id-block`).
    pub producer_id_block: u32,
    /// How the seeded timeline spaces its faults.
    pub pace: Pace,
    /// What fault points in the broker do when reached.
    pub points: PointRates,
    /// The swarm world this run was drawn from (`pinned` for a fixed mix).
    pub world: &'static str,
}

impl Options {
    /// The default run: `brokers` brokers on a hostile model NFS, every fault.
    pub fn new(seed: u64, brokers: u32, duration: Duration) -> Self {
        Self::with_faults(
            seed,
            brokers,
            duration,
            FAULT_KINDS.iter().copied().collect(),
        )
    }

    pub fn with_faults(seed: u64, brokers: u32, duration: Duration, faults: FaultSet) -> Self {
        let nfs = if faults.contains("nfs") {
            NfsConfig::hostile()
        } else {
            NfsConfig::default()
        };
        Self {
            seed,
            brokers,
            duration,
            nfs,
            faults,
            scripted: Vec::new(),
            reintroduce: Vec::new(),
            cast: Cast::everyone(),
            patient_producers: true,
            producer_id_block: 3,
            pace: Pace::CLASSIC,
            points: PointRates::default(),
            world: "pinned",
        }
    }

    /// Whether failover time is judged (`failover-slow`): only where
    /// nothing else moves leadership or holds a broker up on purpose. The
    /// movers reassign partitions, the repairer takes them over in epochs
    /// of its own, fault points pause and crash brokers mid-step, and
    /// injected stalls hold volume calls for seconds; any of them may
    /// slow a failover for its own good reasons.
    pub fn failover_is_judged(&self) -> bool {
        !self.cast.iter().any(|a| a.moves_leaders())
            && !self.points.active()
            && self.nfs.faults.stall_probability == 0.0
    }

    /// Whether the brokers enforce ACLs and take SASL logins: some actor
    /// of the cast needs them.
    pub fn secured(&self) -> bool {
        self.cast.iter().any(|a| a.needs_authorizer())
    }

    /// This run's world in one line (see `swarm::Profile::describe`).
    pub fn describe_world(&self) -> String {
        swarm::Profile {
            world: self.world,
            faults: self.faults.clone(),
            nfs: self.nfs.clone(),
            pace: self.pace.clone(),
            points: self.points.clone(),
        }
        .describe()
    }

    /// A run in the world `seed` draws (see `swarm`).
    pub fn swarm(seed: u64, brokers: u32, duration: Duration) -> Self {
        Self::in_world(swarm::draw(seed), seed, brokers, duration)
    }

    /// A run in `profile`'s world.
    pub fn in_world(profile: swarm::Profile, seed: u64, brokers: u32, duration: Duration) -> Self {
        // Where failover time is judged, nothing else moves leadership.
        let leaders_left_alone = profile.world == "power-loss";
        Self {
            cast: if leaders_left_alone {
                Cast::everyone().without(&["movers", "repairer"])
            } else {
                Cast::everyone()
            },
            nfs: profile.nfs,
            pace: profile.pace,
            points: profile.points,
            world: profile.world,
            ..Self::with_faults(seed, brokers, duration, profile.faults)
        }
    }
}

#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    /// The world the run was in (`Options::describe_world`).
    pub world: String,
    pub digest: String,
    pub events: usize,
    pub faults: usize,
    /// Client operations in the history, and how many writes were acknowledged.
    pub operations: usize,
    pub acked_writes: usize,
    /// Faults injected, by kind.
    pub fault_counts: BTreeMap<&'static str, usize>,
    /// Operations each invariant was checked against.
    pub checked: BTreeMap<Invariant, usize>,
    /// Simulated time the run took.
    pub simulated: Duration,
    /// What the model NFS injected.
    pub nfs: FaultStats,
    /// `.nfs` files left on the volume at the end.
    pub nfs_leftovers: usize,
    /// Fault points reached and what they did.
    pub points: Stats,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}
