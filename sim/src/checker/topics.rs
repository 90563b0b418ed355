//! Topic administration (create-failed, new-topic-unwritable).

use std::time::Duration;

use super::{INVALID_PARTITIONS, Invariant, Judge, KAFKA_STORAGE_ERROR, TOPIC_ALREADY_EXISTS, at};
use crate::history::Event;

/// The brokers' session timeout (the simulator keeps the default): how
/// long a dead controller goes unreplaced.
const CONTROLLER_FAILOVER: Duration = Duration::from_secs(10);

impl<'a> Judge<'a> {
    /// A create (or a grow) of a topic only this client asks for fails
    /// only for the volume's reasons: an I/O error injected while it ran.
    /// Anything else the cluster did to itself (a sweep of a live creator's
    /// staging, two admin requests tripping over each other). "Already
    /// exists" is fine only after an attempt whose outcome is unknown.
    pub(super) fn admin(
        &mut self,
        t: &Duration,
        request: (&'a str, &'a str, bool),
        broker: u32,
        sent: &Duration,
        answer: &Option<(i16, String)>,
        volume_errors: u64,
    ) {
        let (client, topic, grow) = request;
        let retried = self.admin_in_doubt.contains(&request);
        match answer {
            None => {
                self.admin_in_doubt.insert(request);
            }
            Some((0, _)) => {}
            Some((TOPIC_ALREADY_EXISTS, _)) if !grow && retried => {}
            Some((INVALID_PARTITIONS, _)) if grow && retried => {}
            Some((KAFKA_STORAGE_ERROR, _)) if volume_errors > 0 => {
                self.admin_in_doubt.insert(request);
            }
            Some((code, message)) => {
                self.admin_in_doubt.insert(request);
                self.violate(Invariant::CreateFailed, format!(
                    "{client} {} {topic} via broker-{broker} (sent at {}, answered at {}, {volume_errors} volume errors meanwhile): error {code} {message}",
                    if grow { "grew" } else { "created" },
                    at(sent),
                    at(t)
                ));
            }
        }
    }
}

/// new-topic-unwritable: the first write to a topic created once the
/// faults healed is accepted within `LEADERS_WAIT` of the creation's
/// answer, or of the moment its client began to write if that was later,
/// plus one controller failover: the faults may have left the controller
/// dead or cut off just before (seed 229: a new controller 9.7 s after the
/// topic was created), and new topics wait for a live one.
pub(super) fn new_topics(events: &[(Duration, Event)], out: &mut Vec<String>) {
    let bound = broker::api::LEADERS_WAIT + CONTROLLER_FAILOVER;
    for (_, e) in events {
        if let Event::NewTopicWritable {
            topic,
            answered,
            writable,
            settle,
        } = e
        {
            let began = *answered + *settle;
            if writable.saturating_sub(began) > bound {
                out.push(Invariant::NewTopicUnwritable.says(format!(
                    "{topic}: created (answered at {}), written to from {}, first write \
                     accepted at {}: more than {bound:?} without a leader",
                    at(answered),
                    at(&began),
                    at(writable),
                )));
            }
        }
    }
}
