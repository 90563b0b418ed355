//! The simulator's command line (simulation build).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::args::Args;
use crate::harness::{self, Options};

pub fn main() -> ExitCode {
    let args = Args::parse();
    init_logging();
    let mut failed = Vec::new();
    for seed in args.seed..args.seed.saturating_add(args.count) {
        let report = harness::run(&Options {
            seed,
            brokers: args.brokers,
            duration: Duration::from_secs(args.duration_secs),
        });
        if args.verbose {
            for line in &report.trace {
                println!("  {line}");
            }
        }
        let verdict = if report.passed() { "PASS" } else { "FAIL" };
        println!(
            "seed={seed} digest={} events={} faults={} verdict={verdict}",
            report.digest, report.events, report.faults
        );
        if !report.passed() {
            for v in &report.violations {
                println!("  violation: {v}");
            }
            println!(
                "  replay: cargo run -p sim -- --seed {seed} --brokers {} --duration-secs {}",
                args.brokers, args.duration_secs
            );
            failed.push(seed);
        }
    }
    if args.count > 1 {
        println!(
            "{} passed, {} failed",
            args.count - failed.len() as u64,
            failed.len()
        );
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("KAAS_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .init();
}
