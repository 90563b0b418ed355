//! Per-producer state of a partition, as far as the log can tell it: the
//! last batches each idempotent producer wrote. Checkpointed in the manifest
//! and rebuilt from the log tail on takeover, so a new leader recognises a
//! retried batch (issue: idempotent producer) without rescanning the log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::batch::BatchHeader;

/// How many recent batches per producer Kafka keeps for duplicate detection.
pub(crate) const RECENT_BATCHES: usize = 5;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    pub producers: BTreeMap<i64, ProducerEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first: (first sequence, last sequence, base offset).
    pub recent: Vec<(i32, i32, i64)>,
}

impl ProducerState {
    /// Records a batch that is now part of the log.
    pub fn observe(&mut self, h: &BatchHeader) {
        if h.producer_id < 0 {
            return;
        }
        let entry = self
            .producers
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: h.producer_epoch,
                recent: Vec::new(),
            });
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.recent.clear();
        }
        if h.base_sequence >= 0 {
            let last = h.base_sequence.wrapping_add(h.last_offset_delta);
            entry.recent.push((h.base_sequence, last, h.base_offset));
            if entry.recent.len() > RECENT_BATCHES {
                entry.recent.remove(0);
            }
        }
    }

    /// The base offset a batch got the first time, if it is a retry of one
    /// of the producer's recent batches.
    #[cfg(test)]
    pub(crate) fn duplicate_of(&self, h: &BatchHeader) -> Option<i64> {
        let entry = self.producers.get(&h.producer_id)?;
        if entry.epoch != h.producer_epoch {
            return None;
        }
        let last = h.base_sequence.wrapping_add(h.last_offset_delta);
        entry
            .recent
            .iter()
            .find(|(first, l, _)| *first == h.base_sequence && *l == last)
            .map(|(_, _, offset)| *offset)
    }

    /// Kafka's sequence rules for an idempotent producer's batch, given
    /// everything this partition has taken from that producer so far.
    pub fn check(&self, h: &BatchHeader) -> Sequence {
        if h.producer_id < 0 {
            return Sequence::Next;
        }
        // A producer the partition has never seen (or whose state expired
        // with the log) may start at any sequence, as in Kafka since KIP-360.
        let Some(entry) = self.producers.get(&h.producer_id) else {
            return Sequence::Next;
        };
        if h.producer_epoch < entry.epoch {
            return Sequence::StaleEpoch;
        }
        if h.producer_epoch > entry.epoch {
            return if h.base_sequence == 0 {
                Sequence::Next
            } else {
                Sequence::OutOfOrder
            };
        }
        if let Some((first, last, base)) = entry
            .recent
            .iter()
            .find(|(first, l, _)| {
                *first == h.base_sequence && *l == h.base_sequence.wrapping_add(h.last_offset_delta)
            })
            .copied()
        {
            return Sequence::Duplicate {
                base_offset: base,
                last_offset: base + i64::from(last.wrapping_sub(first)),
            };
        }
        match entry.recent.last() {
            None => Sequence::Next,
            Some((_, last, _)) if h.base_sequence == next_sequence(*last) => Sequence::Next,
            Some(_) => Sequence::OutOfOrder,
        }
    }

    #[cfg(test)]
    pub(crate) fn last_sequence(&self, producer_id: i64) -> Option<(i16, i32)> {
        let e = self.producers.get(&producer_id)?;
        e.recent.last().map(|(_, last, _)| (e.epoch, *last))
    }
}

/// What the log does with a batch of an idempotent producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequence {
    /// The next batch in order (or not idempotent): append it.
    Next,
    /// A retry of one of the recent batches: answer its original offsets,
    /// do not append it again.
    Duplicate { base_offset: i64, last_offset: i64 },
    /// A gap or a batch from before the recent ones: OUT_OF_ORDER_SEQUENCE_NUMBER.
    OutOfOrder,
    /// An older producer epoch than the partition has seen: INVALID_PRODUCER_EPOCH.
    StaleEpoch,
}

/// Sequences wrap from i32::MAX to 0, as in Kafka.
fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX { 0 } else { last + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch;

    fn header(pid: i64, epoch: i16, seq: i32, offset: i64) -> BatchHeader {
        let mut b = batch::build((pid, epoch, seq), 0, &[b"a", b"b"]).to_vec();
        batch::stamp(&mut b, offset, 1);
        batch::parse(&b).unwrap()
    }

    #[test]
    fn keeps_the_last_five_batches_per_producer_and_resets_on_a_new_epoch() {
        let mut s = ProducerState::default();
        for i in 0..7 {
            s.observe(&header(1, 0, i * 2, i64::from(i) * 2));
        }
        assert_eq!(s.producers[&1].recent.len(), RECENT_BATCHES);
        assert_eq!(s.duplicate_of(&header(1, 0, 12, 999)), Some(12));
        assert_eq!(s.duplicate_of(&header(1, 0, 0, 999)), None, "evicted");
        assert_eq!(s.last_sequence(1), Some((0, 13)));
        s.observe(&header(1, 1, 0, 20));
        assert_eq!(s.producers[&1].recent.len(), 1);
        s.observe(&header(-1, -1, -1, 30));
        assert_eq!(s.check(&header(-1, -1, -1, 0)), Sequence::Next);
        assert_eq!(
            s.producers.len(),
            1,
            "non-idempotent batches are not tracked"
        );
    }

    #[test]
    fn sequence_rules_follow_kafka() {
        let mut s = ProducerState::default();
        assert_eq!(
            s.check(&header(7, 0, 40, 0)),
            Sequence::Next,
            "unknown producer"
        );
        s.observe(&header(7, 0, 0, 10)); // sequences 0..=1 at offsets 10..=11
        assert_eq!(s.check(&header(7, 0, 2, 0)), Sequence::Next);
        assert_eq!(
            s.check(&header(7, 0, 0, 0)),
            Sequence::Duplicate {
                base_offset: 10,
                last_offset: 11
            }
        );
        assert_eq!(s.check(&header(7, 0, 3, 0)), Sequence::OutOfOrder, "gap");
        assert_eq!(
            s.check(&header(7, 0, 1, 0)),
            Sequence::OutOfOrder,
            "overlap"
        );
        assert_eq!(
            s.check(&header(7, 1, 0, 0)),
            Sequence::Next,
            "new epoch from 0"
        );
        assert_eq!(s.check(&header(7, 1, 5, 0)), Sequence::OutOfOrder);
        s.observe(&header(7, 1, 0, 20));
        assert_eq!(s.check(&header(7, 0, 2, 0)), Sequence::StaleEpoch);
        assert_eq!(next_sequence(i32::MAX), 0);
    }
}
