//! Per-producer state of a partition, as far as the log can tell it: the
//! last batches each idempotent producer wrote, each transactional
//! producer's open transaction, and the transactions that were aborted.
//! Checkpointed in the manifest and rebuilt from the log tail on takeover,
//! so a new leader recognises a retried batch without rescanning the log,
//! and knows the last stable offset and what read_committed readers skip.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::batch::{BatchHeader, Marker};

/// How many recent batches per producer Kafka keeps for duplicate detection.
pub(crate) const RECENT_BATCHES: usize = 5;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    pub producers: BTreeMap<i64, ProducerEntry>,
    /// Aborted transactions, in the order of their markers; read_committed
    /// fetches return the ones overlapping what they read. Pruned with the
    /// log start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aborted: Vec<AbortedTxn>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first: (first sequence, last sequence, base offset).
    pub recent: Vec<(i32, i32, i64)>,
    /// The first offset of the producer's open transaction here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ongoing: Option<i64>,
    /// The epoch of the newest coordinator whose marker this partition
    /// took: a marker from an older coordinator (a zombie) is refused.
    #[serde(default, skip_serializing_if = "is_unset")]
    pub coordinator_epoch: i32,
}

fn is_unset(e: &i32) -> bool {
    *e < 0
}

/// An aborted transaction: its first offset and its marker's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
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
                ongoing: None,
                coordinator_epoch: -1,
            });
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.recent.clear();
        }
        if let Some(c) = h.control {
            entry.coordinator_epoch = entry.coordinator_epoch.max(c.coordinator_epoch);
            if let Some(first_offset) = entry.ongoing.take() {
                if c.marker == Marker::Abort {
                    self.aborted.push(AbortedTxn {
                        producer_id: h.producer_id,
                        first_offset,
                        last_offset: h.base_offset,
                    });
                }
            }
            return;
        }
        if h.is_transactional() && entry.ongoing.is_none() {
            entry.ongoing = Some(h.base_offset);
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

    /// The last stable offset: the first offset of the oldest open
    /// transaction, else `high_watermark`.
    pub fn last_stable(&self, high_watermark: i64) -> i64 {
        self.producers
            .values()
            .filter_map(|e| e.ongoing)
            .min()
            .unwrap_or(high_watermark)
    }

    /// Producer id -> epoch of every producer with a transaction open here.
    pub fn open_transactions(&self) -> BTreeMap<i64, i16> {
        self.producers
            .iter()
            .filter(|(_, e)| e.ongoing.is_some())
            .map(|(id, e)| (*id, e.epoch))
            .collect()
    }

    /// Whether a producer has a transaction open here.
    pub fn in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.epoch == epoch && e.ongoing.is_some())
    }

    /// Forgets aborted transactions wholly below the log start.
    pub fn prune(&mut self, log_start_offset: i64) {
        self.aborted.retain(|a| a.last_offset >= log_start_offset);
    }

    /// Kafka's rules for a producer's batch, given everything this
    /// partition has taken from that producer so far: sequences of
    /// idempotent producers, and for transactions that the first batch
    /// was `verified` (the coordinator said the partition joined the
    /// transaction, KIP-890) and that a marker comes from the newest
    /// coordinator.
    pub fn check(&self, h: &BatchHeader, verified: Option<i16>) -> Sequence {
        if h.producer_id < 0 {
            return Sequence::Next;
        }
        let entry = self.producers.get(&h.producer_id);
        if let Some(c) = h.control {
            return match entry {
                Some(e) if h.producer_epoch < e.epoch => Sequence::StaleEpoch,
                Some(e) if c.coordinator_epoch < e.coordinator_epoch => Sequence::ZombieCoordinator,
                _ => Sequence::Next,
            };
        }
        if h.is_transactional()
            && !entry.is_some_and(|e| e.ongoing.is_some() && e.epoch == h.producer_epoch)
            && verified != Some(h.producer_epoch)
        {
            return match entry {
                Some(e) if h.producer_epoch < e.epoch => Sequence::StaleEpoch,
                _ => Sequence::NotInTransaction,
            };
        }
        // A producer the partition has never seen (or whose state expired
        // with the log) may start at any sequence, as in Kafka since KIP-360.
        let Some(entry) = entry else {
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
    fn check_plain(&self, h: &BatchHeader) -> Sequence {
        self.check(h, None)
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
    /// A transactional batch opening a transaction the coordinator did not
    /// confirm this partition joined: INVALID_TXN_STATE.
    NotInTransaction,
    /// A marker from an older coordinator than the last marker's:
    /// TRANSACTION_COORDINATOR_FENCED.
    ZombieCoordinator,
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
        assert_eq!(s.check_plain(&header(-1, -1, -1, 0)), Sequence::Next);
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
            s.check_plain(&header(7, 0, 40, 0)),
            Sequence::Next,
            "unknown producer"
        );
        s.observe(&header(7, 0, 0, 10)); // sequences 0..=1 at offsets 10..=11
        assert_eq!(s.check_plain(&header(7, 0, 2, 0)), Sequence::Next);
        assert_eq!(
            s.check_plain(&header(7, 0, 0, 0)),
            Sequence::Duplicate {
                base_offset: 10,
                last_offset: 11
            }
        );
        assert_eq!(
            s.check_plain(&header(7, 0, 3, 0)),
            Sequence::OutOfOrder,
            "gap"
        );
        assert_eq!(
            s.check_plain(&header(7, 0, 1, 0)),
            Sequence::OutOfOrder,
            "overlap"
        );
        assert_eq!(
            s.check_plain(&header(7, 1, 0, 0)),
            Sequence::Next,
            "new epoch from 0"
        );
        assert_eq!(s.check_plain(&header(7, 1, 5, 0)), Sequence::OutOfOrder);
        s.observe(&header(7, 1, 0, 20));
        assert_eq!(s.check_plain(&header(7, 0, 2, 0)), Sequence::StaleEpoch);
        assert_eq!(next_sequence(i32::MAX), 0);
    }

    fn stamped(mut b: Vec<u8>, offset: i64) -> BatchHeader {
        batch::stamp(&mut b, offset, 1);
        batch::parse(&b).unwrap()
    }

    fn txn(pid: i64, epoch: i16, seq: i32, offset: i64) -> BatchHeader {
        stamped(
            batch::build_transactional((pid, epoch, seq), 0, &[b"a", b"b"]).to_vec(),
            offset,
        )
    }

    fn marker(pid: i64, epoch: i16, m: Marker, coordinator: i32, offset: i64) -> BatchHeader {
        stamped(
            batch::build_marker((pid, epoch), m, coordinator, 0).to_vec(),
            offset,
        )
    }

    #[test]
    fn transactions_need_verification_and_end_with_a_marker_of_the_newest_coordinator() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(&txn(3, 0, 0, 0), None), Sequence::NotInTransaction);
        assert_eq!(s.check(&txn(3, 0, 0, 0), Some(0)), Sequence::Next);
        s.observe(&txn(3, 0, 0, 10));
        assert_eq!(s.last_stable(99), 10);
        assert!(s.in_transaction(3, 0));
        // Once open, the transaction's next batches need no verification.
        assert_eq!(s.check(&txn(3, 0, 2, 0), None), Sequence::Next);
        s.observe(&txn(3, 0, 2, 12));
        s.observe(&txn(4, 0, 0, 14));
        assert_eq!(s.last_stable(99), 10);
        s.observe(&marker(3, 0, Marker::Abort, 5, 16));
        assert_eq!(s.last_stable(99), 14, "producer 4's transaction is open");
        assert_eq!(
            s.aborted,
            [AbortedTxn {
                producer_id: 3,
                first_offset: 10,
                last_offset: 16
            }]
        );
        assert_eq!(
            s.check(&marker(4, 0, Marker::Commit, 4, 0), None),
            Sequence::Next,
            "producer 4 has seen no coordinator yet"
        );
        s.observe(&marker(4, 0, Marker::Commit, 5, 17));
        assert_eq!(s.last_stable(99), 99);
        assert_eq!(s.aborted.len(), 1, "a commit is not listed");
        assert_eq!(
            s.check(&marker(3, 0, Marker::Commit, 4, 0), None),
            Sequence::ZombieCoordinator
        );
        // After the marker, data needs a new verification.
        assert_eq!(s.check(&txn(3, 0, 4, 0), None), Sequence::NotInTransaction);
        // A bumped epoch's marker (an abort on timeout) fences the old epoch.
        s.observe(&marker(3, 1, Marker::Abort, 6, 18));
        assert_eq!(s.check(&txn(3, 0, 4, 0), Some(0)), Sequence::StaleEpoch);
        s.prune(17);
        assert!(s.aborted.is_empty());
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<ProducerState>(&json).unwrap(), s);
    }
}
