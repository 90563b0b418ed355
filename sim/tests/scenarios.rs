//! The historical-bug scenarios on their own seeds, both ways, as insta
//! snapshots of their summaries: a change in what a scenario injects, what
//! it reports or its trace digest shows up in review. Accept an intended
//! change with `INSTA_UPDATE=always` (see CONTRIBUTING.md).
#![cfg(madsim)]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use sim::harness;
use sim::scenario::{self, Scenario};

fn run(s: &Scenario, bug: Option<&str>) -> harness::Report {
    let bugs: Vec<String> = bug.iter().map(|b| (*b).to_owned()).collect();
    harness::run(&s.options(s.seed, &bugs))
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
        insta::assert_snapshot!(s.name.clone(), text);
    }
}
