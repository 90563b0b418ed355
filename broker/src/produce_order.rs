//! Keeps an idempotent producer's pipelined batches in order across a
//! refusal on one connection.
//!
//! A client keeps up to five produce requests per partition in flight.
//! When a broker refuses the first (it does not lead the partition yet:
//! its takeover is still reading the volume), the ones behind it were
//! sent before the client knew. Were one of them appended once the
//! takeover finished, the gap before it would be answered
//! OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka takes for records the
//! broker lost: it starts a new producer epoch and sends the records again,
//! and what the previous leader had already written is then in the log
//! twice (the real-NFS campaign saw exactly this after a takeover).
//! Refused like the first, they come back in order behind it.

use std::collections::BTreeMap;

use crate::log::batch::BatchHeader;

/// Per connection: the first batch refused on each partition, while the
/// batches behind it are refused too.
#[derive(Debug, Default)]
pub struct ProduceOrder {
    refused: BTreeMap<(String, i32), Refused>,
}

#[derive(Debug, Clone, Copy)]
struct Refused {
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl ProduceOrder {
    /// Whether no refusal stands on any partition (the common case: a
    /// produce then needs neither its topic key nor its batch header).
    pub fn is_empty(&self) -> bool {
        self.refused.is_empty()
    }

    /// Whether a refusal on `partition` of `topic` stands (so that a
    /// produce there needs its batch header read).
    pub fn watches(&self, topic: &str, partition: i32) -> bool {
        self.refused.contains_key(&(topic.to_owned(), partition))
    }

    /// Whether `batch` to `partition` of `topic` (a name, or an id for
    /// requests that name topics by id) was sent behind a refused batch
    /// of its producer and must be refused the same way. The refused
    /// batch sent again, or a batch of another producer or epoch, ends
    /// the refusal.
    pub fn behind_a_refusal(&mut self, topic: &str, partition: i32, batch: &BatchHeader) -> bool {
        let key = (topic.to_owned(), partition);
        let Some(r) = self.refused.get(&key) else {
            return false;
        };
        let behind = batch.producer_id == r.producer_id
            && batch.producer_epoch == r.producer_epoch
            && after(batch.base_sequence, r.base_sequence);
        if !behind {
            self.refused.remove(&key);
        }
        behind
    }

    /// Ends the refusal standing on `partition` of `topic`.
    pub fn release(&mut self, topic: &str, partition: i32) {
        self.refused.remove(&(topic.to_owned(), partition));
    }

    /// Remembers that `batch` was refused with a retriable error before
    /// it reached the log (the first of a run; later ones do not move it).
    pub fn refused(&mut self, topic: &str, partition: i32, batch: &BatchHeader) {
        if batch.producer_id < 0 || batch.base_sequence < 0 {
            return;
        }
        self.refused
            .entry((topic.to_owned(), partition))
            .or_insert(Refused {
                producer_id: batch.producer_id,
                producer_epoch: batch.producer_epoch,
                base_sequence: batch.base_sequence,
            });
    }
}

/// Whether sequence `b` comes after `a`: sequences run from 0 to
/// i32::MAX and wrap to 0, and a producer has far fewer than 2^30 records
/// in flight.
fn after(b: i32, a: i32) -> bool {
    let d = (i64::from(b) - i64::from(a)).rem_euclid(1 << 31);
    d > 0 && d < 1 << 30
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch;

    fn header(producer: (i64, i16, i32)) -> BatchHeader {
        batch::parse(&batch::build(producer, 0, &[b"v"])).unwrap()
    }

    #[test]
    fn batches_behind_a_refusal_are_refused_until_it_is_sent_again() {
        let mut o = ProduceOrder::default();
        assert!(!o.behind_a_refusal("t", 0, &header((7, 0, 5))));
        o.refused("t", 0, &header((7, 0, 6)));
        o.refused("t", 0, &header((7, 0, 7))); // the first refusal stands
        assert!(o.behind_a_refusal("t", 0, &header((7, 0, 7))));
        assert!(o.behind_a_refusal("t", 0, &header((7, 0, 9))));
        assert!(
            !o.behind_a_refusal("t", 1, &header((7, 0, 9))),
            "another partition"
        );
        assert!(
            !o.behind_a_refusal("t", 0, &header((7, 0, 6))),
            "sent again"
        );
        assert!(
            !o.behind_a_refusal("t", 0, &header((7, 0, 7))),
            "the refusal ended"
        );
    }

    #[test]
    fn another_producer_or_epoch_ends_the_refusal() {
        let mut o = ProduceOrder::default();
        o.refused("t", 0, &header((7, 0, 6)));
        assert!(!o.behind_a_refusal("t", 0, &header((7, 1, 0))));
        assert!(!o.behind_a_refusal("t", 0, &header((7, 0, 8))));
        o.refused("t", 0, &header((7, 0, 6)));
        assert!(!o.behind_a_refusal("t", 0, &header((8, 0, 9))));
    }

    #[test]
    fn sequences_compare_across_their_wrap() {
        let mut o = ProduceOrder::default();
        o.refused("t", 0, &header((7, 0, i32::MAX)));
        assert!(o.behind_a_refusal("t", 0, &header((7, 0, 0))));
        o.refused("t", 0, &header((-1, -1, -1)));
        assert!(
            o.behind_a_refusal("t", 0, &header((7, 0, 1))),
            "plain batches are not tracked"
        );
    }
}
