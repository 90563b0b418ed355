//! Transaction coordination: each transactional id's state is a file in
//! its coordinator slot (the slots groups use, fenced by the same
//! coordinator epoch), written by that epoch's coordinator only and
//! acknowledged only after a fresh check that no newer epoch was claimed.
//!
//! A transaction is decided when its prepare state (PrepareCommit or
//! PrepareAbort) is on the volume: from then on it only goes one way. The
//! coordinator then asks the leader of every partition in it to write the
//! marker (WriteTxnMarkers, `crate::api::txn_markers`), and when all are
//! written records the complete state. A coordinator that takes a slot
//! over drives every prepared transaction it finds to its end, and aborts
//! open transactions whose timeout passed, under a bumped producer epoch
//! so that their producer is fenced.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use crate::groups::{Coordinators, Slot};
use crate::slot_files;
pub use crate::txn_store::record::{OFFSETS_TOPIC, TxnRecord, TxnState};
use crate::txn_store::{Entry, deadline};

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl Slot {
    /// The answer to a request its state refuses, once a fresh look says
    /// this coordinator still coordinates; else the look's error. A
    /// deposed coordinator's state may be stale or made up (a newer epoch
    /// removed the files it would have loaded), and a client takes
    /// PRODUCER_FENCED as fatal: it must come from the current state.
    pub(crate) async fn refuse(&self, code: i16) -> i16 {
        match self.confirm().await {
            Ok(()) => code,
            Err(e) => e,
        }
    }

    /// The id's entry, loaded from the volume if this slot has not seen it.
    pub(crate) async fn txn_entry<'a>(
        &self,
        txns: &'a mut BTreeMap<String, Entry>,
        id: &str,
    ) -> Result<Option<&'a mut Entry>, i16> {
        if !txns.contains_key(id) {
            let found = slot_files::load::<TxnRecord>(self.vfs.as_ref(), self.slot, id, self.epoch)
                .await
                .map_err(|e| {
                    tracing::warn!(transactional_id = id, error = %e, "loading a transaction");
                    code(ResponseError::CoordinatorLoadInProgress)
                })?;
            vfs::fault_point!(self.vfs, "txn-load.read");
            match found {
                Some((r, e)) => {
                    txns.insert(id.to_owned(), Entry::new(r, Some(e), Instant::now()));
                }
                None => return Ok(None),
            }
        }
        Ok(txns.get_mut(id))
    }

    /// Persists `record` as this epoch's file of the id and confirms the
    /// epoch afterwards; only then is it the entry's state (and may the
    /// caller acknowledge).
    pub(crate) async fn persist_txn(
        &self,
        txns: &mut BTreeMap<String, Entry>,
        record: TxnRecord,
    ) -> Result<(), i16> {
        if self.is_fenced() {
            return Err(code(ResponseError::NotCoordinator));
        }
        let id = record.transactional_id.clone();
        let stored = txns.get(&id).and_then(|e| e.stored);
        vfs::fault_point!(self.vfs, "txn-save.decided");
        if let Err(e) = slot_files::write(self.vfs.as_ref(), self.slot, self.epoch, &record).await {
            tracing::warn!(slot = self.slot, transactional_id = %id, error = %e, "transaction state not persisted");
            return Err(code(ResponseError::CoordinatorNotAvailable));
        }
        vfs::fault_point!(self.vfs, "txn-save.written");
        if let Some(old) = stored {
            slot_files::remove_superseded::<TxnRecord>(
                self.vfs.as_ref(),
                self.slot,
                &id,
                (old, self.epoch),
            )
            .await;
        }
        // Whatever the confirmation says, this epoch's file is the newest.
        let now = Instant::now();
        let deadline = match txns.get(&id) {
            Some(e) if e.record.state == TxnState::Ongoing && record.state == TxnState::Ongoing => {
                e.deadline
            }
            _ => (record.state == TxnState::Ongoing).then(|| deadline(&record, now)),
        };
        txns.insert(
            id,
            Entry {
                record,
                stored: Some(self.epoch),
                deadline,
            },
        );
        self.confirm().await
    }
}

/// What the marker writer needs to finish a prepared transaction.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub slot: u32,
    pub coordinator_epoch: u32,
    pub record: TxnRecord,
}

impl Coordinators {
    fn txn_slot(&self, id: &str) -> Result<std::sync::Arc<Slot>, i16> {
        self.slot_for(id)
    }

    /// InitProducerId with a transactional id: the id's producer id with
    /// the next epoch (fencing every earlier one), a new producer id the
    /// first time. An open transaction is aborted first (the client retries
    /// on CONCURRENT_TRANSACTIONS until the abort is complete).
    pub async fn init_txn_producer(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: impl AsyncFnOnce() -> Option<i64>,
    ) -> Result<(i64, i16), i16> {
        if !(1..=MAX_TRANSACTION_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(code(ResponseError::InvalidTransactionTimeout));
        }
        let slot = self.txn_slot(id)?;
        let mut txns = slot.txns.lock().await;
        let now_ms = self.config.clock.now_ms();
        let mut record = match slot.txn_entry(&mut txns, id).await? {
            None => {
                let pid = new_producer_id()
                    .await
                    .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
                let r = TxnRecord::new(id, pid, timeout_ms, now_ms);
                slot.persist_txn(&mut txns, r.clone()).await?;
                return Ok((r.producer_id, r.producer_epoch));
            }
            Some(e) => e.record.clone(),
        };
        // KIP-360: a producer that names its producer id and epoch asks
        // to bump its own epoch; only the current one may, or the one the
        // last bump left that right (its first answer was lost, or its
        // transaction timed out: KIP-588), which gets the bumped epoch
        // itself once nothing is left to abort.
        let claims_last = match expected {
            None => false,
            Some((pid, epoch)) if pid == record.producer_id => {
                if epoch == record.producer_epoch {
                    false
                } else if epoch >= 0 && epoch == record.last_producer_epoch {
                    true
                } else {
                    return Err(slot.refuse(code(ResponseError::ProducerFenced)).await);
                }
            }
            Some(_) => return Err(slot.refuse(code(ResponseError::ProducerFenced)).await),
        };
        match record.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(code(ResponseError::ConcurrentTransactions));
            }
            // The bumped epoch opened a transaction: whoever names the
            // epoch before it is not the producer that holds it.
            TxnState::Ongoing if claims_last => {
                return Err(slot.refuse(code(ResponseError::ProducerFenced)).await);
            }
            TxnState::Ongoing => {
                record.abort_and_fence(now_ms, expected.is_some());
                let persisted = slot.persist_txn(&mut txns, record).await;
                self.txn_decided.notify_one();
                persisted?;
                return Err(code(ResponseError::ConcurrentTransactions));
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {}
        }
        if claims_last {
            drop(txns);
            slot.confirm().await?;
            return Ok((record.producer_id, record.producer_epoch));
        }
        if record.producer_epoch >= i16::MAX - 1 {
            record.producer_id = new_producer_id()
                .await
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            record.producer_epoch = 0;
        } else {
            record.producer_epoch += 1;
        }
        record.last_producer_epoch = match expected {
            Some((pid, epoch)) if pid == record.producer_id => epoch,
            _ => -1,
        };
        record.timeout_ms = timeout_ms;
        record.state = TxnState::Empty;
        record.partitions.clear();
        record.updated_ms = now_ms;
        let answer = (record.producer_id, record.producer_epoch);
        slot.persist_txn(&mut txns, record).await?;
        Ok(answer)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, as the group's offsets
    /// partition): the partitions join the transaction, on the volume
    /// before the answer.
    pub async fn add_to_txn(
        &self,
        id: &str,
        producer: (i64, i16),
        partitions: Vec<(String, i32)>,
    ) -> Result<(), i16> {
        self.change_txn(id, producer, TxnRecord::check_producer, |r, now_ms| {
            r.add(partitions, now_ms)
        })
        .await
        .map(|_| ())
    }

    /// Applies `change` to the current producer's record of `id` and
    /// persists it if it changed (`Ok(true)`), else confirms this
    /// coordinator still coordinates: either way before the answer.
    async fn change_txn(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
        check: fn(&TxnRecord, i64, i16) -> Result<(), i16>,
        change: impl FnOnce(&mut TxnRecord, i64) -> Result<bool, i16>,
    ) -> Result<(std::sync::Arc<Slot>, bool), i16> {
        let slot = self.txn_slot(id)?;
        let mut txns = slot.txns.lock().await;
        let now_ms = self.config.clock.now_ms();
        let mut record = match slot.txn_entry(&mut txns, id).await? {
            None => {
                return Err(slot
                    .refuse(code(ResponseError::InvalidProducerIdMapping))
                    .await);
            }
            Some(e) => e.record.clone(),
        };
        if let Err(c) = check(&record, producer_id, epoch) {
            return Err(slot.refuse(c).await);
        }
        let changed = match change(&mut record, now_ms) {
            Ok(changed) => changed,
            Err(c) => return Err(slot.refuse(c).await),
        };
        if changed {
            let persisted = slot.persist_txn(&mut txns, record).await;
            // An open transaction has a timeout to watch, a prepared one
            // its markers (the marker writer's timer runs only while one
            // exists): also when the write's confirmation failed, since
            // the state is on the volume and in the slot all the same.
            self.txn_decided.notify_one();
            persisted?;
        } else {
            slot.confirm().await?;
        }
        drop(txns);
        Ok((slot, changed))
    }

    /// KIP-890 verification for a partition leader: whether the partition
    /// joined the producer's open transaction, confirmed by a fresh check
    /// that this coordinator still coordinates.
    pub async fn verify_in_txn(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
        partition: &(String, i32),
    ) -> Result<(), i16> {
        let slot = self.txn_slot(id)?;
        let mut txns = slot.txns.lock().await;
        let record = match slot.txn_entry(&mut txns, id).await? {
            None => return Err(code(ResponseError::InvalidProducerIdMapping)),
            Some(e) => e.record.clone(),
        };
        drop(txns);
        record.check_producer(producer_id, epoch)?;
        if record.state != TxnState::Ongoing || !record.partitions.contains(partition) {
            return Err(code(ResponseError::InvalidTxnState));
        }
        slot.confirm().await
    }

    /// EndTxn: the decision is on the volume (prepare state) before the
    /// answer; the markers follow.
    pub async fn end_txn(&self, id: &str, producer: (i64, i16), commit: bool) -> Result<(), i16> {
        let (slot, decided) = self
            .change_txn(
                id,
                producer,
                TxnRecord::check_ending_producer,
                |r, now_ms| r.end(commit, now_ms),
            )
            .await?;
        if decided {
            vfs::fault_point!(slot.vfs, "txn-end.prepared");
            self.txn_decided.notify_one();
        }
        drop(slot);
        Ok(())
    }

    /// Open transactions past their timeout are aborted under a bumped
    /// epoch; returns every prepared transaction of the slots this broker
    /// coordinates, for the marker writer.
    pub async fn txns_to_finish(&self) -> Vec<Prepared> {
        let mut out = Vec::new();
        let now = Instant::now();
        for slot in self.led() {
            let mut txns = slot.txns.lock().await;
            let expired: Vec<TxnRecord> = txns
                .values()
                .filter(|e| e.deadline.is_some_and(|d| d <= now))
                .map(|e| e.record.clone())
                .collect();
            for mut r in expired {
                tracing::info!(transactional_id = %r.transactional_id, producer_id = r.producer_id, "transaction timed out: aborting it");
                r.abort_and_fence(self.config.clock.now_ms(), true);
                if slot.persist_txn(&mut txns, r).await.is_err() {
                    break;
                }
            }
            let prepared: Vec<Prepared> = txns
                .values()
                .filter(|e| e.record.state.is_prepared())
                .map(|e| Prepared {
                    slot: slot.slot,
                    coordinator_epoch: slot.epoch,
                    record: e.record.clone(),
                })
                .collect();
            // The clients of the slot need not wait for the look below.
            drop(txns);
            // Markers go out only for decisions this epoch still stands
            // behind by a fresh look made after every write of them: a
            // coordinator deposed while it was held (its timeout's abort
            // written after its successor loaded the slot) must not abort
            // what its successor commits.
            if !prepared.is_empty() && slot.confirm().await.is_ok() {
                out.extend(prepared);
            }
        }
        out
    }

    /// Whether a slot this broker coordinates has a transaction open or
    /// prepared (the marker writer's timer runs only then).
    pub async fn txns_pending(&self) -> bool {
        for slot in self.led() {
            let txns = slot.txns.lock().await;
            if txns
                .values()
                .any(|e| e.record.state == TxnState::Ongoing || e.record.state.is_prepared())
            {
                return true;
            }
        }
        false
    }

    /// Whether `p` is still waiting for its markers here. A pass of the
    /// marker writer may find a transaction prepared just before another
    /// pass completes it; its markers sent again would land after the
    /// producer's next transaction began on a partition (same producer id
    /// and epoch) and end that one too.
    pub async fn still_prepared(&self, p: &Prepared) -> bool {
        let Ok(slot) = self.slot_of_prepared(p) else {
            return false;
        };
        let txns = slot.txns.lock().await;
        is_current(&txns, p)
    }

    /// Every marker of `done` was written: the transaction is complete, if
    /// it is still the one that was prepared.
    pub async fn txn_completed(&self, done: &Prepared) -> Result<(), i16> {
        let slot = self.slot_of_prepared(done)?;
        let mut txns = slot.txns.lock().await;
        if !is_current(&txns, done) {
            return Ok(());
        }
        let mut r = done.record.clone();
        r.complete(self.config.clock.now_ms());
        vfs::fault_point!(slot.vfs, "txn-complete.markers-written");
        slot.persist_txn(&mut txns, r).await
    }

    /// The slot `p` was prepared in, if this broker still coordinates it
    /// in the same epoch.
    fn slot_of_prepared(&self, p: &Prepared) -> Result<std::sync::Arc<Slot>, i16> {
        let slot = self.txn_slot(&p.record.transactional_id)?;
        if slot.epoch != p.coordinator_epoch {
            return Err(code(ResponseError::NotCoordinator));
        }
        Ok(slot)
    }

    /// A transactional id's state, for DescribeTransactions.
    pub async fn describe_txn(&self, id: &str) -> Result<TxnRecord, i16> {
        let slot = self.txn_slot(id)?;
        let mut txns = slot.txns.lock().await;
        let record = match slot.txn_entry(&mut txns, id).await? {
            None => return Err(code(ResponseError::TransactionalIdNotFound)),
            Some(e) => e.record.clone(),
        };
        drop(txns);
        slot.confirm().await?;
        Ok(record)
    }

    /// The transactional ids of every slot this broker coordinates.
    pub async fn list_txns(&self) -> Vec<TxnRecord> {
        let mut out = Vec::new();
        for slot in self.led() {
            out.extend(slot.txns.lock().await.values().map(|e| e.record.clone()));
        }
        out
    }
}

/// Whether the slot still holds `p` exactly as it was prepared (not
/// completed since, nor replaced by a later transaction of the id).
fn is_current(txns: &BTreeMap<String, Entry>, p: &Prepared) -> bool {
    txns.get(&p.record.transactional_id)
        .is_some_and(|e| e.record == p.record)
}

/// Kafka's transaction.max.timeout.ms default (15 minutes).
pub const MAX_TRANSACTION_TIMEOUT_MS: i32 = 900_000;
