//! Step 3 of a pass: the cleaned segments written, each made durable
//! before the manifest names it.

use super::scan::{OffsetMap, Throttle, WRITE_CHUNK, corrupt};
use super::*;

/// Whether a data batch belongs to an aborted transaction.
pub(super) fn aborted_data(h: &batch::BatchHeader, aborted: &[AbortedTxn]) -> bool {
    h.is_transactional()
        && h.control.is_none()
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.base_offset <= a.last_offset
        })
}

/// The records of a batch (its records section `body`) to keep; `None`
/// keeps the batch whole. A tombstone goes once its batch's delete horizon
/// passed.
pub(super) fn keep<'a>(
    body: &'a [u8],
    h: &batch::BatchHeader,
    map: &OffsetMap,
    end: i64,
    now_ms: i64,
) -> Option<Vec<RawRecord<'a>>> {
    if h.control.is_some() || h.base_offset >= end {
        return None;
    }
    let expired = records::delete_horizon(h).is_some_and(|t| t <= now_ms);
    let all = records::records_in(body, h)?;
    Some(
        all.into_iter()
            .filter(|r| {
                if r.offset >= end {
                    return true;
                }
                let Some(key) = r.key else {
                    return false; // Kafka's cleaner drops records without a key
                };
                let newest = map.newest(key).is_none_or(|o| o <= r.offset);
                newest && !(r.value.is_none() && expired)
            })
            .collect(),
    )
}

/// A cleaned segment being written.
pub(super) struct Output {
    meta: SegmentMeta,
    file: Option<Box<dyn VfsFile>>,
    pending: BytesMut,
    position: u64,
    index: SegmentIndex,
    max_timestamp: i64,
}

impl Output {
    /// A cleaned segment in the making, starting where `seg` starts.
    fn starting(seg: &SegmentMeta, next: i64, pass: Cleaning, cfg: &LogConfig) -> Self {
        Output {
            meta: SegmentMeta {
                base_offset: seg.base_offset,
                epoch: seg.epoch,
                cleaned: Some(pass),
                state: SegmentState::Sealed {
                    end_position: 0,
                    next_offset: next,
                    max_timestamp: -1,
                },
                adopted_until: seg.adopted_until,
                given_up_from: None,
            },
            file: None,
            pending: BytesMut::new(),
            position: 0,
            index: SegmentIndex::new(cfg.index_interval_bytes),
            max_timestamp: -1,
        }
    }
}

impl PartitionLog {
    /// Step 3: the kept records of `sources`, in new segments of at most
    /// `segment.bytes` each, every one durable and closed.
    pub(super) async fn write_cleaned(
        &self,
        sources: &[SegmentMeta],
        (map, end, (now_ms, horizon), pass): (&OffsetMap, i64, (i64, i64), Cleaning),
        (aborted, created): (&[AbortedTxn], &mut Vec<SegmentId>),
        throttle: &mut Throttle,
        stats: &mut Compacted,
    ) -> io::Result<Vec<SegmentMeta>> {
        let cfg = self.cfg();
        let mut done = Vec::new();
        let mut out: Option<(Output, u64)> = None;
        let mut opaque_before = false;
        // Producers with transactional data kept since their last marker.
        let mut open_data: std::collections::BTreeSet<i64> = std::collections::BTreeSet::new();
        // A marker whose transaction's data is gone goes at its horizon;
        // after a batch the pass could not read, not at all (its data may
        // be in there).
        let expire_marker = |opaque: bool| if opaque { i64::MIN } else { now_ms };
        for seg in sources {
            let (size, next, source_max_ts) = sealed(seg).unwrap_or_default();
            // A cleaned segment holds one epoch's records (the segment list
            // is where OffsetForLeaderEpoch finds each epoch's start), and
            // a takeover's adopted tail only at its start.
            let apart = out.as_ref().is_some_and(|(o, read)| {
                read + size > cfg.segment_bytes
                    || o.meta.epoch != seg.epoch
                    || seg.adopted_until.is_some()
            });
            if apart {
                if let Some((o, _)) = out.take() {
                    done.push(self.finish(o, stats).await?);
                }
            }
            let (o, read) = out.get_or_insert_with(|| (Output::starting(seg, next, pass, &cfg), 0));
            *read += size;
            if created.last() != Some(&o.meta.id()) {
                created.push(o.meta.id());
            }
            // Retention by time judges the cleaned segment as it judged its
            // sources (an empty one too).
            o.max_timestamp = o.max_timestamp.max(source_max_ts);
            o.meta.state = SegmentState::Sealed {
                end_position: 0,
                next_offset: next,
                max_timestamp: -1,
            };
            stats.segments_read += 1;
            stats.bytes_read += size;
            let mut batches = self.batches(seg).await?;
            while let Some(b) = batches.next(throttle).await? {
                let h = batch::parse(&b).map_err(|e| corrupt(&e.to_string()))?;
                stats.records_read += h.records.max(0) as u64;
                if aborted_data(&h, aborted) {
                    continue;
                }
                if h.control.is_some() && h.base_offset < end {
                    // A marker goes once nothing of its transaction is left
                    // (as Kafka's cleaner does), delete.retention.ms after
                    // the pass that first found it so.
                    if !open_data.remove(&h.producer_id) {
                        match records::delete_horizon(&h) {
                            Some(t) if t <= expire_marker(opaque_before) => {
                                stats.markers_removed.push((h.producer_id, h.base_offset));
                                continue;
                            }
                            Some(t) => stats.horizon(Some(t)),
                            None => {
                                let (stamped, kh) = stamp_marker(&b, &h, horizon, stats)?;
                                self.put(o, stamped, &kh, throttle).await?;
                                continue;
                            }
                        }
                    }
                }
                let body = (h.control.is_none() && h.base_offset < end)
                    .then(|| records::body(&b, &h).ok())
                    .flatten();
                // A compressed batch the pass cannot read (it expands past
                // the bound, or does not decompress) stays whole; an older
                // value of a tombstone's key may sit in it, so no
                // tombstone after one goes.
                let opaque = h.control.is_none()
                    && records::is_compressed(&h)
                    && h.base_offset < end
                    && body.is_none();
                if opaque {
                    stats.compressed_batches += 1;
                }
                let expire_at = if opaque_before { i64::MIN } else { now_ms };
                opaque_before |= opaque;
                let kept = body
                    .as_deref()
                    .and_then(|d| keep(d, &h, map, end, expire_at));
                let Some((kept, tombstones)) = kept_batch(&b, &h, kept, end, horizon)? else {
                    continue;
                };
                let kh = batch::parse(&kept).map_err(|e| corrupt(&e.to_string()))?;
                if tombstones {
                    stats.horizon(records::delete_horizon(&kh));
                }
                if kh.is_transactional() && kh.control.is_none() {
                    open_data.insert(kh.producer_id);
                }
                stats.records_kept += kh.records.max(0) as u64;
                self.put(o, kept, &kh, throttle).await?;
            }
        }
        if let Some((o, _)) = out.take() {
            done.push(self.finish(o, stats).await?);
        }
        Ok(done)
    }

    /// Appends a kept batch to the output, writing a chunk when enough is
    /// pending.
    pub(super) async fn put(
        &self,
        o: &mut Output,
        b: Bytes,
        h: &batch::BatchHeader,
        throttle: &mut Throttle,
    ) -> io::Result<()> {
        o.index.add(o.position + o.pending.len() as u64, h);
        o.max_timestamp = o.max_timestamp.max(h.max_timestamp);
        o.pending.extend_from_slice(&b);
        if o.pending.len() >= WRITE_CHUNK {
            self.flush_out(o, throttle).await?;
        }
        Ok(())
    }

    pub(super) async fn create_out(&self, o: &mut Output) -> io::Result<()> {
        if o.file.is_none() {
            let path = self.dir.join(o.meta.file_name());
            o.file = Some(self.vfs.open(&path, OpenOptions::create_new()).await?);
            vfs::fault_point!(self.vfs, "compaction.segment-created");
        }
        Ok(())
    }

    /// Removes the files of a pass that will not swap them in, and their
    /// indexes from memory.
    pub(super) async fn forget_outputs(&self, ids: &[SegmentId]) {
        {
            let mut v = lock(&self.view);
            for id in ids {
                v.indexes.remove(id);
            }
        }
        let files = ids
            .iter()
            .flat_map(|id| ["log", "index", "timeindex"].map(|e| self.dir.join(id.file(e))))
            .collect();
        self.remove_files(files).await;
    }

    pub(super) async fn flush_out(
        &self,
        o: &mut Output,
        throttle: &mut Throttle,
    ) -> io::Result<()> {
        if o.pending.is_empty() {
            return Ok(());
        }
        self.create_out(o).await?;
        let data = o.pending.split().freeze();
        let n = data.len() as u64;
        if let Some(f) = &o.file {
            f.write_at(o.position, data).await?;
        }
        o.position += n;
        throttle.spend(n).await;
        Ok(())
    }

    /// Makes an output durable and closed, with its indexes. A segment
    /// left with no record is still written: it keeps its epoch's place in
    /// the segment list.
    pub(super) async fn finish(
        &self,
        mut o: Output,
        stats: &mut Compacted,
    ) -> io::Result<SegmentMeta> {
        let mut unthrottled = Throttle::new(None);
        self.create_out(&mut o).await?;
        self.flush_out(&mut o, &mut unthrottled).await?;
        let Some(file) = o.file.take() else {
            return Err(corrupt("a cleaned segment without a file"));
        };
        file.fsync().await?;
        file.close().await?;
        let next = sealed(&o.meta).map_or(0, |s| s.1);
        o.meta.state = SegmentState::Sealed {
            end_position: o.position,
            next_offset: next,
            max_timestamp: o.max_timestamp,
        };
        let (index, timeindex) = o.index.encode();
        for (ext, data) in [("index", index), ("timeindex", timeindex)] {
            let path = self.dir.join(o.meta.id().file(ext));
            // Indexes can be rebuilt from the log; a failure only costs a scan.
            if let Err(e) = atomic_replace(self.vfs.as_ref(), &path, data).await {
                tracing::warn!(index = %path.display(), error = %e, "segment index not written");
            }
        }
        stats.segments_written += 1;
        stats.bytes_written += o.position;
        lock(&self.view)
            .indexes
            .insert(o.meta.id(), Arc::new(Mutex::new(o.index)));
        Ok(o.meta)
    }
}

/// A marker its pass keeps for now, stamped with the delete horizon it
/// goes at.
fn stamp_marker(
    b: &Bytes,
    h: &batch::BatchHeader,
    horizon: i64,
    stats: &mut Compacted,
) -> io::Result<(Bytes, batch::BatchHeader)> {
    let body = records::body(b, h)?;
    let all =
        records::records_in(&body, h).ok_or_else(|| corrupt("an unreadable transaction marker"))?;
    let stamped = records::rebuild(b, &all, Some(horizon))?;
    let kh = batch::parse(&stamped).map_err(|e| corrupt(&e.to_string()))?;
    stats.horizon(records::delete_horizon(&kh));
    stats.records_kept += kh.records.max(0) as u64;
    Ok((stamped, kh))
}

/// The batch a pass writes for `b` given the records it keeps (`None`: all
/// of it, unread), and whether a kept record is a tombstone; `None` when
/// nothing of it is kept.
fn kept_batch(
    b: &Bytes,
    h: &batch::BatchHeader,
    kept: Option<Vec<RawRecord<'_>>>,
    end: i64,
    horizon: i64,
) -> io::Result<Option<(Bytes, bool)>> {
    let Some(k) = kept else {
        return Ok(Some((b.clone(), false)));
    };
    if k.is_empty() {
        return Ok(None);
    }
    let tombstones = k.iter().any(|r| r.value.is_none() && r.offset < end);
    // Its first pass as its key's newest starts a tombstone's
    // delete.retention.ms.
    let stamp = (tombstones && records::delete_horizon(h).is_none()).then_some(horizon);
    let batch = if stamp.is_none() && k.len() == h.records as usize {
        b.clone()
    } else {
        records::rebuild(b, &k, stamp)?
    };
    Ok(Some((batch, tombstones)))
}
