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
        let report = harness::run(&Options::new(
            seed,
            args.brokers,
            Duration::from_secs(args.duration_secs),
        ));
        if args.verbose {
            for line in &report.trace {
                println!("  {line}");
            }
        }
        let verdict = if report.passed() { "PASS" } else { "FAIL" };
        println!(
            "seed={seed} digest={} events={} faults={} nfs-faults={} nfs-leftovers={} verdict={verdict}",
            report.digest,
            report.events,
            report.faults,
            nfs_fault_count(&report.nfs),
            report.nfs_leftovers
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

fn nfs_fault_count(s: &vfs::model::FaultStats) -> u64 {
    s.writebacks + s.lost_replies + s.eio + s.enospc + s.interrupts + s.stalls + s.crashes
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("KAAS_LOG").unwrap_or_else(|_| EnvFilter::new("error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .init();
}
