//! Offsets by timestamp (ListOffsets) and by leader epoch (KIP-320).

use super::*;

impl PartitionLog {
    /// Each readable segment with how far it may be read, the offset after
    /// its last batch and its largest batch max timestamp, from one view.
    pub(super) fn timed_segments(&self) -> (Vec<(SegmentMeta, u64, i64, i64)>, i64) {
        let v = lock(&self.view);
        let segments = v
            .segments
            .iter()
            .map(|s| match s.state {
                SegmentState::Sealed {
                    end_position,
                    next_offset,
                    max_timestamp,
                } => (s.clone(), end_position, next_offset, max_timestamp),
                SegmentState::Active { .. } => (
                    s.clone(),
                    v.active_end,
                    v.high_watermark,
                    v.active_max_timestamp,
                ),
            })
            .collect();
        (segments, v.log_start_offset)
    }

    /// The first batch of `seg` before `limit` whose max timestamp is at
    /// least `ts`, whole.
    pub(super) async fn batch_reaching(
        &self,
        seg: &SegmentMeta,
        limit: u64,
        ts: i64,
    ) -> io::Result<Option<Bytes>> {
        let file = self.handle(seg).await?;
        let index = self.index_of(seg, file.as_ref(), limit).await?;
        let from = lock(&index).position_for_timestamp(ts).unwrap_or(0);
        first_batch_reaching(file.as_ref(), from, limit, ts).await
    }

    /// The first record with a timestamp at or after `ts` (ListOffsets by
    /// time); `None` if there is none. Inside a compressed batch, whose
    /// records kaas does not decode, the batch's first offset and max
    /// timestamp stand for it.
    pub async fn offset_for_timestamp(&self, ts: i64) -> Result<Option<TimestampOffset>, LogError> {
        let (segments, _) = self.timed_segments();
        for (seg, limit, _, max_timestamp) in &segments {
            if *max_timestamp < ts {
                continue;
            }
            let Some(whole) = self.batch_reaching(seg, *limit, ts).await? else {
                continue;
            };
            let h = batch::parse(&whole)?;
            let exact = batch::record_times(&whole)
                .and_then(|times| times.into_iter().find(|&(_, t)| t >= ts));
            let (offset, timestamp) = match exact {
                Some((delta, t)) => (h.base_offset + delta, t),
                None => (h.base_offset, h.max_timestamp),
            };
            return Ok(Some(TimestampOffset {
                offset,
                timestamp,
                leader_epoch: h.leader_epoch,
            }));
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the record with the largest timestamp, the
    /// first of several that share it, as Kafka picks it: the first segment
    /// and in it the first batch reaching the largest max timestamp. Inside a
    /// compressed batch the batch's last offset stands for the record, as in
    /// Kafka's compressed v2 batches. `None` for a log with no records.
    pub async fn offset_of_max_timestamp(&self) -> Result<Option<TimestampOffset>, LogError> {
        let (segments, start) = self.timed_segments();
        let mut best: Option<&(SegmentMeta, u64, i64, i64)> = None;
        for s in &segments {
            let (_, limit, next_offset, max_timestamp) = s;
            // Empty, or wholly below the log start: deleted, not yet unlinked.
            if *limit == 0 || *next_offset <= start {
                continue;
            }
            if best.is_none_or(|b| *max_timestamp > b.3) {
                best = Some(s);
            }
        }
        let Some((seg, limit, _, max_timestamp)) = best else {
            return Ok(None);
        };
        let Some(whole) = self.batch_reaching(seg, *limit, *max_timestamp).await? else {
            return Ok(None);
        };
        let h = batch::parse(&whole)?;
        Ok(Some(TimestampOffset {
            offset: batch::offset_of_max_timestamp(&whole).unwrap_or(h.last_offset()),
            timestamp: h.max_timestamp,
            leader_epoch: h.leader_epoch,
        }))
    }

    /// OffsetForLeaderEpoch: the end of leader epoch `requested` and the
    /// largest epoch at or below it that wrote records, from the segment
    /// list (see `epochs`); the high watermark for the current epoch.
    pub fn epoch_end_offset(&self, requested: i32) -> (i32, i64) {
        let v = lock(&self.view);
        let starts = epochs::epoch_starts(
            &v.segments,
            v.high_watermark,
            v.log_start_offset,
            self.epoch,
        );
        epochs::end_offset_for(&starts, requested, v.high_watermark)
    }
}
