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

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vfs::model::NfsConfig;

mod points;
mod worlds;

/// Which faults a run injects.
pub type FaultSet = BTreeSet<&'static str>;

pub const FAULT_KINDS: &[&str] = &[
    "crash",
    "pause",
    "isolate",
    "cut",
    "nfs-restart",
    "clock",
    "nfs",
    "twin",
    "full",
];

pub use points::{FAMILIES, POINTS};
use points::{aim_after, coordinator_writes, family, focus, transaction_steps};
use worlds::{mix, named};

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
    /// Set in worlds of failing writes: aimed points act at every k-th
    /// reach (not k, 2k, 4k, ...), up to `max_acts` times each, and this
    /// share of their acts fails the step after the point (the rest hold
    /// the task a few seconds).
    pub failing: Option<Failing>,
}

/// How a world of failing writes aims (`PointRates::failing`).
#[derive(Clone, Debug, PartialEq)]
pub struct Failing {
    pub share: f64,
    pub max_acts: u32,
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
    ("failing-writes", 8),
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
            if let Some(f) = &r.failing {
                let _ = write!(s, " failing={:.2}x{}", f.share, f.max_acts);
            }
            s.push(']');
        }
        s
    }
}

#[cfg(test)]
mod tests;
