//! A group, or a transactional id, as a new coordinator would load it
//! from the volume, read with fresh opens only: what the simulator's
//! observer holds against what it saw acknowledged (an acknowledged commit
//! or InitProducerId must be in the file a successor loads, however the
//! coordinator that took it died).

use std::io;

use vfs::Vfs;

use super::store::{self, GroupRecord};
use crate::log::audit::newest_claimed_epoch;
use crate::slot_files::{self, SlotRecord};
use crate::txn_store::record::TxnRecord;

/// What a new coordinator of a key's slot would load now. An error when
/// the volume said no, or when the slot moved to a newer epoch during the
/// read (its files may have changed under it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuccessorView<T = GroupRecord> {
    /// The slot's newest claimed coordinator epoch.
    pub newest_epoch: u32,
    /// The newest file of the key up to that epoch, as
    /// `slot_files::load` finds it, and the epoch it belongs to; `None`
    /// when the key has no file.
    pub record: Option<(T, u32)>,
}

/// A consumer group as a new coordinator would load it.
pub async fn successor_view(vfs: &dyn Vfs, group_id: &str) -> io::Result<SuccessorView> {
    view(vfs, group_id).await
}

/// A transactional id as a new coordinator would load it when its
/// producer's next InitProducerId or EndTxn arrives.
pub async fn txn_successor_view(
    vfs: &dyn Vfs,
    transactional_id: &str,
) -> io::Result<SuccessorView<TxnRecord>> {
    view(vfs, transactional_id).await
}

async fn view<T: SlotRecord>(vfs: &dyn Vfs, key: &str) -> io::Result<SuccessorView<T>> {
    let slot = super::slot_of(key);
    let dir = store::slot_dir(slot);
    let newest_epoch = newest_claimed_epoch(vfs, &dir, &[]).await?;
    let record = slot_files::load::<T>(vfs, slot, key, newest_epoch).await?;
    // A newer coordinator that claimed meanwhile may have written its file
    // and removed the one this read was looking for: no view then.
    if newest_claimed_epoch(vfs, &dir, &[]).await? != newest_epoch {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("slot {slot} moved past epoch {newest_epoch} while it was read"),
        ));
    }
    Ok(SuccessorView {
        newest_epoch,
        record,
    })
}

#[cfg(test)]
mod tests {
    use super::super::store::tests::record;
    use super::*;
    use crate::log::fence::claim_epoch;
    use std::path::Path;
    use vfs::MemVfs;
    use vfs::durable::ClaimToken;

    #[tokio::test]
    async fn a_successor_sees_the_newest_file_up_to_the_newest_claim() {
        let v = MemVfs::new();
        let slot = super::super::slot_of("g");
        let dir = store::slot_dir(slot);
        v.mkdir(Path::new("groups")).await.unwrap();
        let view = successor_view(&v, "g").await.unwrap();
        assert_eq!((view.newest_epoch, view.record), (0, None));
        v.mkdir(&dir).await.unwrap();
        let token = ClaimToken::fresh("test");
        for epoch in 1..=3 {
            claim_epoch(&v, &dir, epoch, &token).await.unwrap();
        }
        store::save(&v, slot, 1, &record(5), None).await.unwrap();
        // Epoch 2's coordinator wrote its file but never removed epoch 1's.
        crate::stored::write_json(&v, &store::path(slot, "g", 2), "group", &record(9))
            .await
            .unwrap();
        let view = successor_view(&v, "g").await.unwrap();
        assert_eq!(view.newest_epoch, 3);
        assert_eq!(view.record, Some((record(9), 2)));
    }
}
