//! Swarm testing: each seed draws its own world.
//!
//! One fixed fault mix explores one corner of the space however many seeds
//! run: the faults that mask a bug (a crash that hides a torn write) come
//! along with the ones that expose it. So by default every seed draws a
//! profile (which cluster faults and which NFS faults are on, how often and
//! how hard) from its own seed, before the run starts: from calm (nothing
//! on) to brutal (everything on, often), with a few named worlds that a
//! mix would rarely produce (only lost replies; many NFS server restarts;
//! long pauses; write-back storms; clock jumps only). `--faults` pins one
//! fixed mix instead (the pre-swarm behaviour).
//!
//! The draw uses its own ChaCha stream seeded by the run's seed, outside
//! the simulated world, so a seed always draws the same profile and the run
//! replays exactly.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;
use vfs::model::{Faults, NfsConfig};

use crate::args::FaultSet;

/// How the seeded timeline spaces its cluster faults.
#[derive(Clone, Debug, PartialEq)]
pub struct Pace {
    /// How long each fault lasts, in ms (uniform in `[min, max)`).
    pub lasts_ms: (u64, u64),
    /// The quiet time after a fault healed, before the next one, in ms.
    pub gap_ms: (u64, u64),
    /// How long a broker pause lasts, when not `lasts_ms`: zombie pauses,
    /// longer than a session timeout, in worlds that also do other things.
    pub pause_ms: Option<(u64, u64)>,
}

impl Pace {
    /// The pre-swarm pace: faults of 1 to 8 s, 2 to 10 s apart.
    pub const CLASSIC: Pace = Pace {
        lasts_ms: (1_000, 8_000),
        gap_ms: (2_000, 10_000),
        pause_ms: None,
    };
}

/// How often a fault point (`vfs::fault_point`) acts when a broker reaches
/// it, per reach.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointRates {
    /// Hold the calling task for up to `delay_max_ms`.
    pub delay: f64,
    pub delay_max_ms: u64,
    /// Hold the calling task for 1 to 8 s while the rest of its broker runs
    /// on (a zombie between two steps of a volume change).
    pub pause: f64,
    /// Crash the calling broker right there (restarted 1 to 10 s later).
    pub crash: f64,
    /// Most crashes one run takes from fault points.
    pub max_crashes: u32,
    /// The points this world aims at, each with the reach that acts
    /// (`(point, k)`: its k-th reach, and its 2k-th, 4k-th, ..., crash or freeze the
    /// broker there), so that every step boundary is hit in some seeds, a
    /// rare one as surely as a busy one, without a storm at the busy ones.
    pub focus: Vec<(&'static str, u32)>,
    /// Reaches of aimed-at points count from this far into the run, so
    /// that the aimed acts fall while the workload runs, not all during
    /// the first takeovers at boot.
    pub aim_after_ms: u64,
    /// The only points the random acts (delay, pause, freeze, crash) act
    /// at, when not empty: a world that hammers one protocol's steps
    /// without slowing every other one.
    pub within: Vec<&'static str>,
    /// How long the random freezes last, in ms, when not 8 to 20 s.
    pub freeze_ms: Option<(u64, u64)>,
}

/// Every fault point in the broker and `vfs::durable` (a test checks this
/// list against the source).
pub const POINTS: &[&str] = &[
    "assignment.still-newest",
    "checkpoint.written",
    "claim.slot-created",
    "claim.slot-filled",
    "compaction.manifest-written",
    "compaction.planned",
    "compaction.segment-created",
    "compaction.segments-written",
    "create-partitions.staged",
    "create-topic.placed",
    "create-topic.staged",
    "delete-records.decided",
    "delete-records.manifest-written",
    "delete-topic.tombstoned",
    "election.next-chosen",
    "election.slot-created",
    "election.slot-filled",
    "flush.acknowledged",
    "flush.synced",
    "group-heartbeat.arrived",
    "group-load.adopted",
    "group-load.listed",
    "group-load.older-epoch-fenced",
    "group-load.read",
    "group-save.decided",
    "group-save.saved",
    "group-save.superseding",
    "group-save.written",
    "preferred-change.claimed",
    "preferred-change.read",
    "preferred-change.slot-created",
    "producer-ids.block-chosen",
    "quota-change.claimed",
    "quota-change.read",
    "quota-change.slot-created",
    "remove.children-removed",
    "replace.renamed",
    "replace.temp-durable",
    "retention.decided",
    "retention.manifest-written",
    "retention.unlinked",
    "roll.indexes-written",
    "roll.segment-created",
    "security-change.claimed",
    "security-change.read",
    "security-change.slot-created",
    "takeover.decided",
    "takeover.epoch-claimed",
    "takeover.fenced",
    "takeover.manifest-written",
    "takeover.older-epoch-fenced",
    "takeover.segment-written",
    "takeover.tail-read",
    "txn-complete.markers-written",
    "txn-end.prepared",
    "txn-load.read",
    "txn-markers.collected",
    "txn-markers.sending",
    "txn-offsets.marker-applied",
    "txn-save.decided",
    "txn-save.written",
];

/// The steps of one durable protocol, as fault points: a world that aims
/// at a family holds or crashes brokers at several steps of the same kind
/// of change in one run (a coordinator frozen before its write while its
/// successor loads; two claimants of one controller epoch).
pub const FAMILIES: &[(&str, &[&str])] = &[
    (
        "election",
        &[
            "election.next-chosen",
            "election.slot-created",
            "election.slot-filled",
            "assignment.still-newest",
        ],
    ),
    (
        "producer-ids",
        &[
            "producer-ids.block-chosen",
            "claim.slot-created",
            "claim.slot-filled",
        ],
    ),
    (
        "groups",
        &[
            "group-heartbeat.arrived",
            "group-load.older-epoch-fenced",
            "group-load.listed",
            "group-load.read",
            "group-load.adopted",
            "group-save.decided",
            "group-save.written",
            "group-save.superseding",
            "group-save.saved",
        ],
    ),
    (
        "takeover",
        &[
            "takeover.decided",
            "takeover.epoch-claimed",
            "takeover.older-epoch-fenced",
            "takeover.fenced",
            "takeover.tail-read",
            "takeover.segment-written",
            "takeover.manifest-written",
        ],
    ),
    (
        "flush",
        &[
            "flush.synced",
            "flush.acknowledged",
            "checkpoint.written",
            "roll.segment-created",
            "roll.indexes-written",
        ],
    ),
    (
        "trim",
        &[
            "retention.decided",
            "retention.manifest-written",
            "retention.unlinked",
            "delete-records.decided",
            "delete-records.manifest-written",
        ],
    ),
    (
        "compaction",
        &[
            "compaction.planned",
            "compaction.segment-created",
            "compaction.segments-written",
            "compaction.manifest-written",
            "retention.unlinked",
            "roll.segment-created",
        ],
    ),
    (
        "transactions",
        &[
            "txn-load.read",
            "txn-save.decided",
            "txn-save.written",
            "txn-end.prepared",
            "txn-markers.collected",
            "txn-markers.sending",
            "txn-complete.markers-written",
            "txn-offsets.marker-applied",
            "flush.synced",
        ],
    ),
    (
        "security",
        &[
            "security-change.read",
            "security-change.slot-created",
            "security-change.claimed",
        ],
    ),
    (
        "reassignments",
        &[
            "preferred-change.read",
            "preferred-change.slot-created",
            "preferred-change.claimed",
            "assignment.still-newest",
            "takeover.decided",
            "takeover.epoch-claimed",
            "takeover.fenced",
        ],
    ),
    (
        "quotas",
        &[
            "quota-change.read",
            "quota-change.slot-created",
            "quota-change.claimed",
        ],
    ),
    (
        "topics",
        &[
            "create-topic.staged",
            "create-topic.placed",
            "create-partitions.staged",
            "delete-topic.tombstoned",
            "remove.children-removed",
        ],
    ),
];

/// The points a world aims at, each at a reach drawn log-uniformly (the
/// first call of a rare step as likely as a late one of a busy step):
/// four times in five every step of one to four protocol families, early
/// (reach 1 to 8), else up to six points of any kind at reach 1 to 64.
fn focus(rng: &mut ChaCha8Rng) -> Vec<(&'static str, u32)> {
    let log_uniform = |rng: &mut ChaCha8Rng, max_log2: f64| {
        (2f64.powf(rng.gen_range(0.0..max_log2)) as u32).max(1)
    };
    let mut points: Vec<(&'static str, u32)> = Vec::new();
    if rng.gen_bool(0.8) {
        let mut order: Vec<usize> = (0..FAMILIES.len()).collect();
        let n = rng.gen_range(1..=4);
        for i in 0..n {
            let j = rng.gen_range(i..order.len());
            order.swap(i, j);
            for p in FAMILIES[order[i]].1 {
                points.push((p, log_uniform(rng, 3.0)));
            }
        }
    } else {
        for _ in 0..rng.gen_range(1..=6) {
            points.push((
                POINTS[rng.gen_range(0..POINTS.len())],
                log_uniform(rng, 6.0),
            ));
        }
    }
    points.sort_unstable();
    points.dedup_by_key(|(p, _)| *p);
    points
}

/// The steps of one family of [`FAMILIES`].
fn family(name: &str) -> Vec<&'static str> {
    FAMILIES
        .iter()
        .filter(|(f, _)| *f == name)
        .flat_map(|(_, steps)| steps.iter().copied())
        .collect()
}

/// The transaction coordinator's own steps (the family without the
/// partition flush it shares with produce).
fn transaction_steps() -> Vec<&'static str> {
    family("transactions")
        .into_iter()
        .filter(|p| p.starts_with("txn-"))
        .collect()
}

/// When reaches of aimed-at points start to count: most worlds aim at the
/// workload's steady state (2 to 30 s in), one in four at the cold start,
/// where every broker claims the first controller epoch and takes its
/// first partitions at once (a StatefulSet whose pods start in parallel):
/// the election's races are widest there.
fn aim_after(rng: &mut ChaCha8Rng) -> u64 {
    if rng.gen_bool(0.25) {
        0
    } else {
        rng.gen_range(2_000..30_000)
    }
}

impl PointRates {
    /// Whether fault points do anything at all.
    pub fn active(&self) -> bool {
        self.delay + self.pause + self.crash > 0.0 || !self.focus.is_empty()
    }
}

/// One seed's world.
#[derive(Clone, Debug)]
pub struct Profile {
    /// A name for the kind of world, for the summary (`mix` when drawn
    /// freely).
    pub world: &'static str,
    pub faults: FaultSet,
    pub nfs: NfsConfig,
    pub pace: Pace,
    pub points: PointRates,
}

/// Cluster faults the timeline can schedule.
const CLUSTER: &[&str] = &["crash", "pause", "isolate", "cut", "nfs-restart", "clock"];

/// The named worlds and how often each is drawn (out of 100; the rest is
/// a free mix).
const WORLDS: &[(&str, u32)] = &[
    ("calm", 3),
    ("lost-replies", 5),
    ("nfs-restarts", 5),
    ("long-pauses", 8),
    ("writeback-storm", 5),
    ("clock-jumps", 4),
    ("crash-points", 10),
    ("txn-zombies", 8),
    ("controller-zombies", 5),
    ("security-zombies", 5),
    ("twins", 4),
    ("full-volume", 4),
    ("power-loss", 4),
];

/// The profile of `seed`.
pub fn draw(seed: u64) -> Profile {
    let mut rng = world_rng(seed);
    let mut roll = rng.gen_range(0..100);
    for (world, weight) in WORLDS {
        if roll < *weight {
            return named(world, &mut rng);
        }
        roll -= weight;
    }
    mix(&mut rng)
}

/// The world's own stream: the runtime's RNG starts from the seed too,
/// and the two must not be correlated.
fn world_rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ 0x5757_4152_4d5f_6b61)
}

/// The names `--world` takes: every named world, and `mix`.
pub fn world_names() -> Vec<&'static str> {
    WORLDS.iter().map(|(w, _)| *w).chain(["mix"]).collect()
}

/// The profile of `seed` in the world `name` (one of [`world_names`]),
/// whatever world the seed would draw: how one kind of world is swept.
pub fn draw_in(seed: u64, name: &str) -> Option<Profile> {
    let mut rng = world_rng(seed);
    let _ = rng.gen_range(0..100);
    if name == "mix" {
        return Some(mix(&mut rng));
    }
    let world = WORLDS.iter().find(|(w, _)| *w == name)?.0;
    Some(named(world, &mut rng))
}

fn set(kinds: &[&'static str]) -> FaultSet {
    kinds.iter().copied().collect()
}

/// Latency and caches as on a real mount, no failing calls. A quarter of
/// the worlds get a slow volume (a loaded cloud NFS service: 1 to 25 ms a
/// call), which widens every race between two brokers' multi-step changes.
fn quiet_nfs(rng: &mut ChaCha8Rng) -> NfsConfig {
    let mut nfs = NfsConfig::default();
    let (min, spread) = if rng.gen_bool(0.25) {
        (rng.gen_range(1_000..5_000), rng.gen_range(2_000..20_000))
    } else {
        (rng.gen_range(50..500), rng.gen_range(100..5_000))
    };
    nfs.faults.latency_min_us = min;
    nfs.faults.latency_max_us = min + spread;
    nfs
}

fn named(world: &'static str, rng: &mut ChaCha8Rng) -> Profile {
    let mut nfs = quiet_nfs(rng);
    let mut pace = Pace::CLASSIC;
    let mut points = PointRates::default();
    let faults = match world {
        "calm" => set(&[]),
        "lost-replies" => {
            nfs.faults.lost_reply_probability = rng.gen_range(0.05..0.3);
            set(&["nfs"])
        }
        "nfs-restarts" => {
            pace = Pace {
                lasts_ms: (200, 2_000),
                gap_ms: (300, 3_000),
                pause_ms: None,
            };
            nfs.faults.writeback_probability = rng.gen_range(0.0..0.5);
            set(&["nfs-restart", "nfs"])
        }
        "long-pauses" => {
            // Most pauses outlast a session timeout (10 s): a successor
            // takes over, and the paused broker wakes up a zombie with its
            // clients' requests (they wait 30 s) still to answer.
            pace = Pace {
                lasts_ms: (8_000, 25_000),
                gap_ms: (1_000, 5_000),
                pause_ms: None,
            };
            set(&["pause"])
        }
        "writeback-storm" => {
            nfs.faults.writeback_probability = rng.gen_range(0.7..1.0);
            nfs.faults.crash_landed_probability = rng.gen_range(0.0..1.0);
            set(&["crash", "nfs"])
        }
        "clock-jumps" => {
            pace = Pace {
                lasts_ms: (2_000, 15_000),
                gap_ms: (1_000, 4_000),
                pause_ms: None,
            };
            set(&["clock"])
        }
        "full-volume" => {
            // The volume fills up (a little more room, then ENOSPC or
            // EDQUOT for every write that grows a file) and is grown again
            // at the heal, among crashes and NFS server restarts: nothing
            // acknowledged may be lost across it, and every partition must
            // take writes again once it is over.
            pace = Pace {
                lasts_ms: (3_000, 15_000),
                gap_ms: (2_000, 6_000),
                pause_ms: None,
            };
            set(&["full", "crash", "nfs-restart"])
        }
        "power-loss" => {
            // Broker hosts lose power and stay down long enough for the
            // others to take their partitions over, with nothing else
            // moving leadership (no movers, no repairer: `Options::in_world`):
            // failover time is judged (`failover-slow`). The model NFS
            // hands out delegations to hosts that read without O_DIRECT,
            // so a change that read shared files buffered would show here
            // as a 90-second failover.
            pace = Pace {
                lasts_ms: (15_000, 40_000),
                gap_ms: (5_000, 15_000),
                pause_ms: None,
            };
            set(&["crash"])
        }
        "twins" => {
            // Second processes started with a live, a paused or a
            // restarting broker's id (`twins`), among crashes and pauses:
            // each twin lives 8 to 25 s, long enough to pass its start-up
            // checks and, if it claims the id, to heartbeat.
            pace = Pace {
                lasts_ms: (8_000, 25_000),
                gap_ms: (2_000, 8_000),
                pause_ms: None,
            };
            set(&["twin", "crash", "pause"])
        }
        "txn-zombies" => {
            // Transaction coordinators held, frozen past a session timeout
            // or crashed between the steps of a transaction's end, and
            // nowhere else: a deposed coordinator's markers arriving after
            // its successor finished the transaction and the producer
            // began its next one; two marker passes over one transaction.
            points = PointRates {
                delay: rng.gen_range(0.1..0.4),
                delay_max_ms: rng.gen_range(200..2_000),
                pause: rng.gen_range(0.03..0.15),
                crash: rng.gen_range(0.0..0.01),
                max_crashes: rng.gen_range(1..3),
                within: transaction_steps(),
                // Long enough for a successor to take the slot over, end
                // the transaction and see the producer begin its next one.
                freeze_ms: Some((14_000, 26_000)),
                ..PointRates::default()
            };
            set(&[])
        }
        "controller-zombies" => {
            // Controllers held or frozen between the steps of an election
            // and of an assignment's write, and nowhere else: a controller
            // that wakes up after its successor claimed the next epoch and
            // writes the assignment it had decided on.
            points = PointRates {
                delay: rng.gen_range(0.05..0.3),
                delay_max_ms: rng.gen_range(200..2_000),
                pause: rng.gen_range(0.05..0.3),
                crash: rng.gen_range(0.0..0.02),
                max_crashes: rng.gen_range(1..3),
                within: family("election"),
                freeze_ms: Some((12_000, 24_000)),
                ..PointRates::default()
            };
            set(&[])
        }
        "security-zombies" => {
            // Writers of the credentials and ACL documents held, frozen or
            // crashed between reading the newest version, creating the
            // next and filling it, and nowhere else: other writers find
            // the newest version empty for seconds, give up on it after
            // 12 s and write over it; the frozen writer wakes up (within
            // its admin's 30 s) and completes a version nobody builds on.
            points = PointRates {
                delay: rng.gen_range(0.05..0.3),
                delay_max_ms: rng.gen_range(200..2_000),
                pause: rng.gen_range(0.05..0.25),
                crash: rng.gen_range(0.0..0.02),
                max_crashes: rng.gen_range(1..3),
                within: family("security"),
                freeze_ms: Some((14_000, 26_000)),
                ..PointRates::default()
            };
            set(&[])
        }
        _ => {
            // crash-points: brokers die inside their own volume changes.
            points = PointRates {
                delay: 0.02,
                delay_max_ms: 200,
                pause: 0.01,
                crash: rng.gen_range(0.002..0.02),
                max_crashes: rng.gen_range(2..6),
                focus: focus(rng),
                aim_after_ms: aim_after(rng),
                within: Vec::new(),
                freeze_ms: None,
            };
            nfs.faults.writeback_probability = rng.gen_range(0.0..0.5);
            set(&["nfs"])
        }
    };
    // Half the one-fault worlds also aim at protocol steps (and only
    // there): a lost reply to a controller claim's create, or a write-back
    // storm, where an election or a takeover is going on.
    if !matches!(
        world,
        "calm"
            | "crash-points"
            | "txn-zombies"
            | "controller-zombies"
            | "security-zombies"
            | "full-volume"
            | "power-loss"
    ) && rng.gen_bool(0.5)
    {
        points = PointRates {
            max_crashes: rng.gen_range(1..4),
            focus: focus(rng),
            aim_after_ms: aim_after(rng),
            ..PointRates::default()
        };
    }
    Profile {
        world,
        faults,
        nfs,
        pace,
        points,
    }
}

/// A free mix: each fault on with even odds, each at its own intensity.
fn mix(rng: &mut ChaCha8Rng) -> Profile {
    let mut faults: FaultSet = CLUSTER
        .iter()
        .copied()
        .filter(|_| rng.gen_bool(0.5))
        .collect();
    // How hard this world is, from a tenth of the hostile rates to three
    // times them.
    let intensity: f64 = rng.gen_range(0.1..3.0);
    let hostile = NfsConfig::hostile().faults;
    let mut nfs = quiet_nfs(rng);
    let on = |rate: f64, rng: &mut ChaCha8Rng| -> f64 {
        if rng.gen_bool(0.5) {
            (rate * intensity).min(0.9)
        } else {
            0.0
        }
    };
    let f = Faults {
        writeback_probability: on(hostile.writeback_probability, rng),
        crash_landed_probability: rng.gen_range(0.0..1.0),
        lost_reply_probability: on(hostile.lost_reply_probability, rng),
        eio_probability: on(hostile.eio_probability, rng),
        eio_applied_share: rng.gen_range(0.0..1.0),
        enospc_probability: on(hostile.enospc_probability, rng),
        capacity_bytes: None,
        interrupt_probability: on(hostile.interrupt_probability, rng),
        stall_probability: on(hostile.stall_probability, rng),
        stall_ms: rng.gen_range(500..8_000),
        ..nfs.faults
    };
    let nfs_on = f.writeback_probability > 0.0
        || f.lost_reply_probability > 0.0
        || f.eio_probability > 0.0
        || f.enospc_probability > 0.0
        || f.interrupt_probability > 0.0
        || f.stall_probability > 0.0;
    nfs.faults = f;
    if nfs_on {
        faults.insert("nfs");
    }
    // Brutal worlds pile faults on: shorter and closer together.
    let squeeze = |ms: u64| ((ms as f64 / intensity.max(1.0)) as u64).max(100);
    // Half the worlds that pause brokers pause them past a session timeout:
    // the fenced zombie that wakes up amid everything else this world does
    // is the writer every fence check exists for.
    let zombies = faults.contains("pause") && rng.gen_bool(0.5);
    let pace = Pace {
        lasts_ms: (squeeze(1_000), squeeze(8_000)),
        gap_ms: (squeeze(2_000), squeeze(10_000)),
        pause_ms: zombies.then_some((8_000, 25_000)),
    };
    let points = if rng.gen_bool(0.9) {
        PointRates {
            delay: rng.gen_range(0.0..0.05),
            delay_max_ms: rng.gen_range(10..500),
            pause: rng.gen_range(0.0..0.01),
            crash: rng.gen_range(0.0..0.005),
            max_crashes: rng.gen_range(1..4),
            focus: focus(rng),
            aim_after_ms: aim_after(rng),
            within: Vec::new(),
            freeze_ms: None,
        }
    } else {
        PointRates::default()
    };
    Profile {
        world: "mix",
        faults,
        nfs,
        pace,
        points,
    }
}

impl Profile {
    /// One line: the world, the faults on, the NFS rates that are not
    /// zero, the pace and the fault points.
    pub fn describe(&self) -> String {
        let mut s = format!("world={}", self.world);
        let kinds: Vec<&str> = self.faults.iter().copied().collect();
        let _ = write!(
            s,
            " faults={}",
            if kinds.is_empty() {
                "none".to_owned()
            } else {
                kinds.join(",")
            }
        );
        let f = &self.nfs.faults;
        let rates = [
            ("writeback", f.writeback_probability),
            ("lost-reply", f.lost_reply_probability),
            ("eio", f.eio_probability),
            ("enospc", f.enospc_probability),
            ("interrupt", f.interrupt_probability),
            ("stall", f.stall_probability),
        ];
        let on: Vec<String> = rates
            .iter()
            .filter(|(_, p)| *p > 0.0)
            .map(|(k, p)| format!("{k}={p:.3}"))
            .collect();
        if !on.is_empty() {
            let _ = write!(s, " nfs[{}]", on.join(" "));
        }
        let _ = write!(
            s,
            " latency={:.1}-{:.1}ms",
            f.latency_min_us as f64 / 1000.0,
            f.latency_max_us as f64 / 1000.0
        );
        let p = &self.pace;
        if *p != Pace::CLASSIC {
            let _ = write!(
                s,
                " pace[lasts={}-{}ms gap={}-{}ms",
                p.lasts_ms.0, p.lasts_ms.1, p.gap_ms.0, p.gap_ms.1
            );
            if let Some((min, max)) = p.pause_ms {
                let _ = write!(s, " pauses={min}-{max}ms");
            }
            s.push(']');
        }
        let r = &self.points;
        if r.active() {
            let _ = write!(
                s,
                " points[delay={:.3}<{}ms pause={:.3} crash={:.4}x{}",
                r.delay, r.delay_max_ms, r.pause, r.crash, r.max_crashes
            );
            if !r.within.is_empty() {
                let _ = write!(s, " within={}", r.within.join(","));
            }
            if !r.focus.is_empty() {
                let aims: Vec<String> = r.focus.iter().map(|(p, k)| format!("{p}#{k}")).collect();
                let _ = write!(
                    s,
                    " focus={} after={}s",
                    aims.join(","),
                    r.aim_after_ms / 1000
                );
            }
            s.push(']');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_point_list_is_every_fault_point_in_the_source() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = std::collections::BTreeSet::new();
        let mut stack = vec![root.join("broker/src"), root.join("vfs/src")];
        #[allow(clippy::disallowed_methods)] // the repository's source, not a volume
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for part in text.split("fault_point!(").skip(1) {
                        if let Some(name) = part.split('"').nth(1) {
                            if part.find('"') < part.find(')') {
                                found.insert(name.to_owned());
                            }
                        }
                    }
                }
            }
        }
        found.remove("<change>.<step done>");
        let listed: std::collections::BTreeSet<String> =
            POINTS.iter().map(|p| (*p).to_owned()).collect();
        assert_eq!(found, listed);
    }

    #[test]
    fn families_name_only_real_points() {
        for (family, steps) in FAMILIES {
            for p in *steps {
                assert!(POINTS.contains(p), "{family}: {p} is not a fault point");
            }
        }
    }

    #[test]
    fn a_seed_always_draws_the_same_profile_and_seeds_draw_many_worlds() {
        assert_eq!(draw(7).describe(), draw(7).describe());
        let worlds: std::collections::BTreeSet<&str> = (0..400).map(|s| draw(s).world).collect();
        for (w, _) in WORLDS {
            assert!(worlds.contains(w), "{w} never drawn in 400 seeds");
        }
        assert!(worlds.contains("mix"));
        let calm = (0..400).filter(|s| draw(*s).faults.is_empty()).count();
        let brutal = (0..400).filter(|s| draw(*s).faults.len() >= 5).count();
        assert!(calm > 0 && brutal > 0, "calm {calm}, brutal {brutal}");
        for s in 0..400 {
            let p = draw(s);
            p.nfs.validate().unwrap();
            assert!(p.pace.lasts_ms.0 < p.pace.lasts_ms.1, "{}", p.describe());
            assert!(p.pace.gap_ms.0 < p.pace.gap_ms.1, "{}", p.describe());
        }
    }
}
