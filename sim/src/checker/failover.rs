//! Failover time: once a broker's host loses power, the partitions it led
//! take writes again within the session timeout plus `SLACK`. Judged only
//! for a crash that no other fault overlaps (another fault may slow a
//! failover for its own good reasons) and on a volume whose calls never
//! stall by injection: what is left to wait on is kaas, or the volume
//! waiting on the dead host (a delegation it held; `delegation-stall`).

use std::time::Duration;

use super::invariant::Invariant;
use crate::history::{Event, Outcome};

/// What failover may take beyond the session timeout: the controller's
/// next look, the takeover, the client's metadata refresh and backoff.
pub const SLACK: Duration = Duration::from_secs(5);

/// One injected fault: when it began and healed, its kind's name and the
/// broker it hit, if one.
#[derive(Clone, Debug)]
pub struct Outage {
    pub at: Duration,
    pub healed: Duration,
    pub kind: &'static str,
    pub broker: Option<u32>,
}

/// The crashes judged and the violations found.
pub fn check(
    events: &[(Duration, Event)],
    outages: &[Outage],
    session: Duration,
) -> (usize, Vec<String>) {
    let limit = session + SLACK;
    let mut judged = 0;
    let mut out = Vec::new();
    for crash in outages.iter().filter(|o| o.kind == "crash") {
        let Some(victim) = crash.broker else {
            continue;
        };
        let window_end = crash.at + limit;
        let alone = outages
            .iter()
            .all(|o| std::ptr::eq(o, crash) || o.healed + session < crash.at || o.at > window_end);
        if !alone {
            continue;
        }
        judged += 1;
        for p in led_by(events, victim, crash.at) {
            // No write after the crash at all is liveness's to judge.
            if let Some(t) = acks(events, p).find(|&t| t > crash.at)
                && t > window_end
            {
                out.push(Invariant::FailoverSlow.says(format!(
                    "partition {p} of broker-{victim}, whose host lost power at {:.3}s, took \
                     its next write {:.1} s later (limit {:.0} s: the session timeout + {} s)",
                    crash.at.as_secs_f64(),
                    (t - crash.at).as_secs_f64(),
                    limit.as_secs_f64(),
                    SLACK.as_secs()
                )));
            }
        }
    }
    (judged, out)
}

/// Partitions whose last acknowledged write before `at` came from `broker`.
fn led_by(events: &[(Duration, Event)], broker: u32, at: Duration) -> Vec<i32> {
    let mut last: std::collections::BTreeMap<i32, u32> = Default::default();
    for (_, e) in events.iter().filter(|(t, _)| *t <= at) {
        if let Event::Produce {
            partition,
            outcome: Outcome::Acked { broker: b, .. },
            ..
        } = e
        {
            last.insert(*partition, *b);
        }
    }
    last.into_iter()
        .filter(|&(_, b)| b == broker)
        .map(|(p, _)| p)
        .collect()
}

fn acks(events: &[(Duration, Event)], p: i32) -> impl Iterator<Item = Duration> + '_ {
    events.iter().filter_map(move |(t, e)| match e {
        Event::Produce {
            partition,
            outcome: Outcome::Acked { .. },
            ..
        } if *partition == p => Some(*t),
        _ => None,
    })
}
