//! Where each leader epoch starts in the log (Kafka's leader-epoch cache),
//! for OffsetForLeaderEpoch (KIP-320).
//!
//! kaas keeps no separate epoch file: every segment is written by one
//! leader epoch, named for it, and stamps its batches with it, and the
//! manifest lists segments in offset order, so the epoch boundaries are the
//! segment list read from the start.

use super::manifest::{SegmentMeta, SegmentState};

/// No epoch / no offset, as Kafka answers them.
pub(crate) const UNDEFINED_EPOCH: i32 = -1;
pub(crate) const UNDEFINED_OFFSET: i64 = -1;

/// The first offset of one leader epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpochStart {
    pub epoch: u32,
    pub start_offset: i64,
}

/// Every epoch that wrote records, with its first offset, in order, then
/// the current epoch from where it took over. An epoch that wrote nothing
/// (a leader that took over and lost the partition before an append, or
/// whose only bytes were an unacknowledged tail cut at the next takeover)
/// has no entry, as Kafka drops an epoch when the next one starts at the
/// same offset. Trimmed at the log start as Kafka's `truncateFromStart`:
/// of the epochs starting at or before it only the last stays, starting
/// there.
pub(crate) fn epoch_starts(
    segments: &[SegmentMeta],
    high_watermark: i64,
    log_start_offset: i64,
    current: u32,
) -> Vec<EpochStart> {
    let mut starts: Vec<EpochStart> = Vec::new();
    let mut previous_epoch = None;
    for s in segments {
        let next = match s.state {
            SegmentState::Sealed { next_offset, .. } => next_offset,
            SegmentState::Active { .. } => high_watermark,
        };
        // Adopted batches are the previous segment's epoch's (its unsealed
        // tail, copied here at takeover); this epoch starts after them.
        let own_start = s.adopted_until.unwrap_or(s.base_offset);
        if let Some(prev) = previous_epoch.filter(|_| own_start > s.base_offset) {
            if starts.last().is_none_or(|e: &EpochStart| e.epoch != prev) {
                starts.push(EpochStart {
                    epoch: prev,
                    start_offset: s.base_offset,
                });
            }
        }
        previous_epoch = Some(s.epoch);
        let written = next > own_start;
        if (!written && s.epoch != current) || starts.last().is_some_and(|e| e.epoch == s.epoch) {
            continue;
        }
        starts.push(EpochStart {
            epoch: s.epoch,
            start_offset: own_start,
        });
    }
    let below = starts
        .iter()
        .take_while(|e| e.start_offset <= log_start_offset)
        .count();
    if below > 0 {
        starts.drain(..below - 1);
        starts[0].start_offset = log_start_offset;
    }
    starts
}

/// Kafka's `LeaderEpochFileCache.endOffsetFor`: the end of `requested`
/// (the first offset of the next epoch that wrote records) with the
/// largest known epoch at or below it; the log end for the current epoch;
/// undefined for an undefined or a future epoch.
pub(crate) fn end_offset_for(starts: &[EpochStart], requested: i32, log_end: i64) -> (i32, i64) {
    let undefined = (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
    if requested == UNDEFINED_EPOCH {
        return undefined;
    }
    let requested_wide = i64::from(requested);
    if starts
        .last()
        .is_some_and(|e| i64::from(e.epoch) == requested_wide)
    {
        return (requested, log_end);
    }
    let Some(higher) = starts.iter().find(|e| i64::from(e.epoch) > requested_wide) else {
        return undefined;
    };
    match starts
        .iter()
        .rev()
        .find(|e| i64::from(e.epoch) <= requested_wide)
    {
        // Older than anything kept (retention, or an epoch that wrote
        // nothing before the first kept one): the next epoch's start bounds it.
        None => (requested, higher.start_offset),
        Some(floor) => (
            i32::try_from(floor.epoch).unwrap_or(i32::MAX),
            higher.start_offset,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(base_offset: i64, epoch: u32, next_offset: i64) -> SegmentMeta {
        SegmentMeta {
            adopted_until: None,
            cleaned: None,
            given_up_from: None,
            base_offset,
            epoch,
            state: SegmentState::Sealed {
                end_position: 0,
                next_offset,
                max_timestamp: -1,
            },
        }
    }

    fn active(base_offset: i64, epoch: u32) -> SegmentMeta {
        SegmentMeta {
            adopted_until: None,
            cleaned: None,
            given_up_from: None,
            base_offset,
            epoch,
            state: SegmentState::Active {
                checkpoint_position: 0,
                checkpoint_next_offset: base_offset,
                max_timestamp: -1,
            },
        }
    }

    fn start(epoch: u32, start_offset: i64) -> EpochStart {
        EpochStart {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn epochs_that_wrote_nothing_leave_no_boundary() {
        // Epoch 1 wrote 0-9 over two segments, 2 took over and wrote
        // nothing, 3 wrote 10-14, 5 leads now and has written 15-19.
        let segments = [
            sealed(0, 1, 6),
            sealed(6, 1, 10),
            sealed(10, 2, 10),
            sealed(10, 3, 15),
            active(15, 5),
        ];
        let starts = epoch_starts(&segments, 20, 0, 5);
        assert_eq!(starts, [start(1, 0), start(3, 10), start(5, 15)]);
        assert_eq!(end_offset_for(&starts, 1, 20), (1, 10));
        assert_eq!(end_offset_for(&starts, 2, 20), (1, 10), "2 wrote nothing");
        assert_eq!(end_offset_for(&starts, 3, 20), (3, 15));
        assert_eq!(end_offset_for(&starts, 4, 20), (3, 15));
        assert_eq!(end_offset_for(&starts, 5, 20), (5, 20), "current: log end");
        assert_eq!(end_offset_for(&starts, 6, 20), (-1, -1), "future");
        assert_eq!(end_offset_for(&starts, -1, 20), (-1, -1));
        assert_eq!(end_offset_for(&starts, 0, 20), (0, 0), "before all");
    }

    #[test]
    fn the_current_epoch_counts_from_its_takeover_even_before_an_append() {
        let segments = [sealed(0, 1, 4), active(4, 2)];
        let starts = epoch_starts(&segments, 4, 0, 2);
        assert_eq!(starts, [start(1, 0), start(2, 4)]);
        assert_eq!(end_offset_for(&starts, 1, 4), (1, 4));
        assert_eq!(end_offset_for(&starts, 2, 4), (2, 4));
        // A brand-new partition: only the current epoch, from offset 0.
        let starts = epoch_starts(&[active(0, 1)], 0, 0, 1);
        assert_eq!(starts, [start(1, 0)]);
        assert_eq!(end_offset_for(&starts, 1, 0), (1, 0));
    }

    #[test]
    fn the_log_start_trims_epochs_like_kafka() {
        let segments = [
            sealed(0, 1, 10),
            sealed(10, 2, 20),
            sealed(20, 3, 30),
            active(30, 4),
        ];
        let starts = epoch_starts(&segments, 35, 25, 4);
        assert_eq!(starts, [start(3, 25), start(4, 30)]);
        assert_eq!(end_offset_for(&starts, 1, 35), (1, 25));
        assert_eq!(end_offset_for(&starts, 3, 35), (3, 30));
        let starts = epoch_starts(&segments, 35, 20, 4);
        assert_eq!(starts, [start(3, 20), start(4, 30)]);
    }
}
