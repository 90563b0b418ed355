//! Per-producer state of a partition, as far as the log can tell it: the
//! last batches each idempotent producer wrote. Checkpointed in the manifest
//! and rebuilt from the log tail on takeover, so a new leader recognises a
//! retried batch (issue: idempotent producer) without rescanning the log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::batch::BatchHeader;

/// How many recent batches per producer Kafka keeps for duplicate detection.
pub const RECENT_BATCHES: usize = 5;

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
    pub fn duplicate_of(&self, h: &BatchHeader) -> Option<i64> {
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

    pub fn last_sequence(&self, producer_id: i64) -> Option<(i16, i32)> {
        let e = self.producers.get(&producer_id)?;
        e.recent.last().map(|(_, last, _)| (e.epoch, *last))
    }
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
        assert_eq!(
            s.producers.len(),
            1,
            "non-idempotent batches are not tracked"
        );
    }
}
