//! The client quotas' rules (`quota_setters`).
//!
//! quota-change-lost: per (entity, key), the quota on the volume after the
//! run is the one the last acknowledged request set, or one a later,
//! concurrent or unanswered request set (`last_acked`).
//!
//! quota-exceeded: once the faults healed, each broker sends the throttled
//! client at most its rate over the window, plus one second's burst (a
//! budget saves up at most that), plus two answers (one under way when
//! the window opened, one per connection the client opened after its
//! call timed out on a muted one: at most one answer in debt each, and
//! the client reconnects about every four seconds). Likewise each broker
//! that led the throttled producer's partition appends at most its rate
//! over the window plus one second's burst, plus one request per
//! connection (a produce is appended before it is throttled, and a new
//! connection is not muted): two, and one per request that went
//! unanswered.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::actors::quota_setters::FETCH_MAX_BYTES;
use crate::history::Event;

use super::last_acked::{Request, allowed};
use super::{Invariant, at};

type Key = (String, &'static str);

pub(super) fn check(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let mut requests: BTreeMap<Key, Vec<Request<u64>>> = BTreeMap::new();
    let mut found = None;
    let mut window = None;
    let mut fetched: Vec<(Duration, u32, usize)> = Vec::new();
    for (t, e) in events {
        match e {
            Event::QuotaChange {
                entity,
                key,
                rate,
                sent,
                outcome,
            } => requests
                .entry((entity.clone(), key))
                .or_default()
                .push((*t, *sent, *rate, *outcome)),
            Event::QuotaFinal { found: f } => found = Some(f.clone()),
            Event::QuotaFetched { broker, bytes } => fetched.push((*t, *broker, *bytes)),
            Event::QuotaWindow { from, to, rate } => window = Some((*from, *to, *rate)),
            Event::QuotaProduced {
                from,
                to,
                rate,
                batch_bytes,
                appended,
                leaders,
                unanswered,
            } => {
                let span = to.saturating_sub(*from) + broker::quota::throttle::BURST;
                let budget = (*rate as f64 * span.as_secs_f64()) as usize * (*leaders).max(1);
                let allowed = budget + (2 + unanswered) * batch_bytes;
                let bytes = appended * batch_bytes;
                if bytes > allowed {
                    out.push(Invariant::QuotaExceeded.says(format!(
                        "the throttled producer's log holds {appended} records of {batch_bytes} \
                         bytes written between {} and {} at a producer_byte_rate of {rate} B/s \
                         on {leaders} leader(s) with {unanswered} request(s) unanswered: at \
                         most {allowed} bytes may pass",
                        at(from),
                        at(to)
                    )));
                }
            }
            _ => {}
        }
    }
    if let Some(Some(quotas)) = found {
        for (key, reqs) in &requests {
            let Some((&(answered, sent, rate, _), allowed)) = allowed(reqs) else {
                continue;
            };
            let now = quotas.get(key).copied();
            if !allowed.contains(&now) {
                out.push(Invariant::QuotaChangeLost.says(format!(
                    "{} {}: the volume holds {now:?}, but the last acknowledged change (sent {}, \
                     answered {}) set {rate:?} and no later, concurrent or unanswered one set \
                     {now:?}",
                    key.0,
                    key.1,
                    at(&sent),
                    at(&answered)
                )));
            }
        }
    }
    let Some((from, to, rate)) = window else {
        return;
    };
    let mut per_broker: BTreeMap<u32, usize> = BTreeMap::new();
    for (t, broker, bytes) in fetched {
        if t >= from && t <= to {
            *per_broker.entry(broker).or_default() += bytes;
        }
    }
    let span = to.saturating_sub(from) + broker::quota::throttle::BURST;
    let allowed = (rate as f64 * span.as_secs_f64()) as usize
        + (2 + to.saturating_sub(from).as_secs() as usize / 4) * FETCH_MAX_BYTES;
    for (broker, bytes) in per_broker {
        if bytes > allowed {
            out.push(Invariant::QuotaExceeded.says(format!(
                "broker {broker} sent the throttled client {bytes} bytes between {} and {} \
                 at a consumer_byte_rate of {rate} B/s: at most {allowed} may pass",
                at(&from),
                at(&to)
            )));
        }
    }
}
