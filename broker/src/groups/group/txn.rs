//! A group's offsets committed inside transactions: pending until the
//! transaction's marker commits or aborts them.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::Group;
use crate::groups::store::OffsetRecord;

/// A producer's offsets of its open transaction: its epoch, the offsets.
pub type PendingOffsets = (i16, BTreeMap<(String, i32), OffsetRecord>);

/// A WriteTxnMarkers entry for a group's offsets.
#[derive(Clone, Copy, Debug)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

/// A group's transactional state before a marker, see `Group::txn_snapshot`.
pub struct TxnSnapshot {
    pending: BTreeMap<i64, PendingOffsets>,
    offsets: BTreeMap<(String, i32), OffsetRecord>,
    marker_epochs: BTreeMap<i64, i32>,
}

/// Why a marker changed nothing in a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerRefused {
    /// From a coordinator epoch older than one already applied.
    ZombieCoordinator,
    /// For an older producer epoch than the pending offsets'.
    StaleEpoch,
}

impl Group {
    /// The partitions with offsets of an open transaction.
    pub fn pending_txn_partitions(&self) -> std::collections::BTreeSet<(String, i32)> {
        self.pending_txn
            .values()
            .flat_map(|(_, offsets)| offsets.keys().cloned())
            .collect()
    }

    /// What a transaction marker may change, to put back if it cannot be
    /// persisted.
    pub fn txn_snapshot(&self) -> TxnSnapshot {
        TxnSnapshot {
            pending: self.pending_txn.clone(),
            offsets: self.offsets.clone(),
            marker_epochs: self.marker_epochs.clone(),
        }
    }

    pub fn restore_txn(&mut self, s: TxnSnapshot) {
        self.pending_txn = s.pending;
        self.offsets = s.offsets;
        self.marker_epochs = s.marker_epochs;
    }

    /// A transaction marker reached the group: its offsets take effect on
    /// commit and are dropped on abort. Checked like a marker appended to
    /// a partition: one from a coordinator epoch older than a marker this
    /// producer's group offsets already took (a deposed coordinator's, late)
    /// or for an older producer epoch than the pending offsets' changes
    /// nothing. `Ok(false)`: nothing changed, nothing to persist.
    pub fn end_txn(&mut self, marker: TxnMarker) -> Result<bool, MarkerRefused> {
        let TxnMarker {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
        } = marker;
        let newest = self.marker_epochs.get(&producer_id).copied();
        if newest.is_some_and(|e| coordinator_epoch < e) {
            return Err(MarkerRefused::ZombieCoordinator);
        }
        match self.pending_txn.entry(producer_id) {
            Entry::Occupied(p) if producer_epoch < p.get().0 => Err(MarkerRefused::StaleEpoch),
            Entry::Occupied(p) => {
                let (_, offsets) = p.remove();
                if commit {
                    self.offsets.extend(offsets);
                }
                self.marker_epochs.insert(producer_id, coordinator_epoch);
                Ok(true)
            }
            // Nothing pending, but a newer coordinator: remembered, so that
            // its predecessor's late marker cannot end a later transaction.
            Entry::Vacant(_) if newest.is_none_or(|e| coordinator_epoch > e) => {
                self.marker_epochs.insert(producer_id, coordinator_epoch);
                Ok(true)
            }
            Entry::Vacant(_) => Ok(false),
        }
    }
}
