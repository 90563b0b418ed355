//! The transactional ids as a coordinator slot holds them: their record
//! on the volume and how a takeover loads them. Apart from `txn` (the
//! coordination) so that the slot (`groups::Slot`), which holds them, and
//! the coordinator, which works on the slot, do not import each other.

pub mod record;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;
use vfs::{DirEntry, Vfs};

use crate::slot_files;
use record::{TxnRecord, TxnState};

/// A transactional id as its slot holds it.
pub struct Entry {
    pub record: TxnRecord,
    /// The epoch of its newest file on the volume.
    pub(crate) stored: Option<u32>,
    /// When an open transaction times out (monotonic clock: liveness only).
    pub(crate) deadline: Option<Instant>,
}

impl Entry {
    pub(crate) fn new(record: TxnRecord, stored: Option<u32>, now: Instant) -> Self {
        let deadline = (record.state == TxnState::Ongoing).then(|| deadline(&record, now));
        Self {
            record,
            stored,
            deadline,
        }
    }
}

pub(crate) fn deadline(r: &TxnRecord, now: Instant) -> Instant {
    now + Duration::from_millis(u64::try_from(r.timeout_ms).unwrap_or(0))
}

/// The transactional ids a takeover's listing shows, each from its newest
/// file; ids a stale listing hides are loaded by name when first asked for.
/// A file that cannot be read fails the takeover (retried in a new epoch):
/// an open transaction nobody loaded would never time out, and would hold
/// its partitions' last stable offset back for good once its producer is
/// gone.
pub(crate) async fn load_listed(
    vfs: &dyn Vfs,
    slot: u32,
    epoch: u32,
    listing: &[DirEntry],
) -> std::io::Result<BTreeMap<String, Entry>> {
    let mut newest: BTreeMap<&str, u32> = BTreeMap::new();
    for e in listing {
        if let Some((hash, file_epoch)) = slot_files::parse_name::<TxnRecord>(&e.name) {
            let n = newest.entry(hash).or_insert(file_epoch);
            *n = (*n).max(file_epoch);
        }
    }
    let now = Instant::now();
    let mut out = BTreeMap::new();
    for (hash, file_epoch) in newest {
        let path = slot_files::path_of_hash::<TxnRecord>(slot, hash, file_epoch);
        match slot_files::read_at::<TxnRecord>(vfs, &path).await {
            // The newest by name: a file of an epoch above ours cannot
            // exist (ours is claimed), so this is what `load` would find.
            Ok(Some(r)) if file_epoch <= epoch => {
                out.insert(
                    r.transactional_id.clone(),
                    Entry::new(r, Some(file_epoch), now),
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "transaction not loaded");
                return Err(e);
            }
        }
    }
    Ok(out)
}
