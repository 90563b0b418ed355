//! A transactional id's state as its coordinator keeps it on the volume:
//! `groups/<slot>/txn-<hash>-<epoch>` (see `crate::slot_files`).

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};

use crate::slot_files::SlotRecord;

/// Kafka's transaction states (`TransactionState`), as DescribeTransactions
/// and ListTransactions name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Empty,
            Self::Ongoing,
            Self::PrepareCommit,
            Self::PrepareAbort,
            Self::CompleteCommit,
            Self::CompleteAbort,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    /// Decided, markers not all written yet: whoever coordinates the slot
    /// drives it to its end.
    pub fn is_prepared(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }
}

/// The partition markers of a transaction's offset commits go to: Kafka's
/// `__consumer_offsets` partition of the group, which in kaas is the
/// group's coordinator slot.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the current (or last) transaction, groups'
    /// offsets as `(OFFSETS_TOPIC, slot)`.
    pub partitions: BTreeSet<(String, i32)>,
    /// Wall-clock start of the current transaction (ms), -1 if none.
    pub started_ms: i64,
    pub updated_ms: i64,
    /// The epoch its producer held before the last bump, when that
    /// producer keeps the right to claim the bumped one by an
    /// InitProducerId naming its old epoch (KIP-360: a retry whose first
    /// answer was lost; KIP-588: the producer whose transaction timed
    /// out); -1 once a new producer took the id over.
    #[serde(default = "no_epoch")]
    pub last_producer_epoch: i16,
}

fn no_epoch() -> i16 {
    -1
}

impl SlotRecord for TxnRecord {
    const KIND: &'static str = "transaction";
    const PREFIX: &'static str = "txn-";
    fn key(&self) -> &str {
        &self.transactional_id
    }
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl TxnRecord {
    pub fn new(id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        Self {
            transactional_id: id.to_owned(),
            producer_id,
            producer_epoch: 0,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            started_ms: -1,
            updated_ms: now_ms,
            last_producer_epoch: -1,
        }
    }

    /// The request's producer must be this id's current one: an older
    /// epoch was fenced by a newer InitProducerId.
    pub fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), i16> {
        if producer_id != self.producer_id {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        if epoch < self.producer_epoch {
            return Err(code(ResponseError::ProducerFenced));
        }
        if epoch > self.producer_epoch {
            return Err(code(ResponseError::InvalidProducerEpoch));
        }
        Ok(())
    }

    /// EndTxn's check: `check_producer`, except for the producer whose open
    /// transaction was aborted for it (its timeout, or its own
    /// InitProducerId) and whose bumped epoch has opened nothing since: it
    /// gets INVALID_PRODUCER_ID_MAPPING, which clients answer by claiming
    /// that epoch (KIP-360, KIP-588) and carrying on, instead of
    /// PRODUCER_FENCED, which they take as fatal. A client whose commit or
    /// abort raced its transaction's timeout by a millisecond is not a
    /// zombie; a producer fenced by a newer instance still is.
    pub fn check_ending_producer(&self, producer_id: i64, epoch: i16) -> Result<(), i16> {
        let aborted_for_it = producer_id == self.producer_id
            && epoch >= 0
            && epoch == self.last_producer_epoch
            && epoch < self.producer_epoch
            && matches!(self.state, TxnState::PrepareAbort | TxnState::CompleteAbort);
        if aborted_for_it {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        self.check_producer(producer_id, epoch)
    }

    /// Adds partitions to the transaction, opening it if none is open.
    /// `Ok(false)`: all were in already (nothing to persist).
    pub fn add(
        &mut self,
        partitions: impl IntoIterator<Item = (String, i32)>,
        now_ms: i64,
    ) -> Result<bool, i16> {
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(code(ResponseError::ConcurrentTransactions));
            }
            TxnState::Ongoing => {}
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                self.partitions.clear();
                self.started_ms = now_ms;
            }
        }
        let before = (self.state, self.partitions.len());
        self.state = TxnState::Ongoing;
        self.partitions.extend(partitions);
        if before == (TxnState::Ongoing, self.partitions.len()) {
            return Ok(false);
        }
        self.updated_ms = now_ms;
        Ok(true)
    }

    /// EndTxn: `Ok(true)` when the transaction moved to its prepare state
    /// (persist, then answer), `Ok(false)` for a retry of an end already
    /// decided the same way.
    pub fn end(&mut self, commit: bool, now_ms: i64) -> Result<bool, i16> {
        let retry_of = |done: TxnState| {
            if done
                == if commit {
                    TxnState::CompleteCommit
                } else {
                    TxnState::CompleteAbort
                }
            {
                Ok(false)
            } else {
                Err(code(ResponseError::InvalidTxnState))
            }
        };
        match self.state {
            TxnState::Ongoing => {
                self.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                self.updated_ms = now_ms;
                Ok(true)
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                // Kafka's answer to a retry while the markers go out.
                Err(code(ResponseError::ConcurrentTransactions))
            }
            // An abort after a complete commit ends a new transaction that
            // never got a partition added (its AddPartitionsToTxn met the
            // markers of the one before: CONCURRENT_TRANSACTIONS), and its
            // client sends EndTxn because it asked. It cannot be the
            // committed one's: clients refuse to abort a transaction they
            // asked to commit (librdkafka, the Java client). Nothing to
            // undo, as in Empty; INVALID_TXN_STATE would be fatal to it.
            TxnState::CompleteCommit if !commit => Ok(false),
            done @ (TxnState::CompleteCommit | TxnState::CompleteAbort) => retry_of(done),
            // Nothing was added: an abort has nothing to undo.
            TxnState::Empty if !commit => Ok(false),
            TxnState::Empty => Err(code(ResponseError::InvalidTxnState)),
        }
    }

    /// Aborts the open transaction under a bumped epoch, fencing the
    /// producer that opened it (a timeout, or an InitProducerId). With
    /// `recoverable` (a timeout, or that producer's own InitProducerId)
    /// the producer may claim the bumped epoch by naming its old one.
    pub fn abort_and_fence(&mut self, now_ms: i64, recoverable: bool) {
        if self.state == TxnState::Ongoing {
            self.last_producer_epoch = if recoverable { self.producer_epoch } else { -1 };
            self.producer_epoch = self.producer_epoch.saturating_add(1);
            self.state = TxnState::PrepareAbort;
            self.updated_ms = now_ms;
        }
    }

    /// The markers are all written.
    pub fn complete(&mut self, now_ms: i64) {
        self.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            s => s,
        };
        self.started_ms = -1;
        self.updated_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str, n: i32) -> (String, i32) {
        (t.to_owned(), n)
    }

    #[test]
    fn a_transaction_goes_from_ongoing_through_prepare_to_complete() {
        let mut r = TxnRecord::new("tx", 7, 60_000, 1);
        assert_eq!(
            r.end(true, 2),
            Err(48),
            "INVALID_TXN_STATE: nothing to commit"
        );
        assert_eq!(r.add([p("t", 0)], 3), Ok(true));
        assert_eq!((r.state, r.started_ms), (TxnState::Ongoing, 3));
        assert_eq!(r.add([p("t", 0)], 4), Ok(false), "already in");
        assert_eq!(r.end(true, 5), Ok(true));
        assert_eq!(r.state, TxnState::PrepareCommit);
        assert_eq!(r.add([p("t", 1)], 6), Err(51), "CONCURRENT_TRANSACTIONS");
        assert_eq!(r.end(true, 6), Err(51));
        r.complete(7);
        assert_eq!(r.state, TxnState::CompleteCommit);
        assert_eq!(r.end(true, 8), Ok(false), "a retried commit");
        assert_eq!(
            r.end(false, 8),
            Ok(false),
            "an abort of a next transaction that added nothing"
        );
        assert_eq!(r.state, TxnState::CompleteCommit, "changes nothing");
        assert_eq!(r.add([p("t", 1)], 9), Ok(true));
        assert_eq!(r.partitions.len(), 1, "a new transaction starts empty");
        assert_eq!(
            TxnState::from_name("PrepareAbort"),
            Some(TxnState::PrepareAbort)
        );
    }

    #[test]
    fn a_fenced_or_foreign_producer_is_refused() {
        let mut r = TxnRecord::new("tx", 7, 60_000, 1);
        r.producer_epoch = 3;
        assert_eq!(r.check_producer(7, 3), Ok(()));
        assert_eq!(r.check_producer(7, 2), Err(90), "PRODUCER_FENCED");
        assert_eq!(
            r.check_producer(8, 3),
            Err(49),
            "INVALID_PRODUCER_ID_MAPPING"
        );
        r.add([p("t", 0)], 2).unwrap();
        r.abort_and_fence(3, true);
        assert_eq!((r.state, r.producer_epoch), (TxnState::PrepareAbort, 4));
        assert_eq!(r.last_producer_epoch, 3, "its producer may claim epoch 4");
        assert_eq!(r.check_producer(7, 3), Err(90));
        // Its EndTxn, late: a retriable answer, which makes it claim 4.
        assert_eq!(r.check_ending_producer(7, 3), Err(49));
        r.complete(4);
        assert_eq!(r.check_ending_producer(7, 3), Err(49));
        assert_eq!(r.check_ending_producer(7, 2), Err(90), "older still");
        r.add([p("t", 0)], 5).unwrap();
        assert_eq!(
            r.check_ending_producer(7, 3),
            Err(90),
            "epoch 4 opened a transaction: 3 is fenced for good"
        );
        r.abort_and_fence(6, false);
        assert_eq!((r.producer_epoch, r.last_producer_epoch), (5, -1));
        assert_eq!(r.check_ending_producer(7, 4), Err(90), "a newer instance");
    }
}
