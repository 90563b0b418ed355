//! The simulator's command line (simulation build).

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::args::Args;
use crate::checker::Invariant;
use crate::run::{self, Options, Report};
use crate::swarm;
use crate::swarm::{FAULT_KINDS, FaultSet};

pub fn main() -> ExitCode {
    let args = Args::parse();
    init_logging();
    if let Some(name) = &args.scenario {
        return run_scenario(&args, name);
    }
    let seeds = args.seed_range();
    let total = seeds.end - seeds.start;
    print_config(&args, &seeds);
    let wall = Instant::now();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut simulated = Duration::ZERO;
    let mut checked: std::collections::BTreeMap<Invariant, usize> = Default::default();
    let mut reached: std::collections::BTreeMap<&'static str, usize> = Default::default();
    let mut failed: Vec<(u64, Vec<String>)> = Vec::new();
    let mut last_trace = Vec::new();
    let (sender, reports) = std::sync::mpsc::channel();
    let jobs = args.jobs.map_or_else(default_jobs, |j| j as usize);
    spawn_workers(&args, seeds.clone(), jobs, sender);
    // Seeds finish out of order on several workers; reports are printed in
    // seed order all the same, so a sweep's output does not depend on --jobs.
    let mut pending = std::collections::BTreeMap::new();
    let mut done = 0;
    for seed in seeds.clone() {
        let report = loop {
            if let Some(r) = pending.remove(&seed) {
                break r;
            }
            match reports.recv() {
                Ok((s, r)) => {
                    pending.insert(s, r);
                }
                Err(_) => {
                    eprintln!("sim: a worker stopped before seed {seed} finished");
                    return ExitCode::FAILURE;
                }
            }
        };
        done += 1;
        simulated += report.simulated;
        for (inv, n) in &report.checked {
            *checked.entry(*inv).or_default() += n;
        }
        for (point, n) in &report.points.reached {
            *reached.entry(*point).or_default() += n;
        }
        print_report(&args, &report, &replay(&args, seed));
        if !report.passed() {
            failed.push((seed, report.violations.clone()));
        }
        last_trace = report.trace;
        if total > 1 {
            let line = format!(
                "[{done}/{total}] {} failed, {:.0} s",
                failed.len(),
                wall.elapsed().as_secs_f64()
            );
            // A live line on a terminal; in a log, one line every ten seeds.
            if tty {
                eprint!("\r{line}");
                let _ = std::io::stderr().flush();
            } else if done % 10 == 0 {
                eprintln!("{line}");
            }
        }
    }
    if total > 1 && tty {
        eprintln!();
    }
    if let Some(path) = &args.trace
        && !write_trace(path, &last_trace)
    {
        return ExitCode::FAILURE;
    }
    let secs = wall.elapsed().as_secs_f64().max(1e-9);
    println!(
        "{} passed, {} failed; {:.0} simulated seconds in {secs:.1} s of wall time ({:.1}x), {:.0} seeds per minute",
        total - failed.len() as u64,
        failed.len(),
        simulated.as_secs_f64(),
        simulated.as_secs_f64() / secs,
        total as f64 * 60.0 / secs
    );
    if total > 1 {
        print_coverage(&checked, &reached);
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        print_failures(&args, &failed);
        ExitCode::FAILURE
    }
}

/// The sweep's settings, first line of its output.
fn print_config(args: &Args, seeds: &std::ops::Range<u64>) {
    let faults = match (&args.faults, &args.world) {
        (Some(f), _) => fault_list(f),
        (None, Some(w)) => format!("swarm({w})"),
        (None, None) => "swarm".to_owned(),
    };
    println!(
        "config brokers={} duration={}s faults={faults} seeds={}..{}{}",
        args.brokers,
        args.duration_secs(),
        seeds.start,
        seeds.end,
        if args.check_determinism {
            " check-determinism"
        } else {
            ""
        }
    );
}

/// The failed seeds, each with its first violation and how to replay it.
fn print_failures(args: &Args, failed: &[(u64, Vec<String>)]) {
    println!("failures:");
    println!("| seed | first violation | replay |");
    println!("|---|---|---|");
    for (seed, violations) in failed {
        println!(
            "| {seed} | {} | `{}` |",
            violations.first().map_or("", String::as_str),
            replay(args, *seed)
        );
    }
}

/// The last seed's trace into `path`; false (and why, on stderr) if it
/// could not be written.
fn write_trace(path: &std::path::Path, trace: &[String]) -> bool {
    let text = trace.join("\n") + "\n";
    #[allow(clippy::disallowed_methods)] // the simulator's output, not a volume
    let written = std::fs::write(path, text);
    if let Err(e) = written {
        eprintln!("cannot write the trace to {}: {e}", path.display());
        return false;
    }
    true
}

/// What a sweep checked: each invariant with how many operations it was
/// checked against over all seeds, a gap where that is zero; and the
/// fault points reached.
fn print_coverage(
    checked: &std::collections::BTreeMap<Invariant, usize>,
    reached: &std::collections::BTreeMap<&'static str, usize>,
) {
    let line: Vec<String> = Invariant::ALL
        .iter()
        .map(|i| match checked.get(i).copied().unwrap_or(0) {
            0 => format!("{i}=GAP"),
            n => format!("{i}={n}"),
        })
        .collect();
    println!("invariants checked: {}", line.join(" "));
    let gaps: Vec<&str> = Invariant::ALL
        .iter()
        .filter(|i| checked.get(i).copied().unwrap_or(0) == 0)
        .map(|i| i.name())
        .collect();
    if !gaps.is_empty() {
        println!(
            "gaps (checked zero times over the sweep): {}",
            gaps.join(", ")
        );
    }
    if !reached.is_empty() {
        let points: Vec<String> = reached.iter().map(|(p, n)| format!("{p}={n}")).collect();
        println!("fault points reached: {}", points.join(" "));
    }
}

/// One seed's run as asked: swarm or pinned faults, run twice with
/// `--check-determinism`.
fn run_seed(args: &Args, seed: u64) -> Report {
    let duration = Duration::from_secs(args.duration_secs());
    let mut opts = match (&args.faults, &args.world) {
        (Some(f), _) => Options::with_faults(seed, args.brokers, duration, f.clone()),
        (None, Some(w)) => {
            let profile = swarm::draw_in(seed, w).expect("--world is checked when parsed");
            Options::in_world(profile, seed, args.brokers, duration)
        }
        (None, None) => Options::swarm(seed, args.brokers, duration),
    };
    if let Some(aims) = &args.aim {
        opts.points.focus = aims.0.clone();
        opts.points.max_crashes = opts.points.max_crashes.max(3);
        // Counted from the start, whatever the world drew.
        opts.points.aim_after_ms = 0;
    }
    let mut report = run::run(&opts);
    if args.check_determinism {
        let again = run::run(&opts);
        if again.trace != report.trace {
            let at = report
                .trace
                .iter()
                .zip(&again.trace)
                .position(|(a, b)| a != b)
                .unwrap_or(report.trace.len().min(again.trace.len()));
            report.violations.push(format!(
                "nondeterminism the second run diverged at trace line {at}: {:?} vs {:?} (digests {} and {})",
                report.trace.get(at),
                again.trace.get(at),
                report.digest,
                again.digest
            ));
        }
    }
    report
}

/// One worker per job, each taking the next seed not yet taken. Every seed
/// runs in a runtime of its own (`run::run`), so workers share nothing
/// but the queue: a seed's run is the same on any worker.
#[allow(clippy::disallowed_methods)] // outside the simulated world: it hosts runs
fn spawn_workers(
    args: &Args,
    seeds: std::ops::Range<u64>,
    jobs: usize,
    sender: std::sync::mpsc::Sender<(u64, Report)>,
) {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(seeds.start));
    for _ in 0..jobs {
        let (args, next, sender, end) = (args.clone(), next.clone(), sender.clone(), seeds.end);
        std::thread::spawn(move || {
            loop {
                let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if seed >= end || sender.send((seed, run_seed(&args, seed))).is_err() {
                    return;
                }
            }
        });
    }
}

/// As many workers as cores: a run is single-threaded.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `--scenario`: the scenario's seed (and `--nearby` more) as configured
/// there. With `--reintroduce`, a run is caught when it fails with exactly
/// the scenario's invariant; the exit code is non-zero when any run fails,
/// as a failing run should be.
fn run_scenario(args: &Args, name: &str) -> ExitCode {
    let scenario = match crate::scenario::load(name) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let bugs: Vec<String> = args.reintroduce.iter().cloned().collect();
    if let Some(bug) = &args.reintroduce {
        if !broker::historical::BUGS.contains(&bug.as_str()) {
            eprintln!(
                "unknown bug {bug:?}; known: {}",
                broker::historical::BUGS.join(", ")
            );
            return ExitCode::FAILURE;
        }
    }
    println!(
        "scenario={} seed={} brokers={} duration={}s faults={} invariant={}{}",
        scenario.name,
        scenario.seed,
        scenario.brokers,
        scenario.duration,
        scenario.faults.join(","),
        scenario.invariant,
        args.reintroduce
            .as_ref()
            .map_or(String::new(), |b| format!(" reintroduced={b}"))
    );
    let mut any_failed = false;
    let mut expected = 0;
    let seeds = match args.offset {
        Some(k) => scenario.seed + k..=scenario.seed + k,
        None => scenario.seed..=scenario.seed + args.nearby,
    };
    let total = seeds.clone().count();
    let mut last_trace = Vec::new();
    for seed in seeds {
        let report = run::run(&scenario.options(seed, &bugs));
        let mut replay_cmd = format!("cargo run -p sim -- --scenario {}", scenario.name);
        if let Some(b) = &args.reintroduce {
            replay_cmd.push_str(&format!(" --reintroduce {b}"));
        }
        if seed != scenario.seed {
            replay_cmd.push_str(&format!(" --offset {}", seed - scenario.seed));
        }
        print_report(args, &report, &replay_cmd);
        last_trace = report.trace.clone();
        let caught = scenario.caught(&report.violations, seed == scenario.seed);
        any_failed |= !report.passed();
        if (args.reintroduce.is_some() && caught) || (args.reintroduce.is_none() && report.passed())
        {
            expected += 1;
        }
    }
    if let Some(path) = &args.trace {
        #[allow(clippy::disallowed_methods)] // the simulator's output, not a volume
        let written = std::fs::write(path, last_trace.join("\n") + "\n");
        if let Err(e) = written {
            eprintln!("cannot write the trace to {}: {e}", path.display());
        }
    }
    if args.reintroduce.is_some() {
        let also = if scenario.consequences.is_empty() {
            String::new()
        } else {
            format!(
                "; nearby seeds may show only its consequences {}",
                scenario.consequences.join(", ")
            )
        };
        println!(
            "caught {expected} of {total} (invariant {}{also}){}",
            scenario.invariant,
            if args.nearby > 0 {
                " over the scenario's seed and its nearby seeds"
            } else {
                ""
            }
        );
    } else {
        println!("passed {expected} of {total}");
    }
    if any_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn replay(args: &Args, seed: u64) -> String {
    let mut cmd = format!(
        "cargo run -p sim -- --seed {seed} --brokers {} --duration {}",
        args.brokers,
        args.duration_secs()
    );
    if let Some(f) = &args.faults {
        cmd.push_str(&format!(" --faults {}", fault_list(f)));
    }
    if let Some(w) = &args.world {
        cmd.push_str(&format!(" --world {w}"));
    }
    if let Some(aims) = &args.aim {
        let aims: Vec<String> = aims.0.iter().map(|(p, k)| format!("{p}#{k}")).collect();
        cmd.push_str(&format!(" --aim {}", aims.join(",")));
    }
    cmd
}

/// `--faults` as typed: `all`, `none` or the list.
fn fault_list(f: &FaultSet) -> String {
    if f.len() == FAULT_KINDS.len() {
        "all".to_owned()
    } else if f.is_empty() {
        "none".to_owned()
    } else {
        f.iter().copied().collect::<Vec<_>>().join(",")
    }
}

fn print_report(args: &Args, report: &Report, replay_cmd: &str) {
    if args.verbose {
        for line in &report.trace {
            println!("  {line}");
        }
    }
    let verdict = if report.passed() { "PASS" } else { "FAIL" };
    println!(
        "seed={} digest={} events={} faults={} nfs-faults={} nfs-leftovers={} verdict={verdict}",
        report.seed,
        report.digest,
        report.events,
        report.faults,
        nfs_fault_count(&report.nfs),
        report.nfs_leftovers
    );
    {
        println!("  {}", report.world);
        let kinds: Vec<String> = report
            .fault_counts
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let n = &report.nfs;
        println!(
            "  injected {} | nfs writebacks={} lost-replies={} eio={} enospc={} interrupts={} stalls={} crashes={} server-restarts={}",
            kinds.join(" "),
            n.writebacks,
            n.lost_replies,
            n.eio,
            n.enospc,
            n.interrupts,
            n.stalls,
            n.crashes,
            n.server_restarts
        );
        let checked: Vec<String> = report
            .checked
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let p = &report.points;
        if !p.reached.is_empty() {
            println!(
                "  points reached={} at {} points | delays={} pauses={} freezes={} crashes={} fails={}",
                p.reached.values().sum::<usize>(),
                p.reached.len(),
                p.delays,
                p.pauses,
                p.freezes,
                p.crashes,
                p.fails
            );
        }
        println!(
            "  checked {} | operations={} simulated={:.1}s",
            checked.join(" "),
            report.operations,
            report.simulated.as_secs_f64()
        );
    }
    if !report.passed() {
        for v in &report.violations {
            println!("  violation: {v}");
        }
        println!("  replay: {replay_cmd}");
    }
}

fn nfs_fault_count(s: &vfs::model::FaultStats) -> u64 {
    s.writebacks
        + s.lost_replies
        + s.eio
        + s.enospc
        + s.interrupts
        + s.stalls
        + s.crashes
        + s.server_restarts
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("KAAS_LOG")
        .unwrap_or_else(|_| EnvFilter::new("error,madsim::sim::task=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_timer(SimTime)
        .init();
}

/// Log lines carry the simulated time since the run's start, so they line
/// up with the trace (wall-clock time says nothing in a simulation).
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        match madsim::time::TimeHandle::try_current() {
            Some(t) => write!(w, "{:>8.3}s", t.elapsed().as_secs_f64()),
            None => write!(w, "{:>9}", "-"),
        }
    }
}
