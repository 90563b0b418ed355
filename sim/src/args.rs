//! Command-line arguments of the simulator.

use std::path::PathBuf;

use clap::Parser;

use crate::swarm::{FAULT_KINDS, FaultSet};

#[derive(Clone, Debug, Parser)]
#[command(
    name = "sim",
    about = "Deterministic simulation of a kaas cluster on a shared volume",
    long_about = "Runs kaas brokers, with their real code, on the madsim deterministic \
runtime, with Kafka clients, a seeded fault timeline and a checker of the history. \
Everything (scheduling, time, randomness, faults) derives from the seed, so a seed \
replays exactly: the same seed always prints the same digest."
)]
pub struct Args {
    /// Seed of the run; everything random in the simulation derives from it.
    #[arg(long, default_value_t = 1, conflicts_with = "seeds")]
    pub seed: u64,

    /// Sweep the seeds A..B (A included, B excluded), e.g. `--seeds 1..101`.
    #[arg(long, value_parser = parse_seeds)]
    pub seeds: Option<(u64, u64)>,

    /// Run this many consecutive seeds, starting at --seed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,

    /// Number of broker nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub brokers: u32,

    /// Simulated seconds of workload and faults; the clients' last retries
    /// and the liveness phase (up to 60 s) come after.
    #[arg(long, alias = "duration-secs", default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..))]
    pub duration: u64,

    /// Nightly runs: ten simulated minutes of workload and faults per seed
    /// (instead of --duration).
    #[arg(long, conflicts_with = "duration")]
    pub long: bool,

    /// Faults to inject, the same in every seed: `all`, `none`, or a
    /// comma-separated list of crash, pause, isolate, cut, nfs-restart, clock
    /// (per-broker wall-clock skew and jumps), nfs (the model NFS's own
    /// faults: lost replies, EIO, ENOSPC, write-back, stalls, ...), twin
    /// (a second process with a broker's id), full (the volume fills up
    /// until the heal). Without
    /// it, each seed draws its own world (see `sim::swarm`), printed with
    /// the run.
    #[arg(long, value_parser = parse_faults)]
    pub faults: Option<FaultSet>,

    /// Draw every seed's world as one kind of swarm world (see
    /// `sim::swarm`: calm, lost-replies, ..., txn-zombies, or mix), its
    /// settings still drawn from the seed: how one kind of world is swept.
    #[arg(long, conflicts_with = "faults", value_parser = parse_world)]
    pub world: Option<String>,

    /// Aim fault points, in every seed: `point#k,...` crashes or freezes
    /// the broker that reaches `point` for the k-th time (and the 2k-th, 4k-th, ...), as a
    /// swarm world that aims at it does (see `sim::swarm::POINTS`). How a
    /// narrow window between two steps of a volume change is hit at will.
    #[arg(long, value_parser = parse_aims)]
    pub aim: Option<Aims>,

    /// Run a scenario (a name under scenarios/, or a path to a .toml file)
    /// with its seed, cluster, timeline and NFS settings.
    #[arg(long)]
    pub scenario: Option<String>,

    /// Switch a historical bug back on (simulation build only); the run
    /// must then fail with the scenario's invariant.
    #[arg(long, requires = "scenario")]
    pub reintroduce: Option<String>,

    /// With --scenario: also run the N seeds after the scenario's own, and
    /// print how many catch the bug (with --reintroduce) or pass.
    #[arg(long, default_value_t = 0, requires = "scenario")]
    pub nearby: u64,

    /// With --scenario: run only the seed this far after the scenario's
    /// own (how a failing nearby seed is replayed).
    #[arg(long, requires = "scenario", conflicts_with = "nearby")]
    pub offset: Option<u64>,

    /// Seeds run at once, each in a runtime of its own on a thread of its
    /// own; the output is the same for any value. Default: one per core.
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u64).range(1..=256))]
    pub jobs: Option<u64>,

    /// Run each seed twice and fail if the traces differ.
    #[arg(long)]
    pub check_determinism: bool,

    /// Write the trace of the (last) run to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,

    /// Print every trace event.
    #[arg(long)]
    pub verbose: bool,
}

impl Args {
    /// Simulated seconds of workload and faults per seed.
    pub fn duration_secs(&self) -> u64 {
        if self.long { 600 } else { self.duration }
    }

    /// The seeds to run, in order.
    pub fn seed_range(&self) -> std::ops::Range<u64> {
        match self.seeds {
            Some((a, b)) => a..b,
            None => self.seed..self.seed.saturating_add(self.count),
        }
    }
}

fn parse_faults(s: &str) -> Result<FaultSet, String> {
    match s {
        "all" => return Ok(FAULT_KINDS.iter().copied().collect()),
        "none" => return Ok(FaultSet::new()),
        _ => {}
    }
    s.split(',')
        .map(|k| {
            FAULT_KINDS
                .iter()
                .find(|known| **known == k.trim())
                .copied()
                .ok_or_else(|| {
                    format!(
                        "unknown fault {k:?}; known: all, none, {}",
                        FAULT_KINDS.join(", ")
                    )
                })
        })
        .collect()
}

fn parse_world(s: &str) -> Result<String, String> {
    let names = crate::swarm::world_names();
    if names.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!("unknown world {s:?}; one of {}", names.join(", ")))
    }
}

/// Fault points to aim at (`--aim`), each with the reach that acts.
#[derive(Clone, Debug, PartialEq)]
pub struct Aims(pub Vec<(&'static str, u32)>);

fn parse_aims(s: &str) -> Result<Aims, String> {
    s.split(',')
        .map(|aim| {
            let (point, k) = aim.trim().split_once('#').unwrap_or((aim.trim(), "1"));
            let point = crate::swarm::POINTS
                .iter()
                .find(|p| **p == point)
                .copied()
                .ok_or_else(|| format!("unknown fault point {point:?} (see sim::swarm::POINTS)"))?;
            let k: u32 = k.parse().map_err(|e| format!("{aim:?}: {e}"))?;
            if k == 0 {
                return Err(format!("{aim:?}: reaches count from 1"));
            }
            Ok((point, k))
        })
        .collect::<Result<_, _>>()
        .map(Aims)
}

fn parse_seeds(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not a range like 1..101"))?;
    let a: u64 = a.parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: u64 = b.parse().map_err(|e| format!("{b:?}: {e}"))?;
    if b <= a {
        return Err(format!("{s:?} is empty"));
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_fault_lists_parse() {
        let a = Args::try_parse_from(["sim", "--seeds", "5..8", "--faults", "crash,nfs"]).unwrap();
        assert_eq!(a.seed_range(), 5..8);
        assert_eq!(a.faults, Some(["crash", "nfs"].into_iter().collect()));
        let b = Args::try_parse_from(["sim", "--seed", "3", "--count", "2", "--faults", "none"])
            .unwrap();
        assert_eq!(b.seed_range(), 3..5);
        assert_eq!(b.faults, Some(FaultSet::new()));
        assert_eq!(Args::try_parse_from(["sim"]).unwrap().faults, None, "swarm");
        assert!(Args::try_parse_from(["sim", "--faults", "meteor"]).is_err());
        assert!(Args::try_parse_from(["sim", "--seeds", "9..9"]).is_err());
        let d = Args::try_parse_from(["sim", "--aim", "takeover.fenced#3,flush.synced"]).unwrap();
        assert_eq!(
            d.aim,
            Some(Aims(vec![("takeover.fenced", 3), ("flush.synced", 1)]))
        );
        assert!(Args::try_parse_from(["sim", "--aim", "takeover.nowhere"]).is_err());
        assert!(Args::try_parse_from(["sim", "--aim", "flush.synced#0"]).is_err());
        let c = Args::try_parse_from(["sim", "--duration-secs", "30"]).unwrap();
        assert_eq!(c.duration, 30);
    }
}
