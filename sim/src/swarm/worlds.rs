//! The named worlds and the free mix.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use vfs::model::{Faults, NfsConfig};

use super::{
    CLUSTER, Failing, FaultSet, Pace, PointRates, Profile, aim_after, coordinator_writes, family,
    focus, transaction_steps,
};

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

/// The worlds of cluster and volume faults at a pace of their own; `None`
/// for the others.
fn paced(
    world: &str,
    rng: &mut ChaCha8Rng,
    nfs: &mut NfsConfig,
    pace: &mut Pace,
) -> Option<FaultSet> {
    Some(match world {
        "calm" => set(&[]),
        "lost-replies" => {
            nfs.faults.lost_reply_probability = rng.gen_range(0.05..0.3);
            set(&["nfs"])
        }
        "nfs-restarts" => {
            *pace = Pace {
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
            *pace = Pace {
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
            *pace = Pace {
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
            *pace = Pace {
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
            *pace = Pace {
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
            *pace = Pace {
                lasts_ms: (8_000, 25_000),
                gap_ms: (2_000, 8_000),
                pause_ms: None,
            };
            set(&["twin", "crash", "pause"])
        }
        _ => return None,
    })
}

/// The worlds where fault points hold, freeze or crash brokers inside
/// their own steps.
fn held(
    world: &str,
    rng: &mut ChaCha8Rng,
    nfs: &mut NfsConfig,
    pace: &mut Pace,
    points: &mut PointRates,
) -> FaultSet {
    match world {
        "txn-zombies" => {
            // Transaction coordinators held, frozen past a session timeout
            // or crashed between the steps of a transaction's end, and
            // nowhere else: a deposed coordinator's markers arriving after
            // its successor finished the transaction and the producer
            // began its next one; two marker passes over one transaction.
            *points = PointRates {
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
            *points = PointRates {
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
            *points = PointRates {
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
        "failing-writes" => {
            // The volume fails the exact writes of coordinators and
            // controllers (a group's offsets, a consumer group's
            // assignment, a transaction's state, the security and quota
            // documents, a topic's creation and deletion, the steps of an
            // atomic replace) again and again through the run, at a few
            // points drawn from them: whatever a broker answers after a
            // failed write must be what its successor loads. A crash now
            // and then, so that successors do load it.
            *pace = Pace {
                lasts_ms: (1_000, 6_000),
                gap_ms: (8_000, 20_000),
                pause_ms: None,
            };
            *points = PointRates {
                focus: coordinator_writes(rng),
                aim_after_ms: rng.gen_range(0..10_000),
                failing: Some(Failing {
                    share: rng.gen_range(0.6..0.95),
                    max_acts: rng.gen_range(4..24),
                }),
                ..PointRates::default()
            };
            set(&["crash"])
        }
        _ => {
            // crash-points: brokers die inside their own volume changes.
            *points = PointRates {
                delay: 0.02,
                delay_max_ms: 200,
                pause: 0.01,
                crash: rng.gen_range(0.002..0.02),
                max_crashes: rng.gen_range(2..6),
                focus: focus(rng),
                aim_after_ms: aim_after(rng),
                ..PointRates::default()
            };
            nfs.faults.writeback_probability = rng.gen_range(0.0..0.5);
            set(&["nfs"])
        }
    }
}

pub(super) fn named(world: &'static str, rng: &mut ChaCha8Rng) -> Profile {
    let mut nfs = quiet_nfs(rng);
    let mut pace = Pace::CLASSIC;
    let mut points = PointRates::default();
    let faults = match paced(world, rng, &mut nfs, &mut pace) {
        Some(faults) => faults,
        None => held(world, rng, &mut nfs, &mut pace, &mut points),
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
            | "failing-writes"
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
pub(super) fn mix(rng: &mut ChaCha8Rng) -> Profile {
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
            ..PointRates::default()
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
