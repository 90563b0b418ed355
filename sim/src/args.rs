//! Command-line arguments of the simulator.

use clap::Parser;

#[derive(Clone, Debug, Parser)]
#[command(
    name = "sim",
    about = "Deterministic simulation of a kaas cluster on a shared volume",
    long_about = "Runs kaas brokers, with their real code, on the madsim deterministic \
runtime. Everything (scheduling, time, randomness, faults) derives from --seed, so a \
seed replays exactly: the same seed always prints the same digest."
)]
pub struct Args {
    /// Seed of the run; everything random in the simulation derives from it.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Run this many consecutive seeds, starting at --seed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,

    /// Number of broker nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub brokers: u32,

    /// Simulated seconds to run.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..))]
    pub duration_secs: u64,

    /// Print every trace event.
    #[arg(long)]
    pub verbose: bool,
}
