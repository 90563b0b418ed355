//! Leader epochs as brokers answer them (epoch-regression).

use std::time::Duration;

use super::{Invariant, Judge, at};

impl<'a> Judge<'a> {
    /// A broker never goes back to an older leader epoch of a partition: it
    /// only follows newer assignments. Only answers in real-time order
    /// count: one that arrived before this request was sent (an answer
    /// held up by the network was made earlier).
    pub(super) fn metadata(
        &mut self,
        t: &Duration,
        client: &'a str,
        sent: &Duration,
        broker: u32,
        topic_id: &'a str,
        (p, leader, epoch): (i32, i32, i32),
    ) {
        if leader < 0 || epoch < 0 {
            return;
        }
        let key = (broker, topic_id, p);
        let earlier = self.epochs.entry(key).or_default();
        let before = earlier
            .iter()
            .filter(|(got, _, _)| got < sent)
            .max_by_key(|(_, e, _)| *e);
        if let Some((got, seen, who)) = before {
            if epoch < *seen && self.regressed.insert(key) {
                self.out.push(Invariant::EpochRegression.says(format!(
                    "broker-{broker} answered {client} (asked at {}) that broker-{leader} leads {topic_id}/{p} in leader epoch {epoch}, after answering {who} leader epoch {seen} at {}",
                    at(sent),
                    at(got)
                )));
            }
        }
        earlier.push((*t, epoch, client));
    }
}
