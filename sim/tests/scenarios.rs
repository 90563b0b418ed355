//! The historical-bug scenarios on their own seeds, both ways, as insta
//! snapshots of their summaries: a change in what a scenario injects, what
//! it reports or its trace digest shows up in review. Accept an intended
//! change with `INSTA_UPDATE=always` (see CONTRIBUTING.md).
#![cfg(madsim)]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use sim::run;
use sim::scenario::{self, Scenario};

fn run(s: &Scenario, bug: Option<&str>) -> run::Report {
    let bugs: Vec<String> = bug.iter().map(|b| (*b).to_owned()).collect();
    run::run(&s.options(s.seed, &bugs))
}

#[test]
fn every_historical_bug_has_a_scenario_and_a_switch() {
    let names: Vec<String> = scenario::all()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut bugs: Vec<&str> = broker::historical::BUGS.to_vec();
    bugs.sort();
    assert_eq!(names, bugs);
}

#[test]
fn scenario_summaries_match_their_snapshots() {
    for s in scenario::all().unwrap() {
        let today = run(&s, None);
        assert!(today.passed(), "{}: {:?}", s.name, today.violations);
        let bug = run(&s, Some(&s.name));
        assert!(
            s.caught(&bug.violations, true),
            "{} reintroduced: {:?}",
            s.name,
            bug.violations
        );
        let text = format!(
            "today:\n{}\nreintroduced {}:\n{}",
            scenario::summary(&today),
            s.name,
            scenario::summary(&bug)
        );
        judge_change(&s.name, &text);
        insta::assert_snapshot!(s.name.clone(), text);
    }
}

/// Says what kind of change a summary has before insta shows the diff: a
/// trace that changed while every verdict and violation stayed (re-bless
/// it) is not the same news as a verdict that changed (look at it). While
/// blessing (`INSTA_UPDATE=always`), insta takes the new text as it is.
fn judge_change(name: &str, text: &str) {
    if std::env::var("INSTA_UPDATE").is_ok_and(|u| u == "always") {
        return;
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("scenarios__{name}.snap"));
    #[allow(clippy::disallowed_methods)] // the snapshot in the repository, not a volume
    let Ok(stored) = std::fs::read_to_string(&path) else {
        return; // a new scenario: insta reports it
    };
    let Some(old) = stored.splitn(3, "---\n").nth(2) else {
        return;
    };
    let (old, new) = (old.trim_end(), text.trim_end());
    if old == new {
        return;
    }
    let without = |t: &str, prefix: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    };
    let lines = |t: &str, keep: &dyn Fn(&str) -> bool| -> Vec<String> {
        t.lines().filter(|l| keep(l)).map(str::to_owned).collect()
    };
    let verdict = |l: &str| l.starts_with("verdict:");
    if lines(old, &verdict) != lines(new, &verdict) {
        panic!(
            "{name}: a VERDICT changed: was {:?}, is {:?}; look at the run before re-blessing",
            lines(old, &verdict),
            lines(new, &verdict)
        );
    }
    let violation = |l: &str| l.starts_with("  ") || l.starts_with("violations:");
    if lines(old, &violation) != lines(new, &violation) {
        panic!(
            "{name}: the verdicts stayed, the VIOLATIONS changed: were {:?}, are {:?}; look at the run before re-blessing",
            lines(old, &violation),
            lines(new, &violation)
        );
    }
    if without(old, "digest:") == without(new, "digest:") {
        panic!(
            "{name}: digests changed, verdicts and violations did not: re-bless with INSTA_UPDATE=always \
             RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim cargo test -p sim --test scenarios"
        );
    }
    // Counts of injected faults changed too: insta shows the whole diff.
}
