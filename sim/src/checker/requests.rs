//! request-unanswered: once the faults healed, the final pipeliner's
//! requests (`pipeliner`) are all answered within their timeout; and
//! liveness: it finishes its transactions.

use std::time::Duration;

use crate::history::Event;

use super::Invariant;

pub(super) fn answered(events: &[(Duration, Event)], out: &mut Vec<String>) {
    for (_, e) in events {
        let Event::FinalRequests {
            client,
            sent,
            timed_out,
            transactions,
            wanted,
        } = e
        else {
            continue;
        };
        for what in timed_out {
            out.push(Invariant::RequestUnanswered.says(format!(
                "{client}, after the faults healed: {what} ({} of its {sent} requests unanswered)",
                timed_out.len()
            )));
        }
        if transactions < wanted {
            out.push(Invariant::Liveness.says(format!(
                "{client} finished {transactions} of its {wanted} pipelined transactions before the deadline"
            )));
        }
    }
}
