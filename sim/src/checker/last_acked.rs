//! The rule shared by the settings admins change through a versioned
//! document (preferred leaders, client quotas): after the run, a setting
//! holds what its last acknowledged request set, or what a request that
//! may still have landed set.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::actors::movers::AdminOutcome;

/// One request: (answered, sent, the value it set, outcome).
pub(super) type Request<V> = (Duration, Duration, Option<V>, AdminOutcome);

/// The last acknowledged request (by its answer) and the values the
/// setting may hold after the run: that request's, or one an acknowledged
/// request answered after it was sent (later or concurrent), or one an
/// unanswered request set (it may land at any time). `None` when no
/// request was acknowledged.
pub(super) fn allowed<V: Ord + Clone>(
    reqs: &[Request<V>],
) -> Option<(&Request<V>, BTreeSet<Option<V>>)> {
    let last = reqs
        .iter()
        .filter(|r| r.3 == AdminOutcome::Acked)
        .max_by_key(|r| r.0)?;
    let sent = last.1;
    let allowed = reqs
        .iter()
        .filter(|r| match r.3 {
            AdminOutcome::Unknown => true,
            AdminOutcome::Acked => r.0 >= sent,
            AdminOutcome::Refused(_) => false,
        })
        .map(|r| r.2.clone())
        .chain([last.2.clone()])
        .collect();
    Some((last, allowed))
}
