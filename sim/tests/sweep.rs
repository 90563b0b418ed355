//! A seed sweep of swarm worlds as one test, for `cargo mutants`
//! (`ci/mutants/cargo-mutants`): a mutant counts as caught when a seed's
//! checker finds a violation, never because a digest moved. Ignored in
//! ordinary test runs, where the release-mode sweep of `ci/test` runs
//! instead; `KAAS_SWEEP_SEEDS` (`A..B`, default `1..21`) picks the seeds.
#![cfg(madsim)]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::time::Duration;

use sim::run::{self, Options};

#[test]
#[ignore = "the mutation run's test command; ci/test sweeps in release mode"]
fn swarm_seeds_pass_the_checker() {
    let seeds = std::env::var("KAAS_SWEEP_SEEDS").unwrap_or_else(|_| "1..21".to_owned());
    let (from, to) = seeds
        .split_once("..")
        .map(|(a, b)| (a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()))
        .expect("KAAS_SWEEP_SEEDS is A..B");
    // The first failing seed is enough: a caught mutant ends early.
    for seed in from..to {
        let report = run::run(&Options::swarm(seed, 3, Duration::from_secs(60)));
        assert!(
            report.passed(),
            "seed {seed} failed: {:?}",
            report.violations
        );
    }
}
